"""Celery tasks: thin faces on the services (load by id, call, nothing else).

Tasks are acknowledged late: a worker killed mid-task leaves its message unacknowledged,
and the broker hands it out again marked `redelivered`; the service then takes over the
job its dead predecessor left running. The services queue these by name (console.jobs),
so they never import this module."""

from celery import Task, shared_task

from console.jobs import TASK_OF
from console.leftovers import purge_crash_leftovers, purge_unreferenced_raw
from console.models import Analysis, Upload
from console.uploads.analyses import analysis_run
from console.uploads.parts import MERGE_TASK, PART_TASK, upload_ingest_merge, upload_ingest_part
from console.uploads.services import requeue_undispatched, upload_ingest
from console.uploads.storage import purge_expired_raw


def _redelivered(task: Task) -> bool:
    """Handed out again after its worker died (or retried after a lost connection)."""
    return bool((task.request.delivery_info or {}).get("redelivered") or task.request.retries)


@shared_task(name=TASK_OF[Upload], acks_late=True, bind=True)
def ingest_upload_task(self: Task, upload_id: int) -> None:
    upload_ingest(upload_id=upload_id, redelivered=_redelivered(self))


@shared_task(name=TASK_OF[Analysis], acks_late=True, bind=True)
def run_analysis_task(self: Task, analysis_id: int) -> None:
    analysis_run(analysis_id=analysis_id, redelivered=_redelivered(self))


@shared_task(name="kvscope.purge_expired_raw")
def purge_expired_raw_task() -> int:
    purge_crash_leftovers()  # (as the command does)
    purge_unreferenced_raw()
    return purge_expired_raw()


@shared_task(name=PART_TASK, acks_late=True, ignore_result=False)
def ingest_part_task(
    upload_id: int, index: int, start: int, end: int, first_line: int, run: str = ""
) -> int:
    """`run`: the run mark (the claim's started_at) of the ingest that split the upload; a
    part of a run taken over does nothing. "" for messages queued before it was added."""
    upload_ingest_part(
        upload_id=upload_id, index=index, start=start, end=end, first_line=first_line, run=run
    )
    return index  # a chord waits for its header's results


@shared_task(name="kvscope.requeue_undispatched")
def requeue_undispatched_task() -> int:
    return requeue_undispatched()


@shared_task(name=MERGE_TASK, acks_late=True)
def ingest_merge_task(upload_id: int, parts: int, run: str = "") -> None:
    """`run`: as for ingest_part_task; a merge of a run taken over does nothing."""
    upload_ingest_merge(upload_id=upload_id, parts=parts, run=run)
