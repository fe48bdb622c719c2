"""What the benchmarks pages read: the matrix of a model's runs against an SLO and the
runs side by side, each with its figures, computed once per state of the stored runs (a
run added, or changed: its prediction arrives later) and cached (console.caching)."""

from __future__ import annotations

from django.db.models import Count, Max

from analysis.benchmarks.comparison import SideBySide
from analysis.benchmarks.slo import Slo
from console.benchmarks import charts
from console.benchmarks.models import BenchRun
from console.benchmarks.services import comparisons, matrix
from console.caching import computed_once

# raise when a figure of this wing is drawn differently: cached ones are then redrawn
# 3: a cell carries the hit ratio its run measured
CHARTS_VERSION = 3  # 2: the console's palette, 1-2-5 ticks on the concurrency axis


def _runs_version(model_name: str) -> tuple:
    """What tells one set of a model's runs from another: how many, and the newest."""
    runs = BenchRun.objects.filter(model_name=model_name)
    state = runs.aggregate(count=Count("pk"), newest=Max("pk"), at=Max("updated_at"))
    return (CHARTS_VERSION, model_name, state["count"], state["newest"], state["at"])


def _matrix_page(model_name: str, slo: Slo, rate: float | str | None) -> tuple[dict, dict]:
    grid = matrix(model_name, slo, rate)
    figures = {
        f"tier-{i}": charts.slo_heatmap(name, tier["rows"], grid["concurrencies"])
        for i, (name, tier) in enumerate(grid["tiers"].items())
    }
    if grid["tiers"]:
        figures["lines"] = charts.ttft_by_concurrency(grid, slo.p99_ttft_ms)
    return grid, figures


def matrix_page(model_name: str, slo: Slo, rate: float | str | None) -> tuple[dict, dict]:
    """The grid of a model's runs per tier (context x concurrency) judged against `slo`,
    and its figures: a heatmap per tier and p99 TTFT as concurrency grows."""
    parts = (_runs_version(model_name), slo, rate)
    return computed_once("bench-matrix", parts, lambda: _matrix_page(model_name, slo, rate))


def _compare_page(model_name: str) -> tuple[list[SideBySide], dict]:
    compared = comparisons(model_name)
    figures = {f"schedule-{i}": charts.ttft_side_by_side(group)
               for i, group in enumerate(compared)}  # fmt: skip
    return compared, figures


def compare_page(model_name: str) -> tuple[list[SideBySide], dict]:
    """A model's runs of the same schedule side by side, with a TTFT figure each."""
    parts = (_runs_version(model_name),)
    return computed_once("bench-compare", parts, lambda: _compare_page(model_name))
