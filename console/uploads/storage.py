"""Where an upload's files live: the raw files as stored (generated names, all or none;
a tokenizer.json given with them is one of them), the artifact folder its ingest writes,
and their removal (done, expired, left by a crash)."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from console.leftovers import TOKENIZER_SUFFIX, raw_folder
from console.models import Upload
from console.uploads import audit_events


class StorageError(Exception):
    """The raw files could not be stored (disk full, folder read-only): nothing was kept."""


def store_raw_files(
    sources: Sequence[UploadedFile | Path], tokenizer: UploadedFile | Path | None = None
) -> tuple[list[tuple[Path, str]], tuple[Path, str] | None]:
    """Store every file or none: the logs, and the tokenizer.json given with them (kept
    and deleted with them). Returns (path, name as uploaded) for each log, and for the
    tokenizer (None without one)."""
    stored: list[tuple[Path, str]] = []
    try:
        for source in sources:
            stored.append(_store_raw(source, ".log"))
        if tokenizer is not None:
            stored.append(_store_raw(tokenizer, TOKENIZER_SUFFIX))
    except OSError as exc:
        for path, _ in stored:  # all files or none
            path.unlink(missing_ok=True)
        raise StorageError(
            f"Could not store the upload: {exc.strerror or exc} (is the data folder full or "
            "read-only?). Nothing was kept; try again once there is room."
        ) from exc
    if tokenizer is not None:
        return stored[:-1], stored[-1]
    return stored, None


def _store_raw(source: UploadedFile | Path, suffix: str) -> tuple[Path, str]:
    """Move or copy one file under a generated name; returns (path, name as uploaded)."""
    target = raw_folder() / f"{uuid.uuid4().hex}{suffix}"
    tmp = target.with_suffix(".part")  # a crash never leaves a half file under a real name
    try:
        if isinstance(source, Path):
            shutil.copyfile(source, tmp)
            name = source.name
        else:
            temp_path = getattr(source, "temporary_file_path", None)
            if temp_path is not None:
                shutil.copyfile(temp_path(), tmp)
            else:
                with open(tmp, "wb") as out:
                    for chunk in source.chunks():
                        out.write(chunk)
            name = source.name or "upload"
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target, name[:300]


def raw_names(upload: Upload) -> list[str] | None:
    """The files' names as uploaded, for every message of the engine: the stored files
    have generated names the user never saw."""
    names = list(upload.raw_names)
    return names if len(names) == len(upload.raw_paths) else None


def upload_folder(upload_id: int) -> Path:
    return Path(settings.ARTIFACT_ROOT) / f"upload-{upload_id}"


def parts_folder(upload_id: int, run: str) -> Path:
    """Where the parts of one run of a split ingest write (`run`: its run mark): a run
    taken over (stalled, then Retry) never writes into its successor's parts."""
    return upload_folder(upload_id) / f"parts-{re.sub(r'[^0-9A-Za-z]', '', run)}"


def clear_leftovers(upload_id: int) -> None:
    """What a killed run may have left: its spill and half-written (temporary) folders."""
    folder = upload_folder(upload_id)
    if folder.is_dir():
        for entry in folder.iterdir():
            # (a split ingest's parts: "parts-<run>", and "parts" before runs were marked)
            if entry.name.startswith(".") or entry.name.startswith("parts"):
                shutil.rmtree(entry, ignore_errors=True)


# an upload's row once its raw files are deleted (the tokenizer.json goes with them: it
# only serves the ingest, a re-analysis reads the stored block streams)
RAW_DELETED = {"raw_paths": [], "tokenizer_path": ""}


def unlink_raw_files(upload: Upload) -> None:
    """Delete an upload's raw files and its tokenizer.json (the row is the caller's)."""
    for path in [*upload.raw_paths, *([upload.tokenizer_path] if upload.tokenizer_path else [])]:
        Path(path).unlink(missing_ok=True)


def upload_delete_raw(*, upload_id: int, reason: str, user=None) -> bool:
    """Delete an upload's raw files, the row cleared with its raw.delete event (`reason`:
    see audit_events.raw_deleted) in one transaction, then the files: a file is never
    gone while a row still names it. False if they were gone already (nothing recorded)."""
    with transaction.atomic():
        upload = Upload.objects.select_for_update().filter(pk=upload_id).first()
        if upload is None or not (upload.raw_paths or upload.tokenizer_path):
            return False
        Upload.objects.filter(pk=upload_id).update(**RAW_DELETED)
        audit_events.raw_deleted(upload, reason, user)
    unlink_raw_files(upload)
    return True


def purge_expired_raw() -> int:
    """Delete raw files kept past their date; returns how many uploads were purged."""
    expired = Upload.objects.filter(keep_raw_until__lt=timezone.localdate()).exclude(raw_paths=[])
    return sum(upload_delete_raw(upload_id=pk, reason="expired")
               for pk in expired.values_list("pk", flat=True))  # fmt: skip
