"""The console's doorway to the engine: settings -> engine options, stored parameter
values -> AnalysisParams. No arithmetic here beyond GiB -> bytes; the engine computes."""

from __future__ import annotations

import math
from pathlib import Path

from django.conf import settings

from analysis import AnalysisParams, HostBudget, IngestOptions, preset, profile_from_file
from analysis.budgets import ServingShape
from analysis.metrics import DEFAULT_WINDOWS, HOST_RESERVES
from analysis.profiles import DEFAULT_PROFILE, profile_from_config
from analysis.readers import ReadLimits
from console.format import GIB


def ingest_options(
    *,
    format: str = "auto",
    block_tokens: int | None = None,
    extra_block_tokens: tuple[int, ...] = (),
    encoding: str = "cl100k_base",
    previews: bool = False,
    tiktoken_dir: str | None = None,
    trace_partial_cached: bool = True,
) -> IngestOptions:
    return IngestOptions(
        hash_key=settings.KVSCOPE_HASH_KEY,
        format=format,
        block_tokens=block_tokens,
        extra_block_tokens=extra_block_tokens,
        encoding=encoding,
        tiktoken_dir=tiktoken_dir or settings.KVSCOPE_TIKTOKEN_DIR or None,
        previews=previews,
        trace_partial_cached=trace_partial_cached,
        max_listed_errors=settings.KVSCOPE_MAX_LISTED_ERRORS,
        max_bad_lines=settings.KVSCOPE_MAX_BAD_LINES or None,
        limits=ReadLimits(
            max_line_bytes=settings.KVSCOPE_MAX_LINE_BYTES,
            max_inflated_bytes=settings.KVSCOPE_MAX_INFLATED_BYTES,
            max_inflate_ratio=settings.KVSCOPE_MAX_INFLATE_RATIO,
            max_blank_lines=settings.KVSCOPE_MAX_BLANK_LINES or None,
        ),
    )


# beyond this many bytes (8 EiB) a size no longer fits the 64-bit integers reports store
_MAX_BYTES = 2**63 - 1


def _gib(value: float | None) -> int | None:
    """GiB -> bytes; a ValueError (the command line's one-line reason) past 64-bit bytes:
    round() of 1e308 GiB would raise OverflowError instead."""
    if value is None:
        return None
    nbytes = value * GIB
    if not math.isfinite(nbytes) or abs(nbytes) > _MAX_BYTES:
        raise ValueError(f"{value:g} GiB is out of range (at most {_MAX_BYTES // GIB:,} GiB)")
    return round(nbytes)


def analysis_params(
    *,
    windows: list[float] | None = None,
    model: str = DEFAULT_PROFILE,
    model_config: dict | str | Path | None = None,
    kv_dtype: str | None = None,
    scope: str = "global",
    lifetime: float | None = None,
    target: float = 0.9,
    headroom: float = 0.1,
    tp: int = 1,
    min_reuses: int = 2,
    doc_min_tokens: int = 512,
    host_ram_gib: float | None = None,
    gpu_memory_gib: float | None = None,
    weight_dtype: str = "bf16",
    params_b: float | None = None,
    concurrent_sequences: int = 32,
    context_tokens: int = 8192,
    **reserves_gib: float | None,
) -> AnalysisParams:
    """AnalysisParams from the values of the analysis form or the command line.

    Host reserves come as reserve_<name>_gib for each name of HOST_RESERVES.
    """
    unknown = set(reserves_gib) - {f"reserve_{name}_gib" for name in HOST_RESERVES}
    if unknown:
        raise TypeError(f"unknown parameters: {', '.join(sorted(unknown))}")
    if isinstance(model_config, dict):
        profile = profile_from_config(model_config)
    elif model_config:
        profile = profile_from_file(model_config)
    else:
        profile = preset(model)
    host = None
    if host_ram_gib is not None:
        reserves = {
            name: _gib(reserves_gib.get(f"reserve_{name}_gib") or 0.0) for name in HOST_RESERVES
        }
        host = HostBudget(host_ram_bytes=_gib(host_ram_gib), reserves_bytes=reserves)
    serving = None
    if gpu_memory_gib is not None:
        serving = ServingShape(
            gpu_memory_bytes=_gib(gpu_memory_gib),
            gpus=tp,
            weight_dtype=weight_dtype,
            params=params_b * 1e9 if params_b else None,
            concurrent_sequences=concurrent_sequences,
            context_tokens=context_tokens,
        )
    return AnalysisParams(
        windows_s=tuple(windows) if windows else DEFAULT_WINDOWS,
        profile=profile,
        kv_dtype=kv_dtype or None,
        scope=scope,
        lifetime_s=lifetime,
        target=target,
        headroom=headroom,
        tp=tp,
        min_reuses=min_reuses,
        doc_min_tokens=doc_min_tokens,
        host=host,
        serving=serving,
    )
