"""Analyses of an upload's stored block streams: the automatic first one's parameters and
block size, a new analysis queued and run (or an identical one reused), a failed one
retried, their figures."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial

from django.db import transaction
from django.utils import timezone

from analysis import BlockStream, Progress, analyze
from analysis.ingest import DEFAULT_BLOCK_TOKENS
from console.engine import analysis_params, stored_defaults
from console.heartbeat import heartbeat
from console.jobs import claim, dispatch, fail, progress_writer, requeue
from console.models import Analysis, JobStatus, Upload
from console.uploads import audit_events
from console.uploads.figures import draw

log = logging.getLogger(__name__)
# the stored parameters of the automatic first analysis: the engine's defaults
DEFAULT_PARAMS = stored_defaults()
# The block size the automatic first analysis runs on (and the analysis form's default)
# when several were ingested: the chat default, LMCache's 256-token chunk, if it is among
# them; else the format's own if it is (a trace's 512); else the smallest.
FIRST_ANALYSIS_BLOCK_TOKENS = DEFAULT_BLOCK_TOKENS["chat"]
POLICY_RERUN = "policy re-run"  # why a policy's re-run analysis was asked for (its event)


def first_analysis_block_size(sizes: Sequence[int], source_format: str) -> int:
    """Which of an upload's stored block sizes the default analysis uses."""
    if FIRST_ANALYSIS_BLOCK_TOKENS in sizes:
        return FIRST_ANALYSIS_BLOCK_TOKENS
    own = DEFAULT_BLOCK_TOKENS.get(source_format)
    return own if own in sizes else min(sizes)


def default_block_size(upload: Upload) -> int:
    """The analysis form's block size when no analysis is done yet: as the first one's.
    Before the streams exist, the format's own: the one read, else the one chosen (a
    Bailian trace's 16 tokens; its stream kind, "mooncake", would say 512)."""
    sizes = upload.available_block_sizes
    if sizes:
        return first_analysis_block_size(sizes, upload.source_format)
    log_format = upload.log_format or upload.source_format or upload.format
    return DEFAULT_BLOCK_TOKENS.get(log_format, FIRST_ANALYSIS_BLOCK_TOKENS)


def analysis_create(
    *, upload: Upload, block_tokens: int, params: dict, user=None, why: str = "asked"
) -> Analysis:
    """Queue an analysis of an upload's stored block stream with new parameters, recorded
    (analysis.create) with `why` it was asked for."""
    if str(block_tokens) not in upload.streams:
        raise ValueError(f"this upload has no {block_tokens}-token block stream")
    analysis_params(**params).validate()  # refuse bad parameters before queueing
    with transaction.atomic():
        analysis = Analysis.objects.create(
            upload=upload, created_by=user, block_tokens=block_tokens, params=params
        )
        audit_events.analysis_created(analysis, user, why)
        dispatch(Analysis, analysis.pk)
    return analysis


def analysis_reuse_or_create(
    *, upload: Upload, block_tokens: int, params: dict, user=None
) -> Analysis:
    """The analysis of these parameters on this stream: the newest one run with exactly
    them already (queued again if it failed), else a new one. A policy's re-run asks
    for the same parameters every time its version is saved, and each new version of it
    too: they all share one analysis instead of queueing duplicates."""
    with transaction.atomic():
        # one asker at a time per upload: two concurrent saves find each other's analysis
        Upload.objects.select_for_update().filter(pk=upload.pk).values_list("pk").first()
        same = upload.analyses.filter(block_tokens=block_tokens).only("pk", "params", "status")
        # (compared in Python: JSON equality in SQL differs by database and key order)
        existing = next((a for a in same if a.params == params), None)
        if existing is None:
            return analysis_create(upload=upload, block_tokens=block_tokens, params=params,
                                   user=user, why=POLICY_RERUN)  # fmt: skip
    if existing.status == JobStatus.FAILED:
        analysis_retry(analysis=existing, user=user)
    return Analysis.objects.get(pk=existing.pk)


def analysis_retry(*, analysis: Analysis, user=None) -> Analysis:
    """Queue a failed or stalled analysis again (its stream is still stored), recorded
    (analysis.retry, by `user`; None: the system) when it was queued again."""
    with transaction.atomic():
        if requeue(Analysis, analysis.pk):
            audit_events.analysis_retried(analysis, user)
    analysis.refresh_from_db()
    return analysis


def analysis_run(*, analysis_id: int, redelivered: bool = False) -> None:
    """Run a queued analysis from the block stream (never the raw file)."""
    if not claim(Analysis, analysis_id, redelivered):
        return
    analysis = Analysis.objects.select_related("upload").get(pk=analysis_id)
    run = analysis.started_at  # this claim's mark: a run taken over writes nothing
    progress = progress_writer(Analysis, analysis_id)
    try:
        with heartbeat(Analysis, analysis_id, run):
            progress(Progress("loading", 0, 1))
            stream = BlockStream.load(analysis.upload.streams[str(analysis.block_tokens)])
            report = analyze(stream, analysis_params(**analysis.params), progress=progress,
                             consume=True)  # fmt: skip
    except (ValueError, KeyError, OSError) as exc:
        _failed(analysis, f"{type(exc).__name__}: {exc}")
        return
    except Exception as exc:
        log.exception("analysis %s failed", analysis_id)
        _failed(analysis, f"internal error: {type(exc).__name__}: {exc}")
        raise
    with transaction.atomic():
        done = Analysis.objects.filter(
            pk=analysis_id, status=JobStatus.RUNNING, started_at=run
        ).update(
            report=(report_dict := report.to_dict()),
            figures=draw(report_dict),
            status=JobStatus.DONE,
            stage="done",
            finished_at=timezone.now(),
        )
        if done:  # (a run taken over writes nothing, and records nothing)
            audit_events.analysis_ended(analysis)


def _failed(analysis: Analysis, message: str) -> None:
    """The run's failure, with its analysis.fail event (if this run still owns it)."""
    fail(Analysis, analysis.pk, message, analysis.started_at,
         recorded=partial(audit_events.analysis_ended, analysis, reason=message))  # fmt: skip
