"""The analysis report: one shape shared by the JSON file, the web pages and the CSVs.

Keys required by report-contract.md are plain fields; everything else is added beside them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson


@dataclass
class WindowReport:
    window_s: float
    hit_ratio: float
    hit_tokens: int
    useful_ws_peak_bytes: int
    useful_ws_p95_bytes: int
    useful_ws_median_bytes: int
    ttl_occupancy_peak_bytes: int
    # metrics.md section 7: hits whose previous reference was of the same session, and
    # the rest (shared material); they sum to hit_ratio
    same_session_hit_ratio: float = 0.0
    cross_session_hit_ratio: float = 0.0
    misplaced_reuse_tokens: int | None = None  # chat logs only
    segments: dict | None = None  # chat logs only
    # chart series: bucket start (s from the first request), max bytes within the bucket
    series: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WindowReport:
        # a pre-hashed trace's window has no segment keys: their defaults (None) hold
        return cls(**data)


@dataclass
class HostBudgetCheck:
    host_ram_bytes: int
    reserves_bytes: dict[str, int]
    available_bytes: int
    fits: bool
    spare_bytes: int

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostBudgetCheck:
        return cls(**data)


@dataclass
class Recommendation:
    capacity_bytes: int
    capacity_slots: int
    ram_bytes: int
    per_rank_bytes: int
    hit_ratio: float
    ceiling: float
    target: float
    headroom: float
    tp: int
    lifetime_s: float | None
    host: HostBudgetCheck | None = None
    # metrics.md section 8: what one TP rank and the whole replica keep per token; the
    # replica's is the model's bytes per token unless heads are replicated (kv_heads < tp)
    # or the model is MLA (every rank keeps the whole latent)
    per_rank_kv_bytes_per_token: int = 0
    replica_kv_bytes_per_token: int = 0
    same_session_hit_ratio: float = 0.0  # hit_ratio split as the windows' (section 7)
    cross_session_hit_ratio: float = 0.0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recommendation:
        host = data.get("host")
        return cls(
            **{**data, "host": HostBudgetCheck.from_dict(host) if host is not None else None}
        )


@dataclass
class Report:
    requests: int
    prompt_tokens: int
    block_refs: int
    distinct_blocks: int
    block_tokens: int
    kv_bytes_per_token: int
    slot_bytes: int
    span_s: float
    infinite_hit_ratio: float
    windows: list[WindowReport]
    mrc: list[dict]
    mrc_exact: bool
    mrc_sampling_rate: float
    recommendation: Recommendation
    errors: list[dict]
    skipped_lines: int
    warmup_requests: int = 0  # the leading requests left out of every hit ratio
    session_share: float = 0.0  # requests carrying a session id
    # requests_with_tools, tool_tokens, prompt_share, position (metrics.md section 7)
    tools: dict = field(default_factory=dict)
    cache_control_requests: int = 0
    # beyond the contract
    infinite_same_session_hit_ratio: float = 0.0
    infinite_cross_session_hit_ratio: float = 0.0
    source_format: str = ""  # the stream's kind: "chat", or "mooncake" for any trace
    log_format: str = ""  # what was read: "chat" (JSONL or CSV), "mooncake", "bailian"
    tokenizer: str = ""  # chat logs: the tiktoken encoding or tokenizer.json that counted
    tenants: int = 0  # distinct non-empty tenants in the traffic
    scope: str = "global"
    model: dict = field(default_factory=dict)
    kv_dtype: str = ""
    params: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reuse_histogram: dict = field(default_factory=dict)
    routes: list[dict] = field(default_factory=list)
    top_segments: list[dict] = field(default_factory=list)
    top_misplaced: list[dict] = field(default_factory=list)
    ingest_stats: dict = field(default_factory=dict)
    budgets: dict | None = None  # weights / active KV on GPU / reusable blocks in host RAM
    # metrics.md section 9: what each budget asked for, and the host's, buys
    at_budget: list[dict] = field(default_factory=list)
    knee: dict | None = None  # where doubling the cache stops buying knee_gain (section 9)
    # the curve as the capacities where it first gains each STEP of hit ratio: read at any
    # size within a step ("what does N GiB buy?", analysis.metrics.at_budget.buys)
    curve_steps: dict = field(default_factory=dict)
    # metrics.md section 8: every router's fleet curve (when a fleet is asked for), and the
    # single cache admitting a block only at its second reference
    fleet: dict | None = None
    admission: dict | None = None
    # #18: what the logged engine reports it reused beside kvscope's prediction (only for a
    # log whose responses carry their usage: no key otherwise)
    logged_cache: dict | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """The report of to_dict() (or its JSON, parsed) back in its typed shape."""
        return cls(
            **{
                **data,
                "windows": [WindowReport.from_dict(window) for window in data["windows"]],
                "recommendation": Recommendation.from_dict(data["recommendation"]),
            }
        )

    def to_dict(self) -> dict:
        data = asdict(self)
        for window in data["windows"]:
            # the segment view does not exist for pre-hashed traces: no key at all
            for key in ("segments", "misplaced_reuse_tokens"):
                if window[key] is None:
                    del window[key]
        if data["logged_cache"] is None:
            del data["logged_cache"]
        return data

    def to_json(self, *, indent: bool = True) -> bytes:
        option = orjson.OPT_INDENT_2 if indent else 0
        return orjson.dumps(self.to_dict(), option=option | orjson.OPT_SERIALIZE_NUMPY)
