"""Celery tasks: thin faces on the services."""

from celery import shared_task


@shared_task(name="kvscope.ingest_upload", acks_late=True)
def ingest_upload_task(upload_id: int) -> None:
    from console.services import upload_ingest

    upload_ingest(upload_id=upload_id)
