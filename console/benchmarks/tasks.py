"""Celery tasks of the benchmarks wing: thin faces on its services (load by id, call)."""

from celery import shared_task

from console.benchmarks.predictions import PREDICT_TASK, run_predict


@shared_task(name=PREDICT_TASK, acks_late=True)
def predict_run_task(run_id: int) -> None:
    run_predict(run_id)
