"""The Celery application. Settings come from Django's (CELERY_* names)."""

import os

from celery import Celery, bootsteps

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("kvscope")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class RequeueOnConnect(bootsteps.StartStopStep):
    """Jobs whose dispatch failed while the broker was down are queued again as soon as a
    worker (so a broker) is back: each time the worker's consumer connects, at start-up
    and after every reconnection (a broker restart while this worker ran), not only once
    when the worker starts."""

    requires = ("celery.worker.consumer.tasks:Tasks",)  # consuming again by then

    def start(self, c) -> None:
        c.app.send_task("kvscope.requeue_undispatched")


app.steps["consumer"].add(RequeueOnConnect)
