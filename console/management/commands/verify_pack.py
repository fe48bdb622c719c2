"""python manage.py verify_pack FILE — check an evidence pack without the database."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from console.policies.pack_check import PackProblem, check_pack


class Command(BaseCommand):
    help = (
        "Check a policy version's evidence pack (the ZIP its page downloads) without any "
        "database: every file against the manifest, the policy's SHA-256 against its "
        "sign-off, the audit events' hash chain up to the head it records, and every byte "
        "of the ZIP. Prints a summary, or names the first problem and exits non-zero."
    )
    # the system checks are not needed to read a file (and some may read the database)
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="the evidence pack (.zip)")

    def handle(self, *args, **opts) -> None:
        path = Path(opts["file"])
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        try:
            summary = check_pack(raw)
        except PackProblem as exc:
            raise CommandError(f"{path}: {exc}") from None
        self.stdout.write(str(summary))
