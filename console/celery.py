"""The Celery application. Settings come from Django's (CELERY_* names)."""

import os

from celery import Celery, bootsteps, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("kvscope")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The wings whose tasks.py a worker imports when it starts (the wings are packages inside
# the console app, which Django's own list of apps does not name); every process, web or
# worker, also imports them once Django is set up (console.apps), so console.jobs finds
# each task by its name.
TASK_PACKAGES = ["console.uploads"]
app.autodiscover_tasks(TASK_PACKAGES)


class RequeueOnConnect(bootsteps.StartStopStep):
    """Jobs whose dispatch failed while the broker was down are queued again as soon as a
    worker (so a broker) is back: each time the worker's consumer connects, at start-up
    and after every reconnection (a broker restart while this worker ran), not only once
    when the worker starts."""

    requires = ("celery.worker.consumer.tasks:Tasks",)  # consuming again by then

    def start(self, c) -> None:
        c.app.send_task("kvscope.requeue_undispatched")


app.steps["consumer"].add(RequeueOnConnect)


@signals.worker_init.connect
def yield_to_the_pages(**_) -> None:
    """Lowers a worker's CPU priority by KVSCOPE_WORKER_NICE when it starts, before its
    pool forks: its processes, and the ingest's part processes, inherit it."""
    from django.conf import settings

    os.nice(settings.KVSCOPE_WORKER_NICE)
