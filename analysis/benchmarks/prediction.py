"""kvscope's prediction for one benchmark run: the hit ratio its own model gives for exactly
the trace the run replayed, on the run's serving configuration.

The trace is a replay export (analysis.replay), read back as a pre-hashed trace with its
last partial blocks as uncached tails, which gives back the stream's own numbers. It is
analyzed as a fleet (metrics.md section 8) of the run's replicas behind its router, each
with its GPU prefix cache in front of its host RAM, and the hit ratio is read at exactly
the run's RAM per replica (section 9's budget with no headroom: the engine was given that
much). A cold run starts empty; a warm one (the cache filled first, by replaying the same
trace) is predicted as the trace's second pass after a first one that filled every cache:
the doubled trace with a warm-up of one half (section 7).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import orjson

from analysis.ingest import IngestOptions, ingest
from analysis.metrics import analyze
from analysis.params import ROUTERS, AnalysisParams, FleetParams

GIB = 1 << 30
# the second pass of a warm run starts this long after the first ends (any gap does: an LRU
# orders by arrival, and no lifetime is set)
WARM_GAP_MS = 1000
# a prediction differs from a measurement when they are further apart than this
DIFFERS_BY = 0.03


@dataclass(frozen=True)
class RunConfig:
    """What a run served the trace with, per replica (GiB: 2**30 bytes)."""

    ram_gib: float = 0.0  # host RAM for KV blocks per replica (0: no RAM tier)
    gpu_cache_gib: float = 0.0  # the GPU prefix cache per replica
    replicas: int = 1
    router: str = "round_robin"
    warm: bool = False

    def validate(self) -> None:
        if self.ram_gib < 0 or self.gpu_cache_gib < 0:
            raise ValueError("RAM and GPU cache sizes must be >= 0 GiB")
        if self.router not in ROUTERS:
            raise ValueError(f"the router must be one of {', '.join(ROUTERS)}")


@dataclass(frozen=True)
class Prediction:
    """The predicted hit ratio of the run, all tiers and split by tier (shares of every
    prompt token of the trace's counted requests)."""

    hit_ratio: float
    gpu_hit_ratio: float
    ram_hit_ratio: float
    requests: int  # the requests counted (a warm run's second pass)
    ram_slots: int  # the blocks the RAM per replica holds
    config: RunConfig

    def to_dict(self) -> dict:
        return {
            "hit_ratio": self.hit_ratio,
            "gpu_hit_ratio": self.gpu_hit_ratio,
            "ram_hit_ratio": self.ram_hit_ratio,
            "requests": self.requests,
            "ram_slots": self.ram_slots,
            "config": {
                "ram_gib": self.config.ram_gib,
                "gpu_cache_gib": self.config.gpu_cache_gib,
                "replicas": self.config.replicas,
                "router": self.config.router,
                "warm": self.config.warm,
            },
        }


def predict_run(
    trace: Iterable[bytes],
    block_tokens: int,
    config: RunConfig,
    params: AnalysisParams,
    hash_key: bytes,
    workdir: str | Path | None = None,
) -> Prediction:
    """The run's predicted hit ratio. `trace`: the replay export's lines; `params`: the
    model profile, KV dtype, TP and scope to predict with (as the upload was analyzed);
    `workdir`: where the trace is written for reading back (a temporary folder if None)."""
    config.validate()
    with tempfile.TemporaryDirectory(dir=workdir, prefix="kvscope-predict-") as folder:
        path = Path(folder) / "trace.jsonl"
        requests = _write_trace(trace, path, twice=config.warm)
        if not requests:
            raise ValueError("the replayed trace holds no request")
        stream = ingest([path], IngestOptions(hash_key=hash_key, format="mooncake",
                                              block_tokens=block_tokens,
                                              trace_partial_cached=False))  # fmt: skip
    ram = config.ram_gib > 0  # none: the GPU prefix cache alone (offload off)
    fleet_params = replace(
        params,
        fleet=FleetParams(
            replicas=config.replicas,
            routers=(config.router,),
            gpu_cache_bytes=round(config.gpu_cache_gib * GIB),
        ),
        budgets_gib=(config.ram_gib,) if ram else (),
        host=None,
        headroom=0.0,  # the engine was given exactly this much
        warmup=0.5 if config.warm else 0.0,
    )
    report = analyze(stream, fleet_params).to_dict()
    (router,) = report["fleet"]["routers"]
    counted = requests // 2 if config.warm else requests
    if not ram:  # the GPU prefix cache hits the same at every host size
        gpu = router["gpu_hit_ratio"]
        return Prediction(gpu, gpu, 0.0, counted, 0, config)
    (at,) = router["at_budget"]
    return Prediction(at["hit_ratio"], at["gpu_hit_ratio"], at["ram_hit_ratio"], counted,
                      at["capacity_slots"], config)  # fmt: skip


def _write_trace(trace: Iterable[bytes], path: Path, twice: bool) -> int:
    """The trace's lines to `path` (twice over for a warm run, the second pass after the
    first); how many lines were written."""
    lines = [line.rstrip(b"\n") + b"\n" for line in trace if line.strip()]
    with path.open("wb") as out:
        out.writelines(lines)
        if twice and lines:
            shift = orjson.loads(lines[-1])["timestamp"] + WARM_GAP_MS
            for line in lines:
                row = orjson.loads(line)
                row["timestamp"] += shift
                out.write(orjson.dumps(row) + b"\n")
    return len(lines) * (2 if twice else 1)


# which measured tiers (analysis.benchmarks.scrapes) each predicted tier is compared with:
# the GPU prefix cache, and what lies behind it (vLLM's KV connector, SGLang's host RAM)
MEASURED_TIERS = {
    "gpu": ("gpu", "device"),
    "ram": ("connector", "host"),
}


def compare(predicted: dict, measured: dict) -> dict:
    """A Prediction.to_dict() against a MeasuredHits.to_dict(): overall and per tier, the
    difference (measured minus predicted, a ratio), flagged past DIFFERS_BY. A measurement
    over other tokens than every prompt token (an LMCache server's lookups) is said not
    comparable rather than compared."""
    if measured["of_what"] != "prompt tokens":
        return {"comparable": False,
                "why": f"{measured['label']} counts {measured['of_what']}, not every prompt "
                       "token: its ratio is not the run's hit ratio."}  # fmt: skip
    tiers = []
    for tier, sources in MEASURED_TIERS.items():
        found = [t for t in measured["tiers"] if t["tier"] in sources]
        if found:
            tiers.append(_against(tier, predicted[f"{tier}_hit_ratio"],
                                  sum(t["ratio"] for t in found)))  # fmt: skip
    # the engine hit on its GPU cache, which the run did not state: predicted as none
    gpu_measured = sum(t["measured"] for t in tiers if t["tier"] == "gpu")
    gpu_unstated = predicted["config"]["gpu_cache_gib"] == 0 and gpu_measured > 0
    return {"comparable": True, **_against("all", predicted["hit_ratio"], measured["hit_ratio"]),
            "tiers": tiers, "threshold_points": DIFFERS_BY * 100,
            "gpu_unstated": gpu_unstated}  # fmt: skip


def _against(tier: str, predicted: float, measured: float) -> dict:
    return {"tier": tier, "predicted": predicted, "measured": measured, "differs":
            differs(predicted, measured), "difference": measured - predicted}  # fmt: skip


def differs(predicted: float, measured: float) -> bool:
    """Further apart than DIFFERS_BY (3 points): a difference worth a look."""
    return abs(predicted - measured) > DIFFERS_BY + 1e-12
