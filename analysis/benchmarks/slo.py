"""A context x concurrency matrix of runs judged against service-level objectives: what each
run breaks, and per tier the degradation boundary (how far load can grow inside the SLO)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from analysis.benchmarks.results import BenchResult


@dataclass(frozen=True)
class Slo:
    """Service-level objectives: p99 ceilings in ms (None: not checked), no failures."""

    p99_ttft_ms: float | None = None
    p99_tpot_ms: float | None = None
    p99_itl_ms: float | None = None
    allow_failed: bool = False

    def misses(self, result: BenchResult) -> list[str]:
        """What the result breaks (empty: inside the SLO)."""
        broken = []
        for metric, limit in (("ttft", self.p99_ttft_ms), ("tpot", self.p99_tpot_ms),
                              ("itl", self.p99_itl_ms)):  # fmt: skip
            value = result.p99(metric)
            if limit is not None and (value is None or value > limit):
                broken.append(f"p99 {metric.upper()}")
        if result.failed and not self.allow_failed:
            broken.append("failed requests")
        return broken


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: a tier configuration at a context length and concurrency."""

    tier: str
    context_tokens: int
    concurrency: int
    result: BenchResult
    # for pages: the hit ratio the engine's counters measured (and over what), kvscope's
    # prediction, and whether they differ (analysis.benchmarks.prediction.compare)
    hits: dict = field(default_factory=dict)


@dataclass
class Boundary:
    """For one tier: per context length, the largest concurrency still inside the SLO as
    load grows (the run before the first miss: a lucky pass past a miss does not count),
    and the largest context length, in the same way, at which some concurrency passes."""

    tier: str
    max_concurrency_by_context: dict[int, int] = field(default_factory=dict)
    max_context: int | None = None


def degradation_boundary(cells: Iterable[Cell], slo: Slo) -> list[Boundary]:
    """The boundary of each tier, tiers in first-seen order."""
    grid: dict[str, dict[int, list[Cell]]] = {}
    for cell in cells:
        grid.setdefault(cell.tier, {}).setdefault(cell.context_tokens, []).append(cell)
    boundaries = []
    for tier, by_context in grid.items():
        boundary = Boundary(tier)
        for context in sorted(by_context):
            inside = None
            for cell in sorted(by_context[context], key=lambda c: c.concurrency):
                if slo.misses(cell.result):
                    break
                inside = cell.concurrency
            if inside is None:  # not even the lightest load: longer contexts do not count
                break
            boundary.max_concurrency_by_context[context] = inside
            boundary.max_context = context
        boundaries.append(boundary)
    return boundaries


def matrix_axes(cells: Sequence[Cell]) -> tuple[list[int], list[int]]:
    """(context lengths, concurrencies) present, ascending."""
    return sorted({c.context_tokens for c in cells}), sorted({c.concurrency for c in cells})
