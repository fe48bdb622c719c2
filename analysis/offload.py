"""Does offload pay? Loading the KV of prefix hits from host RAM against recomputing
those tokens on the GPU, from a report's own traffic (prompt tokens per hour, KV bytes per
token) and the user's hardware figures. Plain arithmetic, every assumption named:

- a hit's KV comes over the host-to-GPU link at `bandwidth_gb_s` (no queueing behind other
  copies, pinned memory);
- recomputing a token costs 1 / `prefill_tokens_per_s` of GPU time (prefill at the
  context the log has);
- the hit ratio at the recommended RAM size holds for the whole hour (the log's average).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# Host-to-GPU copy, x16, one direction: ~85 % of the link's rate. PCIe 5 gives 53.6 GB/s,
# against 55 GB/s measured from pinned memory on an H200 host (docs: engines.md, 8).
PCIE_GB_S = {"3": 13.4, "4": 26.8, "5": 53.6, "6": 107.1}
DEFAULT_PCIE = "5"
# A serving engine prefills faster than the 31.8k tokens/s measured for an 8B model with
# transformers at 8k context (engines.md, 8): a conservative default.
DEFAULT_PREFILL_TOKENS_PER_S = 30_000.0


@dataclass(frozen=True)
class OffloadPayoff:
    bandwidth_gb_s: float
    prefill_tokens_per_s: float
    hit_ratio: float
    kv_bytes_per_token: int
    prompt_tokens_per_hour: float
    saved_tokens_per_hour: float  # prefill tokens not recomputed
    load_seconds_per_hour: float  # moving their KV from RAM
    recompute_seconds_per_hour: float  # prefilling them again
    break_even_gb_s: float  # below this bandwidth, recomputing is faster
    load_us_per_token: float
    recompute_us_per_token: float

    @property
    def pays(self) -> bool:
        return self.bandwidth_gb_s > self.break_even_gb_s

    @property
    def speedup(self) -> float:
        """How many times faster loading is than recomputing (below 1: slower)."""
        if self.load_us_per_token <= 0:
            return float("inf")
        return self.recompute_us_per_token / self.load_us_per_token

    def to_dict(self) -> dict:
        return {**asdict(self), "pays": self.pays, "speedup": self.speedup}


def prompt_tokens_per_hour(report: dict) -> float:
    """The log's average prompt tokens per hour over its span (a one-request log: one
    second)."""
    span_h = max(float(report["span_s"]), 1.0) / 3600
    return report["prompt_tokens"] / span_h


def offload_payoff(
    report: dict,
    *,
    bandwidth_gb_s: float,
    prefill_tokens_per_s: float,
    hit_ratio: float | None = None,
) -> OffloadPayoff:
    """The estimate for one report. hit_ratio: default the report's at its recommended RAM
    size."""
    if not bandwidth_gb_s > 0 or not prefill_tokens_per_s > 0:
        raise ValueError("bandwidth and prefill throughput must be positive")
    ratio = report["recommendation"]["hit_ratio"] if hit_ratio is None else hit_ratio
    if not 0 <= ratio <= 1:
        raise ValueError("the hit ratio is between 0 and 1")
    per_token = int(report["kv_bytes_per_token"])
    tokens_per_hour = prompt_tokens_per_hour(report)
    saved = ratio * tokens_per_hour
    bandwidth = bandwidth_gb_s * 1e9
    return OffloadPayoff(
        bandwidth_gb_s=bandwidth_gb_s,
        prefill_tokens_per_s=prefill_tokens_per_s,
        hit_ratio=ratio,
        kv_bytes_per_token=per_token,
        prompt_tokens_per_hour=tokens_per_hour,
        saved_tokens_per_hour=saved,
        load_seconds_per_hour=saved * per_token / bandwidth,
        recompute_seconds_per_hour=saved / prefill_tokens_per_s,
        break_even_gb_s=per_token * prefill_tokens_per_s / 1e9,
        load_us_per_token=per_token / bandwidth * 1e6,
        recompute_us_per_token=1e6 / prefill_tokens_per_s,
    )
