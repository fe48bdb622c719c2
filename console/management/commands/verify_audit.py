"""python manage.py verify_audit — check the audit trail's hash chain against its head."""

from django.core.management.base import BaseCommand, CommandError

from console.policies.audit import verify


class Command(BaseCommand):
    help = (
        "Verify the audit trail's hash chain and its head anchor, say where it breaks, and "
        "print the head (record it outside the database: a later cut then shows)."
    )

    def handle(self, *args, **opts) -> None:
        result = verify()
        if result.head_hash:
            # whoever can write the database can rewrite chain and head together; a copy
            # of this line kept elsewhere (a log, a ticket) is what catches that
            self.stdout.write(
                f"audit head: {result.head_events} events, last #{result.head_id} "
                f"sha256 {result.head_hash}"
            )
        if not result.ok:
            where = f"broken at event {result.broken_at} (event #{result.events} in order)"
            if result.broken_at is None:
                where = f"broken after {result.events} events"
            raise CommandError(f"audit chain {where}: {result.reason}")
        self.stdout.write(f"audit chain intact: {result.events} events")
