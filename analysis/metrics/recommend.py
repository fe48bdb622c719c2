"""The recommendation: the host RAM for reusable blocks that reaches the target share of
the curve's ceiling, with headroom, per tensor-parallel rank and per replica, checked
against a host budget when one is given."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from analysis.metrics.curve import HitCurve, hit_share
from analysis.params import AnalysisParams, HostBudget
from analysis.report import HostBudgetCheck, Recommendation


def recommend(
    curve: HitCurve, total_tokens: int, block_tokens: int, params: AnalysisParams
) -> Recommendation:
    """Smallest capacity reaching `target` of the ceiling (section 4), plus headroom, held
    per tensor-parallel rank by section 8's rule: a rank keeps max(1, kv_heads // tp) heads
    (MLA: the whole latent) of each of those slots, and the replica tp times that."""
    cum = curve.total
    ceiling_tokens = int(cum[-1])
    need = params.target * ceiling_tokens
    # relative tolerance: target * ceiling is a float, token sums are exact
    slots = int(np.searchsorted(cum, need * (1 - 1e-12), side="left"))
    slots = min(slots, cum.size - 1)
    capacity = slots * block_tokens * params.profile.kv_bytes_per_token(params.kv_dtype)
    rank_per_token = params.profile.kv_bytes_per_token_per_rank(params.tp, params.kv_dtype)
    per_rank = per_rank_ram(slots, block_tokens, rank_per_token, params.headroom)
    # the replica total is exactly per rank * tp (exports divide it back by tp)
    ram = per_rank * params.tp
    return Recommendation(
        capacity_bytes=capacity,
        capacity_slots=slots,
        ram_bytes=ram,
        per_rank_bytes=per_rank,
        per_rank_kv_bytes_per_token=rank_per_token,
        replica_kv_bytes_per_token=rank_per_token * params.tp,
        hit_ratio=hit_share(int(cum[slots]), total_tokens),
        same_session_hit_ratio=hit_share(int(curve.same_session[slots]), total_tokens),
        cross_session_hit_ratio=hit_share(
            int(cum[slots] - curve.same_session[slots]), total_tokens
        ),
        ceiling=hit_share(ceiling_tokens, total_tokens),
        target=params.target,
        headroom=params.headroom,
        tp=params.tp,
        lifetime_s=params.lifetime_s,
        host=_host_check(params.host, ram) if params.host is not None else None,
    )


def per_rank_ram(slots: int, block_tokens: int, rank_bytes_per_token: int, headroom: float) -> int:
    """The RAM one tensor-parallel rank needs to hold `slots` blocks, with headroom. Exact
    decimal arithmetic: 200 * (1 + 0.1) in floats is 220.00000000000003, and the ceiling of
    that would ask for a byte more than capacity * (1 + headroom)."""
    return math.ceil(slots * block_tokens * rank_bytes_per_token * (1 + Fraction(str(headroom))))


def _host_check(host: HostBudget, ram_bytes: int) -> HostBudgetCheck:
    """Whether the recommended RAM fits beside the host's reserves, and what is left."""
    available = host.available()
    return HostBudgetCheck(
        host_ram_bytes=host.host_ram_bytes,
        reserves_bytes=dict(host.reserves_bytes),
        available_bytes=available,
        fits=ram_bytes <= available,
        spare_bytes=available - ram_bytes,
    )
