"""Figures, CSV exports and the plotly.js finder, on reports the engine computes from small
generated logs. No database."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from pathlib import Path

import pytest

from analysis import AnalysisParams, HostBudget, IngestOptions, analyze, ingest
from analysis.budgets import ServingShape
from bench.generate import chat_requests, mooncake_requests, write_jsonl
from console import staticfinders
from console.format import window_name
from console.staticfinders import (
    STATIC_PATH,
    PlotlyFinder,
    choose_bundle,
    js_version,
    package_data_dir,
)
from console.uploads import bar_charts, charts, exports
from tests.analysis.factories import vllm_result

GIB = 2**30
HASH_KEY = b"test-secret-0123456789"
WINDOWS = (90.0, 300.0, 3600.0)


@pytest.fixture(scope="module")
def chat_stream(tmp_path_factory):
    path = tmp_path_factory.mktemp("logs") / "chat.jsonl"
    write_jsonl(chat_requests(150, seed=5, documents=8, doc_words=(300, 700)), path)
    return ingest([path], IngestOptions(hash_key=HASH_KEY, block_tokens=64))


@pytest.fixture(scope="module")
def report(chat_stream) -> dict:
    """Global scope, with a host budget and a serving shape (budgets)."""
    params = AnalysisParams(
        windows_s=WINDOWS,
        host=HostBudget(256 * GIB, {"os": 8 * GIB, "page_cache": 16 * GIB}),
        serving=ServingShape(gpu_memory_bytes=80 * GIB),
    )
    return json.loads(analyze(chat_stream, params).to_json())


@pytest.fixture(scope="module")
def tenant_report(chat_stream) -> dict:
    """Tenant scope with a 1 min lifetime (the log spans a few minutes): no budgets, no host
    check."""
    params = AnalysisParams(windows_s=WINDOWS, scope="tenant", lifetime_s=60.0)
    return json.loads(analyze(chat_stream, params).to_json())


@pytest.fixture(scope="module")
def trace_report(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("traces") / "trace.jsonl"
    write_jsonl(mooncake_requests(300, documents=50), path)
    stream = ingest([path], IngestOptions(hash_key=HASH_KEY))
    return json.loads(analyze(stream, AnalysisParams(windows_s=WINDOWS)).to_json())


def trace(fig: dict, uid: str) -> dict:
    found = [t for t in fig["data"] if t.get("uid") == uid]
    assert len(found) == 1, f"one trace with uid {uid!r}, got {len(found)}"
    return found[0]


# --- figures ------------------------------------------------------------------------------


def test_report_figures_keys(report, tenant_report, trace_report):
    assert set(charts.report_figures(report)) == {
        "mrc",
        "working_set",
        "reuse",
        "segments",
        "budgets",
        "routes",
        "admission",  # every new report has the curve storing a block at its second use
    }
    assert tenant_report["budgets"] is None
    assert "budgets" not in charts.report_figures(tenant_report)
    # no segment view for pre-hashed traces (the key is None or absent)
    assert trace_report["windows"][-1].get("segments") is None
    assert "segments" not in charts.report_figures(trace_report)


def test_every_figure_is_plain_json(report, tenant_report, trace_report):
    for r in (report, tenant_report, trace_report):
        for name, fig in charts.report_figures(r).items():
            text = json.dumps(fig, allow_nan=False)
            assert "bdata" not in text, name
            assert set(fig) == {"data", "layout"}
            assert fig["layout"]["template"]["layout"], "plotly_white is embedded"
            assert fig["layout"]["title"]["text"]
    json.dumps(charts.compare_figure([("a", report), ("b", tenant_report)]), allow_nan=False)


def _ram_gib(report: dict, capacity_bytes: int) -> float:
    """The RAM holding a capacity, by metrics.md section 4's rule: capacity x (1 + headroom)
    (these reports keep one copy of the model's KV: no replicated heads)."""
    rec = report["recommendation"]
    assert rec["replica_kv_bytes_per_token"] == report["kv_bytes_per_token"]
    return capacity_bytes * (1 + rec["headroom"]) / GIB


def test_mrc_points_and_recommendation(report):
    fig = charts.report_figures(report)["mrc"]
    curve = trace(fig, "curve")
    # the x axis is the RAM the cache takes, with headroom: the card's unit
    assert curve["x"] == pytest.approx(
        [_ram_gib(report, p["capacity_bytes"]) for p in report["mrc"]]
    )
    assert curve["y"] == pytest.approx([p["hit_ratio"] * 100 for p in report["mrc"]])
    assert fig["layout"]["xaxis"]["type"] == "log"
    assert fig["layout"]["xaxis"]["title"]["text"] == (
        "host RAM for KV blocks, with 10 % headroom (log scale)")  # fmt: skip

    rec = report["recommendation"]
    marker = trace(fig, "recommended")
    # at the recommendation's own RAM, which is the capacity's (up to a byte per rank)
    assert marker["x"] == [rec["ram_bytes"] / GIB]
    assert marker["x"][0] == pytest.approx(_ram_gib(report, rec["capacity_bytes"]), abs=1e-9)
    assert marker["y"] == [pytest.approx(rec["hit_ratio"] * 100)]
    # the marker is one of the curve's points
    assert rec["capacity_slots"] in [p["capacity_slots"] for p in report["mrc"]]
    assert marker["text"][0] == (f"recommended {rec['ram_bytes'] / GIB:,.2f} GiB, "
                                 f"{rec['hit_ratio'] * 100:.1f} % hit")  # fmt: skip

    ceiling = trace(fig, "ceiling")
    assert ceiling["name"] == "ceiling"
    assert ceiling["y"] == pytest.approx([rec["ceiling"] * 100] * 2)
    # global scope, no lifetime: the ceiling is the infinite-cache hit ratio, drawn once
    assert rec["ceiling"] == pytest.approx(report["infinite_hit_ratio"])
    assert not [t for t in fig["data"] if t.get("uid") == "infinite"]


def test_mrc_with_a_lifetime_shows_both_ceilings(tenant_report):
    rec = tenant_report["recommendation"]
    assert rec["ceiling"] < tenant_report["infinite_hit_ratio"]
    fig = charts.report_figures(tenant_report)["mrc"]
    ceiling = trace(fig, "ceiling")
    assert ceiling["name"] == "ceiling (lifetime 1 min)"
    assert ceiling["y"] == pytest.approx([rec["ceiling"] * 100] * 2)
    infinite = trace(fig, "infinite")
    assert infinite["y"] == pytest.approx([tenant_report["infinite_hit_ratio"] * 100] * 2)


def test_working_set_series_in_gib(report):
    fig = charts.report_figures(report)["working_set"]
    assert report["span_s"] <= 3 * 3600
    # the useful working sets first (the top panel), then the TTL occupancies, each panel's
    # longest window first, so each shorter one is drawn over it; the legend names each
    # window once, in the windows' order
    names = [(t["name"], t.get("showlegend", True)) for t in fig["data"]]
    assert names == [("≤ 1 h", True), ("≤ 5 min", True), ("≤ 90 s", True),
                     ("TTL 1 h", False), ("TTL 5 min", False), ("TTL 90 s", False)]  # fmt: skip
    shown = sorted((t for t in fig["data"] if t.get("showlegend", True)),
                   key=lambda t: t["legendrank"])  # fmt: skip
    assert [t["name"] for t in shown] == ["≤ 90 s", "≤ 5 min", "≤ 1 h"]
    # a longer window's line is wider than each shorter one's drawn over it, in both panels
    for kind in ("useful", "ttl"):
        widths = [trace(fig, f"{kind}-{w['window_s']:g}")["line"]["width"]
                  for w in report["windows"]]  # fmt: skip
        assert widths == sorted(set(widths)) and widths[0] == (2 if kind == "useful" else 1.5)
    # the windows' order in the report does not matter: longest first, by their lengths
    backwards = dict(report, windows=list(reversed(report["windows"])))
    assert charts.report_figures(backwards)["working_set"] == fig
    for window in report["windows"]:
        series = window["series"]
        useful = trace(fig, f"useful-{window['window_s']:g}")
        ttl = trace(fig, f"ttl-{window['window_s']:g}")
        assert useful["x"] == pytest.approx([t / 60 for t in series["t_s"]])
        assert useful["y"] == pytest.approx([b / GIB for b in series["useful_ws_bytes"]])
        assert ttl["y"] == pytest.approx([b / GIB for b in series["ttl_occupancy_bytes"]])
        assert ttl["line"]["dash"] == "dash" and useful["line"]["color"] == ttl["line"]["color"]
        assert useful["legendgroup"] == ttl["legendgroup"]  # one click shows or hides both
        # TTL occupancy on its own y axis, in a panel under the useful working set's
        assert (useful["xaxis"], useful["yaxis"]) == ("x", "y")
        assert (ttl["xaxis"], ttl["yaxis"]) == ("x2", "y2")
    layout = fig["layout"]
    assert layout["yaxis"]["title"]["text"] == "useful working set (GiB)"
    assert layout["yaxis2"]["title"]["text"] == "TTL occupancy (GiB)"
    assert layout["yaxis2"]["domain"][1] < layout["yaxis"]["domain"][0]  # no overlap
    assert layout["xaxis"]["matches"] == "x2"  # one time axis for both
    assert "(min)" in layout["xaxis2"]["title"]["text"]


@pytest.mark.parametrize(
    ("seconds", "label"),
    [
        (300, "5 min"),
        (3600, "1 h"),
        (86400, "24 h"),
        (90, "90 s"),
        (5400, "90 min"),
        (0.5, "0.5 s"),
    ],
)
def test_window_label(seconds, label):
    assert window_name(seconds) == label


def test_reuse_histogram_steps_and_window_lines(report):
    hist = report["reuse_histogram"]
    fig = charts.report_figures(report)["reuse"]
    steps = trace(fig, "reuse")
    assert steps["x"] == hist["edges_s"]
    assert steps["y"][:-1] == hist["tokens"]
    assert steps["line"]["shape"] == "hv"
    lines = [s for s in fig["layout"]["shapes"] if s["type"] == "line"]
    assert [s["x0"] for s in lines] == list(WINDOWS)
    texts = {a["text"]: a["x"] for a in fig["layout"]["annotations"]}
    # annotations on a log axis take log10 of the value
    assert texts["5 min"] == pytest.approx(math.log10(300))


def test_segment_shares_of_hits(report):
    segments = report["windows"][-1]["segments"]
    fig = charts.report_figures(report)["segments"]
    total = sum(c["reused_tokens"] for by_class in segments.values() for c in by_class.values())
    assert total > 0
    shares = []
    for klass in ("hot", "occasional", "one_off"):
        bars = trace(fig, f"share-{klass}")
        expected = [100 * segments[k][klass]["reused_tokens"] / total for k in bars["x"]]
        assert bars["y"] == pytest.approx(expected)
        shares += bars["y"]
        sent = trace(fig, f"tokens-{klass}")
        assert sent["y"] == [segments[k][klass]["total_tokens"] for k in sent["x"]]
        assert sent["xaxis"] == "x" and bars["xaxis"] == "x2"
    assert sum(shares) == pytest.approx(100)
    # one-off material is never reused
    assert trace(fig, "share-one_off")["y"] == [0, 0, 0]


def test_budgets_figure(report):
    budgets = report["budgets"]
    host = report["recommendation"]["host"]
    fig = charts.report_figures(report)["budgets"]
    assert trace(fig, "weights")["y"] == [pytest.approx(budgets["weights_bytes"] / GIB)]
    assert trace(fig, "active_kv")["x"] == ["GPU (per replica)"]
    assert trace(fig, "host_reusable")["y"] == [
        pytest.approx(report["recommendation"]["ram_bytes"] / GIB)
    ]
    for name, nbytes in host["reserves_bytes"].items():
        assert trace(fig, f"reserve-{name}")["y"] == [pytest.approx(nbytes / GIB)]
    capacity = trace(fig, "capacity")
    assert capacity["y"] == pytest.approx(
        [budgets["gpu_total_bytes"] / GIB, host["host_ram_bytes"] / GIB]
    )
    assert fig["layout"]["barmode"] == "stack"


def test_routes_figure(report):
    fig = charts.report_figures(report)["routes"]
    routes = report["routes"]
    assert len(routes) == 2
    p90 = trace(fig, "prompt_tokens-p90")
    assert p90["x"] == [r["route"] for r in routes]
    assert p90["y"] == [r["prompt_tokens"]["p90"] for r in routes]
    assert trace(fig, "output_tokens-max")["y"] == [r["output_tokens"]["max"] for r in routes]


def test_routes_without_lengths():
    report = {
        "routes": [
            {
                "route": "",
                "requests": 3,
                "prompt_tokens": {"count": 0},
                "output_tokens": {"count": 0},
            }
        ]
    }
    fig = bar_charts.routes_figure(report)
    assert trace(fig, "prompt_tokens-p50")["x"] == ["(no route)"]
    assert trace(fig, "prompt_tokens-p50")["y"] == [None]


def test_compare_figure(report, tenant_report):
    fig = charts.compare_figure([("global", report), ("tenant", tenant_report)])
    for i, r in enumerate((report, tenant_report)):
        assert trace(fig, f"curve-{i}")["x"] == pytest.approx(
            [_ram_gib(r, p["capacity_bytes"]) for p in r["mrc"]])  # fmt: skip
        rec = trace(fig, f"recommended-{i}")
        assert rec["x"] == [r["recommendation"]["ram_bytes"] / GIB]
        assert rec["y"] == [pytest.approx(r["recommendation"]["hit_ratio"] * 100)]
    assert trace(fig, "curve-1")["name"] == "tenant"


# --- CSV ----------------------------------------------------------------------------------


def test_curve_csv_round_trip(report):
    rows = list(csv.DictReader(io.StringIO(exports.curve_csv(report))))
    assert len(rows) == len(report["mrc"])
    for row, point in zip(rows, report["mrc"], strict=True):
        assert int(row["capacity_slots"]) == point["capacity_slots"]
        assert int(row["capacity_bytes"]) == point["capacity_bytes"]
        assert float(row["capacity_gib"]) == point["capacity_bytes"] / GIB
        assert float(row["hit_ratio"]) == point["hit_ratio"]


def test_series_csv_long_format(report):
    reader = csv.DictReader(io.StringIO(exports.series_csv(report)))
    rows = list(reader)
    assert reader.fieldnames == ["window_s", "t_s", "useful_ws_bytes", "ttl_occupancy_bytes"]
    assert len(rows) == sum(len(w["series"]["t_s"]) for w in report["windows"])
    last = report["windows"][-1]
    mine = [r for r in rows if float(r["window_s"]) == last["window_s"]]
    assert [int(r["useful_ws_bytes"]) for r in mine] == last["series"]["useful_ws_bytes"]


def test_segments_csv(report, trace_report):
    reader = csv.DictReader(io.StringIO(exports.segments_csv(report)))
    rows = list(reader)
    assert report["top_segments"]
    assert len(rows) == len(report["top_segments"])
    header = reader.fieldnames
    assert header[:4] == ["key", "kind", "tokens", "occurrences"]
    assert [h for h in header if h.startswith("reuses_")] == [
        "reuses_90s",
        "reuses_300s",
        "reuses_3600s",
    ]
    assert set(header) == {k for row in report["top_segments"] for k in row}
    assert int(rows[0]["reuses_3600s"]) == report["top_segments"][0]["reuses_3600s"]
    # a trace has no segment table, but the download still has its header
    empty = exports.segments_csv(trace_report).splitlines()
    assert len(empty) == 1 and "reuses_300s" in empty[0]


def test_segments_csv_neutralises_formulas():
    report = {
        "params": {"windows_s": [300.0]},
        "top_segments": [
            {
                "key": "ab",
                "kind": "document",
                "tokens": 5,
                "occurrences": 2,
                "reuses_300s": 1,
                "first_seen_s": 0.0,
                "last_seen_s": 1.0,
                "label": '=HYPERLINK("x")',
                "preview": "plain",
            }
        ],
    }
    rows = list(csv.DictReader(io.StringIO(exports.segments_csv(report))))
    assert rows[0]["label"] == '\'=HYPERLINK("x")'
    assert rows[0]["preview"] == "plain"


# --- plotly.js finder ---------------------------------------------------------------------


@pytest.fixture
def fresh_vendor_cache():
    """find() keeps the copy it made for the process: forget it around the test."""
    staticfinders._served.clear()
    yield
    staticfinders._served.clear()


def test_finder_serves_plotly_js_only(settings, tmp_path, fresh_vendor_cache):
    settings.KVSCOPE_VENDOR_CACHE = tmp_path / "vendor"
    finder = PlotlyFinder()
    assert finder.check() == []
    # one name, versioned by the plotly.js release plotly.py bundles; the cartesian bundle
    release = js_version(package_data_dir() / "plotly.min.js")
    assert release and f"vendor/plotly/plotly-cartesian-{release}.min.js" == STATIC_PATH
    assert staticfinders.SOURCE == staticfinders.VENDORED
    source = staticfinders.SOURCE
    found = finder.find(STATIC_PATH)
    # found: a copy with its gzipped twin beside it (whitenoise serves the .gz)
    assert found and Path(found) == tmp_path / "vendor" / STATIC_PATH.split("/", 1)[1]
    assert Path(found).read_bytes() == source.read_bytes()
    assert gzip.decompress(Path(found + ".gz").read_bytes()) == source.read_bytes()
    head = Path(found).read_text(encoding="utf-8", errors="replace")[:2000]
    assert f"plotly.js (cartesian - minified) v{release}" in head
    assert finder.find(STATIC_PATH, find_all=True) == [found]
    assert finder.find("vendor/plotly/plotly.min.js") == []  # the unversioned name is gone
    assert finder.find("vendor/plotly/widgetbundle.js") == []
    assert finder.find("plotly.min.js") == []
    listed = list(finder.list([]))
    assert [path for path, _ in listed] == [STATIC_PATH.split("/")[-1]]
    storage = listed[0][1]
    assert storage.prefix == "vendor/plotly"
    # collectstatic copies the bundle itself
    assert Path(storage.path(listed[0][0])) == source
    assert list(finder.list(["*.js"])) == []


def test_an_unwritable_vendor_cache_serves_the_bundle_uncompressed(
    settings, tmp_path, fresh_vendor_cache
):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    settings.KVSCOPE_VENDOR_CACHE = blocker / "vendor"
    assert PlotlyFinder().find(STATIC_PATH) == str(staticfinders.SOURCE)


def test_another_plotly_release_falls_back_to_the_full_bundle(tmp_path):
    package = tmp_path / "package_data"
    package.mkdir()
    (package / "plotly.min.js").write_text("/**\n* plotly.js v9.0.0\n*/\n")
    vendored = tmp_path / "plotly-cartesian.min.js"
    vendored.write_text("/**\n* plotly.js (cartesian - minified) v4.1.1\n*/\n")
    assert choose_bundle(vendored, package) == (package / "plotly.min.js", "plotly-9.0.0.min.js")
    vendored.write_text("/**\n* plotly.js (cartesian - minified) v9.0.0\n*/\n")
    assert choose_bundle(vendored, package) == (vendored, "plotly-cartesian-9.0.0.min.js")
    assert choose_bundle(tmp_path / "missing.js", package)[0] == package / "plotly.min.js"
    assert choose_bundle(vendored, None) is None


def test_every_trace_the_console_draws_is_in_the_cartesian_bundle(report, trace_report):
    from analysis.benchmarks.comparison import Run, Schedule, side_by_side
    from analysis.benchmarks.files import parse_result
    from console.benchmarks import charts as benchmark_charts

    result = parse_result(vllm_result())
    cell = {"result": result, "misses": []}
    grid = {"concurrencies": [4], "tiers": {"none": {"rows": [(8192, [cell])]}}}
    schedule = Schedule(8192, 4)
    [group] = side_by_side([(schedule, Run("off", False, False, result)),
                            (schedule, Run("on", True, False, result))])  # fmt: skip
    figures = [*charts.report_figures(report).values(),
               *charts.report_figures(trace_report).values(),
               charts.compare_figure([("a", report), ("b", trace_report)]),
               benchmark_charts.slo_heatmap("none", [(8192, [cell])], [4]),
               benchmark_charts.ttft_by_concurrency(grid, 2000.0),
               benchmark_charts.ttft_side_by_side(group)]  # fmt: skip
    types = {trace.get("type", "scatter") for fig in figures for trace in fig["data"]}
    assert types == {"scatter", "bar", "heatmap"}
    assert types <= staticfinders.CARTESIAN_TRACES


def test_finder_accepts_the_deprecated_all_keyword():
    from django.utils.deprecation import RemovedInDjango61Warning

    with pytest.warns(RemovedInDjango61Warning):
        found = PlotlyFinder().find(STATIC_PATH, all=True)
    assert len(found) == 1


def test_finder_through_django(settings):
    from django.contrib.staticfiles import finders

    settings.STATICFILES_FINDERS = [
        "django.contrib.staticfiles.finders.FileSystemFinder",
        "console.staticfinders.PlotlyFinder",
    ]
    found = finders.find(STATIC_PATH)
    assert found and Path(found).is_file()


def test_a_sampled_curve_says_where_it_is_exact_and_an_older_one_its_unresolved_points(
    tmp_path,
):
    from analysis import AnalysisParams, IngestOptions, analyze, ingest
    from bench.generate import mooncake_requests, write_jsonl
    from console.uploads.charts import mrc_figure

    path = tmp_path / "trace.jsonl"
    write_jsonl(mooncake_requests(3000, seed=5, documents=100), path)
    stream = ingest([path], IngestOptions(hash_key=b"test-secret-0123456789"))
    report = analyze(stream, AnalysisParams(mrc_exact_limit=10, shards_rate=0.25)).to_dict()
    assert report["mrc_exact"] is False and report["mrc_sampling_rate"] == 0.25
    # exact up to 1,000 / 0.25 slots: no capacity is left unresolved
    figure = mrc_figure(report)
    assert figure["layout"]["title"]["text"].startswith(
        "Hit-ratio curve (exact up to 4,000 slots, sampled at 25% beyond)")  # fmt: skip
    assert not [t for t in figure["data"] if t.get("uid") == "unresolved"]
    # a report of the plain SHARDS curve (before the exact top) marked the capacities
    # below 100 / R unresolved: it is still drawn so
    for point in report["mrc"]:
        point["resolved"] = point["capacity_slots"] >= 100 / 0.25
    below = [p for p in report["mrc"] if not p["resolved"]]
    figure = mrc_figure(report)
    assert figure["layout"]["title"]["text"].startswith("Hit-ratio curve (sampled at 25%)")
    trace = next(t for t in figure["data"] if t.get("uid") == "unresolved")
    assert trace["x"] == pytest.approx([_ram_gib(report, p["capacity_bytes"]) for p in below])


def test_numeric_axes_skip_plotlys_second_layout_pass(report):
    # automargin on an axis makes plotly.js lay a chart out twice (half its drawing time):
    # only category axes, whose labels vary in length, keep it; and no axis measures its
    # tick labels one by one to hide those past the chart's edge
    from analysis.benchmarks.files import parse_result
    from console.benchmarks import charts as benchmark_charts

    cell = {"result": parse_result(vllm_result()), "misses": []}
    figures = [*charts.report_figures(report).values(),
               benchmark_charts.slo_heatmap("none", [(8192, [cell])], [4])]  # fmt: skip
    seen = set()
    for fig in figures:
        for name, axis in fig["layout"].items():
            if name.startswith(("xaxis", "yaxis")):
                ref = name[0] + name[len("xaxis") :]
                values = [v for t in fig["data"] if t.get(f"{name[0]}axis", name[0]) == ref
                          for v in t.get(name[0]) or ()]  # fmt: skip
                category = axis.get("type") == "category" or (
                    axis.get("type") is None and any(isinstance(v, str) for v in values)
                )
                seen.add((name[0], category))
                assert axis["automargin"] is category, (name, axis)
                assert axis["ticklabeloverflow"] == "allow", (name, axis)
    assert seen == {("x", True), ("x", False), ("y", True), ("y", False)}, seen
