"""python manage.py bootstrap — first run: create the first account if there is none.

Run by `make run`. On a terminal it asks for a username and password and creates a
superuser holding every role; without a terminal it only says how to create one.
"""

from __future__ import annotations

import getpass
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand

from console.roles import ROLES, ensure_roles


class Command(BaseCommand):
    help = "Create the first account (all roles) when the database has none."

    def handle(self, *args, **opts) -> None:
        ensure_roles()
        User = get_user_model()
        if User.objects.exists():
            return
        if not sys.stdin.isatty():
            self.stdout.write(
                "No account yet. Create one with:\n"
                "  .venv/bin/python manage.py adduser NAME --role analyst\n"
                "  (or manage.py createsuperuser for an administrator)"
            )
            return
        self.stdout.write("No account yet: let's create the first one (an administrator).")
        username = input("Username [admin]: ").strip() or "admin"
        while True:
            password = getpass.getpass("Password: ")
            if password != getpass.getpass("Password (again): "):
                self.stdout.write("The passwords differ; try again.")
                continue
            try:
                validate_password(password, User(username=username))
            except ValidationError as exc:
                self.stdout.write(" ".join(exc.messages))
                continue
            break
        user = User.objects.create_superuser(username=username, email="", password=password)
        user.groups.set(Group.objects.filter(name__in=ROLES))
        self.stdout.write(f"Created {username} (administrator, all roles).")
