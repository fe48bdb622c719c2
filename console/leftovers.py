"""What a killed process leaves behind: temporary upload files, half-stored .part files
and raw files (logs, tokenizers) no upload refers to, removed once older than
KVSCOPE_ORPHAN_SECONDS."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from console.models import Upload
from console.uploads import audit_events

# a stored tokenizer.json's name ends so (a log's ends .log): see console.uploads.storage
TOKENIZER_SUFFIX = ".tokenizer.json"


def raw_folder() -> Path:
    folder = Path(settings.MEDIA_ROOT) / "raw"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _older_than(path: Path, cutoff: float) -> bool:
    try:
        return path.stat().st_mtime < cutoff
    except FileNotFoundError:  # its request finished meanwhile
        return False


def _remove_all(paths: Iterator[Path] | list[Path]) -> int:
    count = 0
    for path in paths:
        path.unlink(missing_ok=True)
        count += 1
    return count


def purge_crash_leftovers() -> int:
    """Remove what a web process killed mid-upload leaves: Django's temporary upload files
    (tmp*.upload*) in FILE_UPLOAD_TEMP_DIR and half-stored .part files in MEDIA_ROOT/raw.
    Only those untouched for KVSCOPE_ORPHAN_SECONDS: a file still being written belongs to
    a request under way. Needs no database (it runs at web start)."""
    cutoff = time.time() - settings.KVSCOPE_ORPHAN_SECONDS
    temp = Path(settings.FILE_UPLOAD_TEMP_DIR)
    temp.mkdir(parents=True, exist_ok=True)
    # Django's own naming (NamedTemporaryFile, suffix ".upload<ext>"): a temp folder shared
    # with other programs loses nothing else
    leftovers = [p for p in temp.glob("tmp*.upload*") if _older_than(p, cutoff)]
    leftovers += [p for p in raw_folder().glob("*.part") if _older_than(p, cutoff)]
    return _remove_all(leftovers)


def purge_unreferenced_raw() -> int:
    """Remove raw files and tokenizers no upload refers to (stored, then the upload row
    was never written: the process died between the two), once older than
    KVSCOPE_ORPHAN_SECONDS."""
    cutoff = time.time() - settings.KVSCOPE_ORPHAN_SECONDS
    referenced = set()
    for paths, tokenizer in Upload.objects.values_list("raw_paths", "tokenizer_path"):
        referenced.update(Path(p).name for p in [*paths, *([tokenizer] if tokenizer else [])])
    stored = [*raw_folder().glob("*.log"), *raw_folder().glob(f"*{TOKENIZER_SUFFIX}")]
    orphans = [p for p in stored if p.name not in referenced and _older_than(p, cutoff)]
    removed = _remove_all(orphans)
    if removed:  # uploaded bytes, though no upload row had them: the trail says they went
        audit_events.orphans_deleted(removed)
    return removed
