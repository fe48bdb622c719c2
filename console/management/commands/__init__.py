"""One module a command: `python manage.py NAME` runs console/management/commands/NAME.py."""
