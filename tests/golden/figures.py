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


def _halve_capacities(report: dict) -> None:
    """Every cache capacity at half its bytes, as the engine writes them for a model of
    half the bytes per token (capacity = slots x block tokens x the model's bytes)."""
    admission = report.get("admission") or {}
    points = [*report["mrc"], report["recommendation"], *(report.get("at_budget") or []),
              *([report["knee"]] if report.get("knee") else []), *admission.get("mrc", []),
              *([admission["recommendation"]] if admission else []),
              *admission.get("at_equal_size", [])]  # fmt: skip
    for point in points:
        point["capacity_bytes"] //= 2


def with_budgets(report: dict) -> dict:
    """A serving shape on two GPUs (budgets), and a replica that keeps twice the model's
    bytes per token (the recommendation's "×2 on 2 TP ranks": its RAM is unchanged, the
    model's bytes and so every capacity halved)."""
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
    _halve_capacities(out)
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


def _at_budget(report: dict, source: str, ram: int) -> dict:
    """What `ram` of RAM buys, shaped like the engine's at_budget entry: at the largest of
    the curve's points whose RAM (capacity x (1 + headroom)) it holds (the engine reads
    the exact slot count off the whole curve; a point of it is one such count)."""
    headroom = report["recommendation"]["headroom"]
    held = [p for p in report["mrc"] if p["capacity_bytes"] * (1 + headroom) <= ram]
    point = held[-1] if held else {"capacity_slots": 0, "capacity_bytes": 0, "hit_ratio": 0.0}
    hit = point["hit_ratio"]
    return {"source": source, "ram_bytes": ram, "capacity_slots": point["capacity_slots"],
            "capacity_bytes": point["capacity_bytes"], "hit_ratio": hit,
            "same_session_hit_ratio": 0.0, "cross_session_hit_ratio": hit}  # fmt: skip


def short_budget(report: dict) -> dict:
    """A host of 1 TiB (8 GiB reserved for the OS) that the recommendation does not fit
    in, a budget of 64 GiB entered, and requests logged at the same instant (tokens in the
    reuse histogram's first bin, the 0 s one)."""
    out = copy.deepcopy(report)
    rec = out["recommendation"]
    host, reserve = 1024 * GIB, 8 * GIB
    available = host - reserve
    rec["host"] = {"host_ram_bytes": host, "reserves_bytes": {"os": reserve},
                   "available_bytes": available, "fits": rec["ram_bytes"] <= available,
                   "spare_bytes": available - rec["ram_bytes"]}  # fmt: skip
    out["params"]["budgets_gib"] = [64.0]
    out["at_budget"] = [_at_budget(out, "budget", 64 * GIB), _at_budget(out, "host", available)]
    out["reuse_histogram"]["tokens"][0] = 250_000
    return out


# name -> (golden report, edit)
VARIANTS: dict[str, tuple[str, Callable[[dict], dict]]] = {
    "sample-reanalysis-budgets": ("sample-reanalysis", with_budgets),  # with a host budget
    "sample-default-budgets": ("sample-default", with_budgets),  # without one
    "mooncake-sampled": ("mooncake-default", sampled),
    "sample-sessions": ("sample-default", with_sessions),  # the stacked band
    "mooncake-short-budget": ("mooncake-default", short_budget),  # a host it does not fit
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
