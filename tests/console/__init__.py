"""The console's tests, on the embedded default or against PostgreSQL, Redis and a worker."""
