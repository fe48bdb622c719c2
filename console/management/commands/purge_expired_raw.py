"""python manage.py purge_expired_raw — delete kept raw uploads past their expiry.

Run it daily from cron (or let Celery beat run console.tasks.purge_expired_raw_task):
    15 3 * * *  cd /srv/kvscope && .venv/bin/python manage.py purge_expired_raw
"""

from django.core.management.base import BaseCommand

from console.services import purge_expired_raw


class Command(BaseCommand):
    help = "Delete raw upload files kept past their keep-until date."

    def handle(self, *args, **opts) -> None:
        purged = purge_expired_raw()
        self.stdout.write(f"deleted the raw files of {purged} upload(s)")
