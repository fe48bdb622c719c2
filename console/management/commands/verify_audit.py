"""python manage.py verify_audit — check the audit trail's hash chain against its head;
with --file, check an exported audit file instead, without the database."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from console.policies.audit import ChainCheck, verify
from console.policies.audit_file import AuditFileError, check_audit_file, read_audit_file


def _broken(result: ChainCheck, what: str) -> CommandError:
    where = f"broken at event {result.broken_at} (event #{result.events} in order)"
    if result.broken_at is None:
        where = f"broken after {result.events} events"
    return CommandError(f"{what} {where}: {result.reason}")


class Command(BaseCommand):
    help = (
        "Verify the audit trail's hash chain and its head anchor, say where it breaks, and "
        "print the head (record it outside the database: a later cut then shows). With "
        "--file FILE, verify a file downloaded from the audit page instead (JSON, or CSV "
        "whose first line is '# ' and the header as JSON: format, exported_at, filter, head), "
        "without the database: every event is followed from the first, the selected ones "
        "hashed again, and the chain must end where the file's head says."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--file", type=Path, help="an audit export (.json or .csv) to check offline"
        )

    def handle(self, *args, **opts) -> None:
        if opts["file"] is not None:
            self._check_file(opts["file"])
            return
        result = verify()
        self._head(result, "audit head")
        if not result.ok:
            raise _broken(result, "audit chain")
        self.stdout.write(f"audit chain intact: {result.events} events")

    def _head(self, result: ChainCheck, name: str) -> None:
        if result.head_hash:
            # whoever can write the database can rewrite chain and head together; a copy
            # of this line kept elsewhere (a log, a ticket) is what catches that
            self.stdout.write(
                f"{name}: {result.head_events} events, last #{result.head_id} "
                f"sha256 {result.head_hash}"
            )

    def _check_file(self, path: Path) -> None:
        try:
            audit_file = read_audit_file(path)
        except AuditFileError as exc:
            raise CommandError(str(exc)) from None
        result = check_audit_file(audit_file)
        # compare it with the head line kept outside kvscope: a file rewritten with its
        # head verifies, but no longer ends where the copy says
        self._head(result, "audit head (as the file records it)")
        if not result.ok:
            raise _broken(result, f"audit file {path}")
        self.stdout.write(
            f"audit file intact: {result.events} events ({audit_file.with_content} with content)"
        )
