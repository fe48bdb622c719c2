"""Celery tasks: thin faces on the services (load by id, call, nothing else)."""

from celery import shared_task


@shared_task(name="kvscope.ingest_upload", acks_late=True)
def ingest_upload_task(upload_id: int) -> None:
    from console.services import upload_ingest

    upload_ingest(upload_id=upload_id)


@shared_task(name="kvscope.run_analysis", acks_late=True)
def run_analysis_task(analysis_id: int) -> None:
    from console.services import analysis_run

    analysis_run(analysis_id=analysis_id)


@shared_task(name="kvscope.purge_expired_raw")
def purge_expired_raw_task() -> int:
    from console.services import purge_expired_raw

    return purge_expired_raw()
