"""The console's doorway to the engine: settings -> engine options, CLI/form values ->
AnalysisParams. No arithmetic here; the engine computes, this only translates."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from analysis import AnalysisParams, HostBudget, IngestOptions, preset, profile_from_file
from analysis.metrics import DEFAULT_WINDOWS
from analysis.profiles import DEFAULT_PROFILE

GIB = 1 << 30


def ingest_options(
    *,
    format: str = "auto",
    block_tokens: int | None = None,
    encoding: str = "cl100k_base",
    previews: bool = False,
    tiktoken_dir: str | None = None,
) -> IngestOptions:
    return IngestOptions(
        hash_key=settings.KVSCOPE_HASH_KEY,
        format=format,
        block_tokens=block_tokens,
        encoding=encoding,
        tiktoken_dir=tiktoken_dir or settings.KVSCOPE_TIKTOKEN_DIR or None,
        previews=previews,
        max_listed_errors=settings.KVSCOPE_MAX_LISTED_ERRORS,
    )


def analysis_params(
    *,
    windows: list[float] | None = None,
    model: str = DEFAULT_PROFILE,
    model_config: str | Path | None = None,
    kv_dtype: str | None = None,
    scope: str = "global",
    lifetime: float | None = None,
    target: float = 0.9,
    headroom: float = 0.1,
    tp: int = 1,
    min_reuses: int = 2,
    doc_min_tokens: int = 512,
    host_ram_gib: float | None = None,
    reserves_gib: dict[str, float] | None = None,
) -> AnalysisParams:
    profile = profile_from_file(model_config) if model_config else preset(model)
    host = None
    if host_ram_gib is not None:
        host = HostBudget(
            host_ram_bytes=round(host_ram_gib * GIB),
            reserves_bytes={k: round(v * GIB) for k, v in (reserves_gib or {}).items()},
        )
    return AnalysisParams(
        windows_s=tuple(windows) if windows else DEFAULT_WINDOWS,
        profile=profile,
        kv_dtype=kv_dtype,
        scope=scope,
        lifetime_s=lifetime,
        target=target,
        headroom=headroom,
        tp=tp,
        min_reuses=min_reuses,
        doc_min_tokens=doc_min_tokens,
        host=host,
    )
