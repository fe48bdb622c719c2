"""Renaming and deleting uploads and analyses (console.housekeeping carries it out): what
deleting one takes. An upload goes with its analyses, its block streams, any raw file and
tokenizer.json kept, and whatever a run left in its artifact folder; an analysis goes
alone (its report and figures live in its row: it has no files). Neither goes while a
policy version relies on it, nor an upload while its ingest writes files."""

from __future__ import annotations

from pathlib import Path

from django.urls import reverse

from console.housekeeping import Deletion, Kind, evidence_refusal, existing, tree_size
from console.models import Analysis, JobStatus, Upload
from console.policies.citations import citations
from console.uploads.storage import upload_folder


def upload_paths(upload: Upload) -> list[Path]:
    """Everything on disk that is the upload's: the raw files and tokenizer.json kept, its
    artifact folder (block streams, and a killed run's spill and parts folders), and any
    stream stored elsewhere (each once; only those that exist)."""
    raw = [*upload.raw_paths, *([upload.tokenizer_path] if upload.tokenizer_path else [])]
    streams = [Path(p) for p in upload.streams.values()]
    return existing([*map(Path, raw), upload_folder(upload.pk), *streams])


def _ingest_writing(upload: Upload) -> bool:
    """Its ingest is running and alive: it would write files after the deletion."""
    return upload.status == JobStatus.RUNNING and not upload.stalled


def _analysis_details(analysis: Analysis, **extra) -> dict:
    return {"name": analysis.label, "summary": analysis.summary,
            "upload": analysis.upload_id, **extra}  # fmt: skip


def _upload_words(upload: Upload) -> str:
    return f"the upload “{upload.name}”"


def _analysis_words(analysis: Analysis) -> str:
    return f"analysis #{analysis.pk} {analysis.title}"


def upload_deletion(upload: Upload) -> Deletion:
    analyses = list(upload.analyses.order_by("pk"))
    paths = upload_paths(upload)
    files, size = tree_size(paths)
    rows = [_upload_words(upload)]
    if len(analyses) == 1:
        rows.append(f"its analysis #{analyses[0].pk}")
    elif analyses:
        rows.append(f"its {len(analyses)} analyses ({', '.join(f'#{a.pk}' for a in analyses)})")
    if upload.raw_paths:
        rows.append(f"its raw file{'s' if len(upload.raw_paths) != 1 else ''} as kept "
                    f"({', '.join(upload.raw_names)})")  # fmt: skip
    if upload.tokenizer_path:
        rows.append(f"its tokenizer.json ({upload.tokenizer_name})")
    if upload.streams:
        sizes = ", ".join(str(s) for s in upload.available_block_sizes)
        rows.append(f"its block streams ({sizes} tokens per block)")
    if _ingest_writing(upload):
        refusal = ("Its ingest is running: wait until it finishes (or stalls) before deleting "
                   "it, since it writes files a deletion would leave behind.")  # fmt: skip
    else:
        cited = citations(analyses=[a.pk for a in analyses])
        refusal = evidence_refusal(_upload_words(upload), cited)
    events = [("analysis.delete", a, _analysis_details(a, with_upload=True)) for a in analyses]
    events.append(("upload.delete", upload, {
        "name": upload.name, "analyses": [a.pk for a in analyses],
        "raw_names": upload.raw_names, "files": files, "bytes": size}))  # fmt: skip
    return Deletion(rows=rows, paths=paths, events=events, refusal=refusal)


def analysis_deletion(analysis: Analysis) -> Deletion:
    name = _analysis_words(analysis)
    return Deletion(
        rows=[name, "its report and figures (kept in its row: it has no files of its own)"],
        paths=[],
        events=[("analysis.delete", analysis, _analysis_details(analysis))],
        refusal=evidence_refusal(name, citations(analyses=[analysis.pk])),
    )


UPLOAD = Kind(
    model=Upload, noun="upload", action="upload", field="name", field_label="Name",
    page="upload_detail", urls="upload", describe=_upload_words, plan=upload_deletion,
    gone_to=lambda upload: reverse("home"),
)  # fmt: skip
ANALYSIS = Kind(
    model=Analysis, noun="analysis", action="analysis", field="label", field_label="Label",
    page="analysis_detail", urls="analysis", describe=_analysis_words, plan=analysis_deletion,
    gone_to=lambda analysis: reverse("upload_detail", args=[analysis.upload_id]),
)  # fmt: skip
