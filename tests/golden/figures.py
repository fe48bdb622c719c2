"""Golden figures: what console.uploads.charts drew from the golden reports before the
figure functions were split (#13), as JSON written with orjson, compared byte for byte by
tests/console/uploads/test_figures_unchanged.py. Rewrite them only for a change that means to draw a
figure differently (and then raise console.uploads.charts.CHARTS_VERSION), with

    .venv/bin/python -m tests.golden.figures

The golden reports alone never reach some branches (no report of `manage.py analyze` has
budgets, none is sampled), so a few variants edit a golden report in place to reach them:
the edits only have to be shaped like the engine's output, as the figures read the dict.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path

import orjson

from console.uploads.charts import compare_figure, report_figures
from tests.golden.cases import CASES, HERE

GIB = 2**30


def golden_report(name: str) -> dict:
    return json.loads((HERE / f"{name}.json").read_text())


def with_budgets(report: dict) -> dict:
    """A serving shape on two GPUs (budgets), and a replica that keeps twice the model's
    bytes per token (the recommendation's "×2 on 2 TP ranks")."""
    out = copy.deepcopy(report)
    out["budgets"] = {
        "weights_bytes": 16 * GIB,
        "active_kv_bytes": 40 * GIB,
        "host_reusable_bytes": out["recommendation"]["capacity_bytes"],
        "gpu_total_bytes": 160 * GIB,
        "gpu_free_bytes": 104 * GIB,
        "gpu_fits": True,
        "params": 8_000_000_000,
        "weight_dtype": "bf16",
        "concurrent_sequences": 32,
        "context_tokens": 8192,
        "gpus": 2,
    }
    out["kv_bytes_per_token"] = out["recommendation"]["replica_kv_bytes_per_token"] // 2
    return out


def sampled(report: dict) -> dict:
    """A SHARDS-sampled curve (its first capacities unresolved), a reuse histogram without
    its first references, and params without windows (the figure falls back on windows)."""
    out = copy.deepcopy(report)
    out["mrc_exact"] = False
    out["mrc_sampling_rate"] = 0.25
    for point in out["mrc"][:5]:
        point["resolved"] = False
    out["reuse_histogram"].pop("first_reference_tokens", None)
    out["params"].pop("windows_s", None)
    return out


def with_sessions(report: dict) -> dict:
    """A log whose requests name sessions (the golden logs name none, and a curve without
    sessions draws no band): half of them, and a quarter of every hit ratio (a point's,
    a window's, the recommendation's, the infinite cache's) same-session, the rest
    cross-session, as the engine's parts add up to their total."""
    out = copy.deepcopy(report)
    out["session_share"] = 0.5
    for part, prefix in ((out, "infinite_"), (out["recommendation"], ""),
                         *((point, "") for point in (*out["mrc"], *out["windows"]))):  # fmt: skip
        total = part[f"{prefix}hit_ratio"]
        part[f"{prefix}same_session_hit_ratio"] = total / 4
        part[f"{prefix}cross_session_hit_ratio"] = total - total / 4
    return out


# name -> (golden report, edit)
VARIANTS: dict[str, tuple[str, Callable[[dict], dict]]] = {
    "sample-reanalysis-budgets": ("sample-reanalysis", with_budgets),  # with a host budget
    "sample-default-budgets": ("sample-default", with_budgets),  # without one
    "mooncake-sampled": ("mooncake-default", sampled),
    "sample-sessions": ("sample-default", with_sessions),  # the stacked band
}
# the curves compare_figure overlays: (label, golden report)
COMPARED = (("default", "sample-default"), ("re-analysis", "sample-reanalysis"))


def reports() -> dict[str, dict]:
    """Every report whose figures are pinned, by the name of its figures file."""
    out = {case.name: golden_report(case.name) for case in CASES}
    for name, (base, edit) in VARIANTS.items():
        out[name] = edit(out[base])
    return out


def figures_path(name: str) -> Path:
    return HERE / f"figures-{name}.json"


def figures_json(figures: dict) -> bytes:
    return orjson.dumps(figures, option=orjson.OPT_INDENT_2) + b"\n"


def compare_json() -> bytes:
    return figures_json(compare_figure([(label, golden_report(n)) for label, n in COMPARED]))


def main() -> int:
    for name, report in reports().items():
        figures_path(name).write_bytes(figures_json(report_figures(report)))
    figures_path("compare").write_bytes(compare_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
