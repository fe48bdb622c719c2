"""python manage.py purge_expired_raw — delete kept raw uploads past their expiry, and the
files crashes leave: temporary upload files, half-stored .part files, raw files no upload
refers to (all older than KVSCOPE_ORPHAN_SECONDS).

Run it daily from cron (or let Celery beat run console.uploads.tasks.purge_expired_raw_task):
    15 3 * * *  cd /srv/kvscope && .venv/bin/python manage.py purge_expired_raw
"""

from django.core.management.base import BaseCommand

from console.leftovers import purge_crash_leftovers, purge_unreferenced_raw
from console.uploads.storage import purge_expired_raw


class Command(BaseCommand):
    help = "Delete raw upload files kept past their keep-until date, and crash leftovers."

    def handle(self, *args, **opts) -> None:
        purged = purge_expired_raw()
        self.stdout.write(f"deleted the raw files of {purged} upload(s)")
        leftovers = purge_crash_leftovers() + purge_unreferenced_raw()
        self.stdout.write(f"deleted {leftovers} file(s) left by interrupted uploads")
