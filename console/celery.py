"""The Celery application. Settings come from Django's (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("kvscope")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _requeue_undispatched(sender=None, **kwargs) -> None:
    """Jobs whose dispatch failed while the broker was down are queued again as soon as a
    worker (so a broker) is back."""
    app.send_task("kvscope.requeue_undispatched")
