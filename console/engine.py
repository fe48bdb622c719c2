"""Settings -> the engine's options, and stored parameter values (the analysis form's, in
GiB and preset names) -> AnalysisParams: the one mapping between the two vocabularies.
No arithmetic here beyond GiB -> bytes; the engine computes."""

from __future__ import annotations

import math
from pathlib import Path

from django.conf import settings

from analysis import (
    AnalysisParams,
    HostBudget,
    IngestOptions,
    KVProfile,
    preset,
    profile_from_file,
)
from analysis.budgets import ServingShape
from analysis.params import DEFAULTS, HOST_RESERVES, FleetParams
from analysis.profiles import DEFAULT_PROFILE, profile_from_config
from analysis.readers import ReadLimits
from console.format import GIB


def ingest_options(
    *,
    format: str = "auto",
    block_tokens: int | None = None,
    extra_block_tokens: tuple[int, ...] = (),
    encoding: str = IngestOptions.encoding,
    previews: bool = False,
    tiktoken_dir: str | None = None,
    tokenizer_file: str | None = None,
    tokenizer_name: str | None = None,
    trace_partial_cached: bool = True,
    tools_position: str = IngestOptions.tools_position,
) -> IngestOptions:
    return IngestOptions(
        hash_key=settings.KVSCOPE_HASH_KEY,
        format=format,
        block_tokens=block_tokens,
        extra_block_tokens=extra_block_tokens,
        encoding=encoding,
        tiktoken_dir=tiktoken_dir or settings.KVSCOPE_TIKTOKEN_DIR or None,
        tokenizer_file=tokenizer_file,
        tokenizer_name=tokenizer_name,
        previews=previews,
        trace_partial_cached=trace_partial_cached,
        tools_position=tools_position,
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
    scope: str = DEFAULTS.scope,
    lifetime: float | None = None,
    warmup: float = DEFAULTS.warmup,
    target: float = DEFAULTS.target,
    headroom: float = DEFAULTS.headroom,
    tp: int = DEFAULTS.tp,
    min_reuses: int = DEFAULTS.min_reuses,
    doc_min_tokens: int = DEFAULTS.doc_min_tokens,
    host_ram_gib: float | None = None,
    budgets_gib: list[float] | None = None,
    knee_gain: float = DEFAULTS.knee_gain,
    gpu_memory_gib: float | None = None,
    # the serving shape's defaults are ServingShape's own (its fields' class attributes)
    weight_dtype: str = ServingShape.weight_dtype,
    params_b: float | None = None,
    concurrent_sequences: int = ServingShape.concurrent_sequences,
    context_tokens: int = ServingShape.context_tokens,
    replicas: int | None = None,
    routers: list[str] | None = None,
    prefix_threshold: float | None = None,
    gpu_cache_gib: float | None = None,
    store_threshold: int | None = None,
    logged_ram_gib: float | None = None,
    **reserves_gib: float | None,
) -> AnalysisParams:
    """AnalysisParams from the values of the analysis form or the command line (host
    reserves as reserve_<name>_gib for each name of HOST_RESERVES)."""
    unknown = set(reserves_gib) - {f"reserve_{name}_gib" for name in HOST_RESERVES}
    if unknown:
        raise TypeError(f"unknown parameters: {', '.join(sorted(unknown))}")
    host = _host_budget(host_ram_gib, reserves_gib) if host_ram_gib is not None else None
    serving = None
    if gpu_memory_gib is not None:
        serving = _serving(gpu_memory_gib, tp, weight_dtype, params_b, concurrent_sequences,
                           context_tokens)  # fmt: skip
    return AnalysisParams(
        windows_s=tuple(windows) if windows else DEFAULTS.windows_s,
        profile=_profile(model, model_config),
        kv_dtype=kv_dtype or None,
        scope=scope,
        lifetime_s=lifetime,
        warmup=warmup,
        target=target,
        headroom=headroom,
        tp=tp,
        min_reuses=min_reuses,
        doc_min_tokens=doc_min_tokens,
        host=host,
        budgets_gib=tuple(budgets_gib or ()),
        knee_gain=knee_gain,
        serving=serving,
        fleet=_fleet(replicas, routers, prefix_threshold, gpu_cache_gib, store_threshold),
        logged_ram_gib=logged_ram_gib,
    )


def _serving(
    gpu_memory_gib: float,
    gpus: int,
    weight_dtype: str,
    params_b: float | None,
    concurrent_sequences: int,
    context_tokens: int,
) -> ServingShape:
    """The serving shape behind the weights / active KV / host RAM budgets."""
    return ServingShape(
        gpu_memory_bytes=_gib(gpu_memory_gib),
        gpus=gpus,
        weight_dtype=weight_dtype,
        params=params_b * 1e9 if params_b else None,
        concurrent_sequences=concurrent_sequences,
        context_tokens=context_tokens,
    )


def _fleet(
    replicas: int | None,
    routers: list[str] | None,
    prefix_threshold: float | None,
    gpu_cache_gib: float | None,
    store_threshold: int | None,
) -> FleetParams | None:
    """The fleet when --replicas, --router, --gpu-cache-gib or --store-threshold is given
    (report-contract.md), the rest at FleetParams' defaults. The prefix threshold only
    steers a fleet's prefix router: alone it makes no fleet, and is carried when one exists."""
    if replicas is None and not routers and gpu_cache_gib is None and store_threshold is None:
        return None
    default, gpu_cache_bytes = FleetParams(), _gib(gpu_cache_gib)
    return FleetParams(
        replicas=default.replicas if replicas is None else replicas,
        routers=tuple(routers or ()),
        prefix_threshold=default.prefix_threshold if prefix_threshold is None else prefix_threshold,
        gpu_cache_bytes=default.gpu_cache_bytes if gpu_cache_bytes is None else gpu_cache_bytes,
        store_threshold=default.store_threshold if store_threshold is None else store_threshold,
    )


def _profile(model: str, model_config: dict | str | Path | None) -> KVProfile:
    """The KV profile of a Hugging Face config (parsed or a file), else of a preset."""
    if isinstance(model_config, dict):
        return profile_from_config(model_config)
    if model_config:
        return profile_from_file(model_config)
    return preset(model)


def _host_budget(host_ram_gib: float, reserves_gib: dict[str, float | None]) -> HostBudget:
    """Host RAM and its reserves (reserve_<name>_gib, absent or empty: 0) in bytes."""
    reserves = {
        name: _gib(reserves_gib.get(f"reserve_{name}_gib") or 0.0) for name in HOST_RESERVES
    }
    return HostBudget(host_ram_bytes=_gib(host_ram_gib), reserves_bytes=reserves)


def stored_defaults() -> dict:
    """The stored parameter values (the analysis form's names) of an analysis the user
    chose nothing for: AnalysisParams' defaults, written out in the console's words."""
    return {
        "windows": list(DEFAULTS.windows_s),
        "model": DEFAULT_PROFILE,
        "scope": DEFAULTS.scope,
        "target": DEFAULTS.target,
        "headroom": DEFAULTS.headroom,
        "tp": DEFAULTS.tp,
        "min_reuses": DEFAULTS.min_reuses,
        "doc_min_tokens": DEFAULTS.doc_min_tokens,
    }
