"""Predicted against measured, per benchmark run (#18): the replay exports a run can name,
kvscope's prediction for exactly that trace on the run's configuration (computed by the
engine in a task: analysis.benchmarks.prediction), and what a page shows of the two."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from analysis import BlockStream
from analysis.benchmarks.prediction import RunConfig, compare, predict_run
from analysis.replay import ReplayOptions, replay_lines
from console.benchmarks.models import BenchRun, ReplayExport
from console.engine import analysis_params
from console.jobs import task_named
from console.models import Analysis, JobStatus, Upload

log = logging.getLogger(__name__)
PREDICT_TASK = "kvscope.predict_run"
PENDING = "Computing kvscope's prediction for the trace this run replayed…"


def export_record(upload: Upload, stream: BlockStream, options: ReplayOptions,
                  user) -> ReplayExport:  # fmt: skip
    """The export of this selection: its file's SHA-256 taken over the very lines the
    download streams (one pass first), the row made once per distinct trace."""
    digest = hashlib.sha256()
    requests = 0
    for line in replay_lines(stream, options):
        digest.update(line)
        requests += 1
    export, _ = ReplayExport.objects.get_or_create(
        upload=upload, sha256=digest.hexdigest(),
        defaults={"block_tokens": stream.block_tokens, "options": _options_dict(options),
                  "requests": requests, "created_by": user},
    )  # fmt: skip
    return export


def _options_dict(options: ReplayOptions) -> dict:
    values = asdict(options)
    values["tenants"] = list(options.tenants) if options.tenants else None
    return values


def queue_prediction(run: BenchRun) -> None:
    """Predict the run once its row is committed (on a worker; in-process when there is
    no broker). A broker that cannot be reached is said on the run, nothing else lost."""
    if run.replay_export_id is None:
        return

    def send() -> None:
        if settings.CELERY_TASK_ALWAYS_EAGER:  # no broker: here, or beside the request
            if settings.KVSCOPE_EAGER_IN_THREAD:
                threading.Thread(target=_predict_in_thread, args=(run.pk,), daemon=True).start()
            else:
                _predict_here(run.pk)
            return
        try:
            task_named(PREDICT_TASK).apply_async((run.pk,))
        except Exception as exc:  # kombu's OperationalError and the socket errors under it
            log.warning("could not queue the prediction of run %s: %s", run.pk, exc)
            BenchRun.objects.filter(pk=run.pk).update(
                prediction_note=f"The task queue could not be reached ({type(exc).__name__}); "
                "upload the run again once it is back.")  # fmt: skip

    transaction.on_commit(send)


def _predict_here(run_id: int) -> None:
    """In the request (no broker): a failure is on the run (run_predict's note), never a
    500 for an upload that is stored already."""
    try:
        run_predict(run_id)
    except Exception:
        log.exception("the prediction of run %s failed", run_id)


def _predict_in_thread(run_id: int) -> None:
    try:
        _predict_here(run_id)
    finally:
        connection.close()  # this thread's own database connection


def run_predict(run_id: int) -> None:
    """Compute and store a run's prediction (or why there is none)."""
    run = BenchRun.objects.select_related("replay_export__upload").filter(pk=run_id).first()
    if run is None or run.replay_export is None:
        return
    try:
        predicted = _predict(run, run.replay_export).to_dict()
    except (ValueError, KeyError, OSError) as exc:
        _no_prediction(run_id, str(exc))
        return
    except Exception as exc:  # never leave the run "computing" with nobody on it
        log.exception("the prediction of run %s failed", run_id)
        _no_prediction(run_id, f"internal error: {type(exc).__name__}: {exc}")
        raise
    BenchRun.objects.filter(pk=run_id).update(predicted=predicted, prediction_note="",
                                              updated_at=timezone.now())  # fmt: skip


def _no_prediction(run_id: int, why: str) -> None:
    BenchRun.objects.filter(pk=run_id).update(
        predicted={}, prediction_note=f"No prediction: {why}", updated_at=timezone.now()
    )


def _predict(run: BenchRun, export: ReplayExport):
    upload = export.upload
    path = upload.streams.get(str(export.block_tokens))
    if not path:
        raise ValueError(f"the upload “{upload.name}” no longer holds its "
                         f"{export.block_tokens}-token block stream")  # fmt: skip
    stream = BlockStream.load(path)
    options = ReplayOptions(**export.options)
    params = _upload_params(upload, export.block_tokens)
    config = RunConfig(ram_gib=run.ram_gib or 0.0, gpu_cache_gib=run.gpu_cache_gib or 0.0,
                       replicas=run.replicas, router=run.router, warm=run.warm)  # fmt: skip
    workdir = Path(settings.FILE_UPLOAD_TEMP_DIR)  # the installation's own, purged if left
    workdir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    prediction = predict_run(_hashed(replay_lines(stream, options), digest),
                             export.block_tokens, config, params,
                             settings.KVSCOPE_HASH_KEY, workdir=workdir)  # fmt: skip
    if digest.hexdigest() != export.sha256:  # the stream changed since it was downloaded
        raise ValueError(f"the upload no longer gives export x{export.pk}'s trace (its "
                         "SHA-256 differs from the file downloaded)")  # fmt: skip
    return prediction


def _hashed(lines: Iterator[bytes], digest) -> Iterator[bytes]:
    """The lines, each also fed to `digest` (the file's SHA-256 as it was downloaded)."""
    for line in lines:
        digest.update(line)
        yield line


def _upload_params(upload: Upload, block_tokens: int):
    """The model profile, KV dtype, TP and scope the upload was first analyzed with at
    this block size (its automatic analysis: no policy lifetime), else the defaults."""
    first = (Analysis.objects.filter(upload=upload, block_tokens=block_tokens,
                                     status=JobStatus.DONE).order_by("pk").first())  # fmt: skip
    stored = dict(first.params) if first is not None else {}
    stored.pop("lifetime", None)
    return analysis_params(**stored)


def comparison(run: BenchRun) -> dict | None:
    """Predicted against measured for a page (the engine's compare); None until both are
    there."""
    if not (run.predicted and run.measured):
        return None
    return compare(run.predicted, run.measured)
