"""What an analysis is asked: AnalysisParams and its defaults, written out here once.

A caller that needs a default (the command line, the console's doorway to the engine) reads
it from `DEFAULTS` or the constants beside it instead of writing the number again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.budgets import ServingShape
from analysis.profiles import DEFAULT_PROFILE, KVProfile, preset

# who may reuse whose blocks: anyone, a tenant's requests, one user's (metrics.md)
SCOPES = ("global", "tenant", "user")
DEFAULT_WINDOWS = (300.0, 3600.0, 86400.0)
_MAX_SECONDS = 1e11  # ~3,000 years: past it a window is meaningless and overflows microseconds
# what else must live in host RAM beside the reusable blocks, by name
HOST_RESERVES = (
    "os",
    "page_cache",
    "tokenizers",
    "request_buffers",
    "serving_process",
    "cache_process",
)


@dataclass(frozen=True)
class HostBudget:
    """Host RAM and what else must live in it (bytes)."""

    host_ram_bytes: int
    reserves_bytes: dict[str, int] = field(default_factory=dict)

    def available(self) -> int:
        return self.host_ram_bytes - sum(self.reserves_bytes.values())


# metrics.md section 8: how a fleet's router assigns requests to replicas
ROUTERS = ("round_robin", "session", "prefix", "pooled")
# each router in words, for every page, export and label that names one
ROUTER_NAMES = {
    "round_robin": "round robin",
    "session": "session",
    "prefix": "prefix-aware",
    "pooled": "pooled store",
}
# the prefix router keeps a bit per replica and key: 256 replicas of 10 M keys is 320 MB
MAX_REPLICAS = 256
# a block stored only at its k-th use: past a thousand uses nothing real is cached
MAX_STORE_THRESHOLD = 1000


@dataclass(frozen=True)
class FleetParams:
    """A route served by `replicas` instances behind a router (metrics.md section 8): each
    replica has a GPU prefix cache of `gpu_cache_bytes` in front of its host RAM, and a
    block enters host RAM at its `store_threshold`-th reference."""

    replicas: int = 1
    # the routers to compare; empty: every router when replicas > 1, else round robin
    routers: tuple[str, ...] = ()
    prefix_threshold: float = 0.5
    gpu_cache_bytes: int = 0
    store_threshold: int = 1

    def chosen_routers(self) -> tuple[str, ...]:
        if self.routers:
            return self.routers
        return ROUTERS if self.replicas > 1 else ("round_robin",)

    def validate(self) -> None:
        if not 1 <= self.replicas <= MAX_REPLICAS:
            raise ValueError(f"replicas must be between 1 and {MAX_REPLICAS}")
        unknown = [r for r in self.routers if r not in ROUTERS]
        if unknown:
            raise ValueError(f"routers must be among {', '.join(ROUTERS)}, not {unknown[0]}")
        if len(set(self.routers)) != len(self.routers):
            raise ValueError("each router may be named once")
        if not 0 <= self.prefix_threshold <= 1:
            raise ValueError("the prefix threshold must be a share in [0, 1]")
        if self.gpu_cache_bytes < 0:
            raise ValueError("the GPU prefix cache must be >= 0 bytes")
        if not 1 <= self.store_threshold <= MAX_STORE_THRESHOLD:
            raise ValueError(
                f"the store threshold must be between 1 and {MAX_STORE_THRESHOLD} references"
            )

    def report_dict(self) -> dict:
        return {
            "replicas": self.replicas,
            "routers": list(self.chosen_routers()),
            "prefix_threshold": self.prefix_threshold,
            "gpu_cache_bytes": self.gpu_cache_bytes,
            "store_threshold": self.store_threshold,
        }


@dataclass(frozen=True)
class AnalysisParams:
    windows_s: tuple[float, ...] = DEFAULT_WINDOWS
    profile: KVProfile = field(default_factory=lambda: preset(DEFAULT_PROFILE))
    kv_dtype: str | None = None  # None: the model's own
    scope: str = "global"
    lifetime_s: float | None = None
    # the leading share of requests that fills every cache but is left out of every hit
    # ratio (metrics.md section 7); 0.5 is kvcache-simulator's and llmtrafficlens' steady state
    warmup: float = 0.0
    target: float = 0.9
    headroom: float = 0.1
    tp: int = 1
    min_reuses: int = 2
    doc_min_tokens: int = 512
    host: HostBudget | None = None
    # host RAM per replica whose hit ratio to report (metrics.md section 9), GiB
    budgets_gib: tuple[float, ...] = ()
    # past the knee, doubling the cache gains less than this hit ratio (metrics.md section 9)
    knee_gain: float = 0.01
    # replicas, routers, a GPU tier and admission (metrics.md section 8); None: one cache
    fleet: FleetParams | None = None
    # the host RAM per replica the engine that wrote the log ran with (GiB), with the fleet
    # above: kvscope's prediction set beside the cached tokens its responses report (#18);
    # None: not stated (with no GPU cache either, no prediction)
    logged_ram_gib: float | None = None
    # the curve is exact up to this many block references, SHARDS-sampled beyond
    mrc_exact_limit: int = 20_000_000
    shards_rate: float | None = None  # None: enough for ~4 M sampled references
    # a sampled curve is exact up to this many slots (None: 1,000 / rate; see
    # analysis.metrics.curve.exact_slots), SHARDS-estimated beyond
    shards_exact_slots: int | None = None
    serving: ServingShape | None = None  # for the weights / active KV / host RAM budgets
    series_buckets: int = 240
    top_n: int = 50

    def validate(self) -> None:
        if not self.windows_s or any(not 0 < w < _MAX_SECONDS for w in self.windows_s):
            raise ValueError("windows must be positive, finite numbers of seconds")
        if self.scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}")
        if self.lifetime_s is not None and not 0 < self.lifetime_s < _MAX_SECONDS:
            raise ValueError("lifetime must be a positive, finite number of seconds")
        if not 0 < self.target <= 1:
            raise ValueError("target must be in (0, 1]")
        if not 0 <= self.warmup < 1:
            raise ValueError("warm-up must be a share of requests in [0, 1)")
        if not self.headroom >= 0:
            raise ValueError("headroom must be >= 0")
        if self.tp < 1:
            raise ValueError("tp must be at least 1")
        self.profile.check_tp(self.tp)
        if self.shards_rate is not None and not 0 < self.shards_rate <= 1:
            raise ValueError("the SHARDS sampling rate must be in (0, 1]")
        if self.shards_exact_slots is not None and self.shards_exact_slots < 1:
            raise ValueError("a sampled curve is exact up to at least one slot")
        if self.min_reuses < 1:
            raise ValueError("min_reuses must be at least 1")
        if self.doc_min_tokens < 1:
            raise ValueError("doc_min_tokens must be at least 1")
        if self.serving is not None:
            self.serving.validate()
        if any(not 0 < b < 1e9 for b in self.budgets_gib):
            raise ValueError("budgets must be positive, finite numbers of GiB")
        if self.fleet is not None:
            self.fleet.validate()
        if not 0 < self.knee_gain < 1:
            raise ValueError("the knee gain must be a share of hit ratio in (0, 1)")
        if self.logged_ram_gib is not None and not 0 <= self.logged_ram_gib < 1e9:
            raise ValueError("the logged engine's RAM must be a finite number of GiB >= 0")

    def report_dict(self) -> dict:
        """The parameters as the report's `params` records them."""
        return {
            "windows_s": list(self.windows_s),
            "scope": self.scope,
            "lifetime_s": self.lifetime_s,
            "warmup": self.warmup,
            "target": self.target,
            "headroom": self.headroom,
            "tp": self.tp,
            "min_reuses": self.min_reuses,
            "doc_min_tokens": self.doc_min_tokens,
            "model": self.profile.name,
            "kv_dtype": self.kv_dtype or self.profile.dtype,
            "budgets_gib": list(self.budgets_gib),
            "knee_gain": self.knee_gain,
            "fleet": self.fleet.report_dict() if self.fleet is not None else None,
            # (only when stated: reports from before it keep their exact shape)
            **({"logged_ram_gib": self.logged_ram_gib} if self.logged_ram_gib is not None else {}),
        }


# the parameters of an analysis where the user gave nothing
DEFAULTS = AnalysisParams()
