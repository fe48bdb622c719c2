"""The schema of the console's one Django app, migration by migration."""
