"""python manage.py adduser NAME --role analyst [--password-env VAR]

Creates (or updates) an account and puts it in one or more roles. The password is asked
for interactively, or read from an environment variable for scripts.
"""

from __future__ import annotations

import getpass
import os

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from console.roles import ROLES


class Command(BaseCommand):
    help = "Create an account with a role (analyst, approver, auditor)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--role", action="append", choices=ROLES, required=True, help="repeatable"
        )
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--password-env", metavar="VAR", help="read the password from this environment variable"
        )

    def handle(self, *args, **opts) -> None:
        password = self._password(opts)
        User = get_user_model()
        with transaction.atomic():
            user, created = User.objects.get_or_create(
                username=opts["username"], defaults={"email": opts["email"]}
            )
            try:
                validate_password(password, user)
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from None
            user.set_password(password)
            user.save()
            for role in opts["role"]:
                user.groups.add(Group.objects.get(name=role))
        verb = "Created" if created else "Updated"
        self.stdout.write(f"{verb} {user.username} with role(s): {', '.join(opts['role'])}")

    def _password(self, opts) -> str:
        if opts["password_env"]:
            value = os.environ.get(opts["password_env"])
            if not value:
                raise CommandError(f"environment variable {opts['password_env']} is empty")
            return value
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("the passwords differ")
        return first
