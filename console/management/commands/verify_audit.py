"""python manage.py verify_audit — check the audit trail's hash chain."""

from django.core.management.base import BaseCommand, CommandError

from console.policies.audit import verify


class Command(BaseCommand):
    help = "Verify the audit trail's hash chain and say where it breaks."

    def handle(self, *args, **opts) -> None:
        result = verify()
        if not result.ok:
            raise CommandError(
                f"audit chain broken at event {result.broken_at} "
                f"(event #{result.events} in order): {result.reason}"
            )
        self.stdout.write(f"audit chain intact: {result.events} events")
