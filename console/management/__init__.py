"""manage.py commands of the console (analyze, bootstrap, adduser, verify_audit, ...)."""
