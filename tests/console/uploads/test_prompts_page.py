"""The analysis page's "What the prompts carry" and the same-session / cross-session split
(#14, metrics.md section 7), on the four-request agent log of agent_log.py whose shares
and hits are known by construction: the block's shares, every hit-ratio card split, the
curve's stacked band and its one hover naming both parts, the CSV columns; each part
rounded on its own; a log naming no sessions shows no split; a pre-hashed trace says what
does not apply; a report stored before the split still shows."""

from __future__ import annotations

import copy
import csv
import io
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from bench.generate import mooncake_requests, write_jsonl
from console.models import Analysis, Upload
from console.templatetags.kvscope import hit_split
from console.uploads.curve_charts import mrc_figure
from console.uploads.services import upload_create
from tests.console.factories import PASSWORD, default_analysis
from tests.console.uploads import agent_log
from tests.console.uploads.agent_log import pct
from tests.golden.figures import golden_report

pytestmark = pytest.mark.django_db(transaction=True)
VOID_TAGS = {"br", "img", "input", "hr", "meta", "link", "wbr"}


@pytest.fixture
def agents(tmp_path, analyst) -> Analysis:
    """The default analysis of the agent log, at 16 tokens per block."""
    log = agent_log.write(tmp_path / "agents.jsonl")
    return default_analysis(upload_create(name="agents", sources=[log], user=analyst,
                                          block_sizes=[agent_log.BLOCK]))  # fmt: skip


def _page(client, user, analysis: Analysis) -> str:
    assert client.login(username=user.username, password=PASSWORD)
    response = client.get(reverse("analysis_detail", args=[analysis.pk]))
    assert response.status_code == 200
    return response.content.decode()


class _ElementText(HTMLParser):
    """The text of the first element whose start tag holds `attribute` (`name` or
    `name="value"`), nested elements included."""

    def __init__(self, attribute: str) -> None:
        super().__init__()
        name, _, value = attribute.partition("=")
        self.name, self.value = name, value.strip('"') if value else None
        self.depth = 0  # open elements inside the one found (0: not inside it)
        self.parts: list[str] = []
        self.found = False

    def handle_starttag(self, tag, attrs) -> None:
        if self.depth:
            self.depth += tag not in VOID_TAGS  # (no end tag follows those)
        elif not self.found and any(
            k == self.name and (self.value is None or v == self.value) for k, v in attrs
        ):
            self.found, self.depth = True, 1

    def handle_endtag(self, tag) -> None:
        if self.depth:
            self.depth -= 1

    def handle_data(self, data) -> None:
        if self.depth:
            self.parts.append(data)


def _text(page: str, attribute: str) -> str:
    """The text of the element carrying `attribute` (tags dropped, spaces folded)."""
    parser = _ElementText(attribute)
    parser.feed(page)
    assert parser.found, f"no element with {attribute}"
    return " ".join("".join(parser.parts).split())


def test_the_engine_counts_what_the_log_holds_by_construction(agents):
    report = agents.report
    assert report["requests"] == agent_log.REQUESTS
    assert report["prompt_tokens"] == agent_log.PROMPT_TOKENS
    assert report["tools"] == {
        "requests_with_tools": agent_log.WITH_TOOLS,
        "tool_tokens": agent_log.TOOL_TOKENS,
        "prompt_share": agent_log.TOOL_TOKENS / agent_log.PROMPT_TOKENS,
        "position": "auto",
    }
    assert report["session_share"] == agent_log.WITH_SESSION / agent_log.REQUESTS  # 2 of 4
    assert report["cache_control_requests"] == agent_log.WITH_CACHE_CONTROL
    same = agent_log.SAME_SESSION_HIT_TOKENS / agent_log.PROMPT_TOKENS
    cross = agent_log.CROSS_SESSION_HIT_TOKENS / agent_log.PROMPT_TOKENS
    assert report["infinite_same_session_hit_ratio"] == pytest.approx(same)
    assert report["infinite_cross_session_hit_ratio"] == pytest.approx(cross)


def test_the_page_shows_what_the_prompts_carry(client, analyst, agents):
    page = _page(client, analyst, agents)
    share = agent_log.TOOL_TOKENS / agent_log.PROMPT_TOKENS
    assert _text(page, 'data-metric="tool_share"') == (
        f"{pct(share)} of prompt tokens, in 3 of 4 requests")  # fmt: skip
    # auto, by route (metrics.md section 7): Llama after the system prompt, Claude first;
    # listed in the report's order of routes
    placed = {"llama-3.1-8b": "after the system prompt",
              "claude-sonnet-4": "first, before every message"}  # fmt: skip
    routes = [row["route"] for row in agents.report["routes"]]
    assert sorted(routes) == sorted(placed)
    assert _text(page, 'data-metric="tools_position"') == "by model route: " + ", ".join(
        f"{route} → {placed[route]}" for route in routes)  # fmt: skip
    assert "A prefix cache shares only the leading blocks" in _text(page, "data-tools-why")
    # 2 of 4 requests carry a session id; 1 of 4 a cache_control mark
    assert _text(page, 'data-metric="session_share"') == "50.0 % of requests carry one"
    assert _text(page, 'data-metric="cache_control_share"') == "25.0 % of requests (1)"
    finding = _text(page, 'data-finding="cache_control"')
    assert finding.startswith("Explicit cache breakpoints: 1 request (25.0 %) marks where")
    assert _text(page, 'data-metric="log_format"') == "chat bodies (JSONL)"
    assert _text(page, 'data-metric="tokenizer"') == "cl100k_base"
    assert "data-pre-hashed" not in page


def test_every_hit_ratio_card_is_split_by_session(client, analyst, agents):
    page = _page(client, analyst, agents)
    # by construction: 64 same-session and 32 cross-session hit tokens of 267 (the
    # tokens of agent_log.py: here 24.0 % + 12.0 % = 36.0 %, no rounding to even out)
    same = agent_log.SAME_SESSION_HIT_TOKENS / agent_log.PROMPT_TOKENS
    cross = agent_log.CROSS_SESSION_HIT_TOKENS / agent_log.PROMPT_TOKENS
    split = f"= {pct(same)} same-session + {pct(cross)} cross-session"
    assert _text(page, 'data-metric="infinite_hit_ratio"') == pct(same + cross)
    assert _text(page, 'data-split="infinite"') == split
    # every window holds the whole 30 s log: the same hits as the infinite cache
    for window in agents.report["windows"]:
        assert _text(page, f'data-split="{window["window_s"]:.0f}"') == split
    rec = agents.report["recommendation"]
    assert _text(page, 'data-split="recommended"') == (
        f"= {pct(rec['same_session_hit_ratio'])} same-session + "
        f"{pct(rec['cross_session_hit_ratio'])} cross-session"
    )
    assert "conversation's own history" in _text(page, "data-split-legend")


def _split(total: float, same: float, cross: float) -> dict:
    return hit_split({"hit_ratio": total, "same_session_hit_ratio": same,
                      "cross_session_hit_ratio": cross})  # fmt: skip


def test_each_part_is_rounded_on_its_own():
    # one cross-session share, 50.748 %, in two windows whose same-session shares differ:
    # 10.000 % (total 60.748 % -> 60.7 %) and 10.040 % (total 60.788 % -> 60.8 %). Rounded
    # on its own it reads 50.7 % in both; made to add up to 60.8 % the second window's
    # missing step went to it (the larger remainder, .748 against .040): 50.8 %
    first = _split(0.60748, 0.10000, 0.50748)
    second = _split(0.60788, 0.10040, 0.50748)
    assert (first["same"], first["cross"], first["total"]) == ("10.0 %", "50.7 %", "60.7 %")
    assert (second["same"], second["cross"], second["total"]) == ("10.0 %", "50.7 %", "60.8 %")
    # 10.0 + 50.7 = 60.7: the first adds up as written, the second misses 60.8 by a step
    assert (first["sign"], second["sign"]) == ("=", "≈")


def test_a_log_naming_no_sessions_shows_no_split(client, analyst, agents):
    # the agent log with its session ids taken out of the report, as one naming none:
    # every part of its hits is cross-session by construction, not a finding
    report = copy.deepcopy(agents.report)
    report["session_share"] = 0.0
    upload = Upload.objects.get()
    stored = Analysis.objects.create(
        upload=upload, block_tokens=16, params=agents.params, report=report, status="done"
    )
    page = _page(client, analyst, stored)
    assert "data-split=" not in page and "data-split-legend" not in page
    assert _text(page, "data-no-sessions").startswith("The log names no sessions, so the hit "
                                                      "ratios are not split")  # fmt: skip
    assert _text(page, 'data-metric="session_share"') == (
        "none: each request is its own session, so history and shared material are not "
        "told apart")  # fmt: skip
    # the curve: the total line alone, no band and so no legend swatch for one
    figure = mrc_figure(report)
    uids = [trace.get("uid") for trace in figure["data"]]
    assert "same-session" not in uids and "cross-session" not in uids
    assert not any("stackgroup" in trace for trace in figure["data"])
    (curve,) = [trace for trace in figure["data"] if trace.get("uid") == "curve"]
    assert "customdata" not in curve and "session" not in curve["hovertemplate"]


def test_the_bundled_sample_names_no_sessions_and_draws_no_band():
    # the golden report of the bundled sample: its generator writes no session ids
    report = golden_report("sample-default")
    assert report["session_share"] == 0.0
    uids = [trace.get("uid") for trace in mrc_figure(report)["data"]]
    assert uids[0] == "curve" and "same-session" not in uids


def test_the_curve_has_the_stacked_band_under_its_total(agents):
    report = agents.report
    figure = dict(agents.figures)["mrc"]  # as stored, and drawn again from the report
    assert {k: v for k, v in figure.items() if k != "charts_version"} == mrc_figure(report)
    uids = [trace.get("uid") for trace in figure["data"]]
    assert uids[:3] == ["cross-session", "same-session", "curve"]  # below, on it, the line
    cross, same, curve = figure["data"][:3]
    assert cross["stackgroup"] == same["stackgroup"] and "stackgroup" not in curve
    points = report["mrc"]
    assert cross["y"] == [p["cross_session_hit_ratio"] * 100 for p in points]
    assert same["y"] == [p["same_session_hit_ratio"] * 100 for p in points]
    assert cross["x"] == same["x"] == curve["x"]
    # stacked, the band reaches the curve at every capacity
    assert [c + s for c, s in zip(cross["y"], same["y"], strict=True)] == pytest.approx(curve["y"])
    # at the largest capacity every block is kept: the hits of the infinite cache
    assert same["y"][-1] == pytest.approx(
        100 * agent_log.SAME_SESSION_HIT_TOKENS / agent_log.PROMPT_TOKENS)  # fmt: skip
    assert cross["y"][-1] == pytest.approx(
        100 * agent_log.CROSS_SESSION_HIT_TOKENS / agent_log.PROMPT_TOKENS)  # fmt: skip
    assert figure["layout"]["legend"]["traceorder"] == "normal"


def test_one_hover_on_the_curve_names_the_total_and_both_parts(agents):
    figure = mrc_figure(agents.report)
    cross, same, curve = figure["data"][:3]
    # the band's own points give no tooltip (the upper one's sit on the curve, which won
    # the hover): the curve's says all three at that capacity
    assert cross["hoverinfo"] == same["hoverinfo"] == "skip"
    assert curve["customdata"] == [[p["same_session_hit_ratio"] * 100,
                                    p["cross_session_hit_ratio"] * 100]
                                   for p in agents.report["mrc"]]  # fmt: skip
    assert curve["hovertemplate"] == (
        "%{x:,.2f} GiB of RAM<br>%{y:.1f}% of prompt tokens hit"
        "<br>same-session (conversation history): %{customdata[0]:.1f}%"
        "<br>cross-session (shared material): %{customdata[1]:.1f}%<extra></extra>"
    )
    # the hover stays with the point under the pointer (plotly's "closest"), so the
    # recommended marker's tooltip shows at the marker, not in a box for the whole x
    assert figure["layout"].get("hovermode", "closest") == "closest"
    (rec,) = [trace for trace in figure["data"] if trace.get("uid") == "recommended"]
    assert rec["hovertemplate"] == "%{text}<extra></extra>"


def test_the_downloads_carry_the_split(client, analyst, agents):
    assert client.login(username=analyst.username, password=PASSWORD)
    report = agents.report
    curve = client.get(reverse("analysis_download", args=[agents.pk, "curve.csv"]))
    reader = csv.DictReader(io.StringIO(curve.content.decode()))
    assert reader.fieldnames == ["capacity_slots", "capacity_bytes", "capacity_gib", "hit_ratio",
                                 "same_session_hit_ratio", "cross_session_hit_ratio"]  # fmt: skip
    rows = list(reader)
    assert [(float(r["same_session_hit_ratio"]), float(r["cross_session_hit_ratio"]))
            for r in rows] == [(p["same_session_hit_ratio"], p["cross_session_hit_ratio"])
                               for p in report["mrc"]]  # fmt: skip
    last = rows[-1]
    assert float(last["same_session_hit_ratio"]) == pytest.approx(
        agent_log.SAME_SESSION_HIT_TOKENS / agent_log.PROMPT_TOKENS)  # fmt: skip
    windows = client.get(reverse("analysis_download", args=[agents.pk, "windows.csv"]))
    assert windows["Content-Disposition"].endswith(f'kvscope-analysis-{agents.pk}-windows.csv"')
    reader = csv.DictReader(io.StringIO(windows.content.decode()))
    assert reader.fieldnames == [
        "window_s", "hit_ratio", "same_session_hit_ratio", "cross_session_hit_ratio",
        "hit_tokens", "useful_ws_peak_bytes", "useful_ws_p95_bytes", "useful_ws_median_bytes",
        "ttl_occupancy_peak_bytes"]  # fmt: skip
    rows = list(reader)
    assert [float(r["window_s"]) for r in rows] == [w["window_s"] for w in report["windows"]]
    for row in rows:  # each window holds the 30 s log: every hit of it
        assert int(row["hit_tokens"]) == (
            agent_log.SAME_SESSION_HIT_TOKENS + agent_log.CROSS_SESSION_HIT_TOKENS)  # fmt: skip
        assert float(row["cross_session_hit_ratio"]) == pytest.approx(
            agent_log.CROSS_SESSION_HIT_TOKENS / agent_log.PROMPT_TOKENS)  # fmt: skip


def test_a_pre_hashed_trace_says_what_does_not_apply(client, analyst, tmp_path):
    path = tmp_path / "trace.jsonl"
    write_jsonl(mooncake_requests(60, seed=4), path)
    analysis = default_analysis(upload_create(name="trace", sources=[path], user=analyst))
    page = _page(client, analyst, analysis)
    assert "tool definitions, their placement, cache_control marks and the tokenizer do not " \
        "apply" in _text(page, "data-pre-hashed")  # fmt: skip
    for absent in ("tool_share", "tools_position", "cache_control_share", "tokenizer"):
        assert f'data-metric="{absent}"' not in page
    assert _text(page, 'data-metric="log_format"') == "Mooncake trace"
    # a Mooncake trace names no session: no card splits its hits, the page says why once
    assert analysis.report["session_share"] == 0.0
    assert _text(page, 'data-metric="session_share"').startswith("none: each request is its own")
    assert "data-split=" not in page and "data-no-sessions" in page


def test_a_report_stored_before_the_split_still_shows(client, analyst, agents):
    new_keys = {"session_share", "tools", "cache_control_requests",
                "infinite_same_session_hit_ratio", "infinite_cross_session_hit_ratio"}  # fmt: skip
    old = {k: v for k, v in copy.deepcopy(agents.report).items() if k not in new_keys}
    for part in (*old["windows"], old["recommendation"], *old["mrc"]):
        part.pop("same_session_hit_ratio")
        part.pop("cross_session_hit_ratio")
    stored = Analysis.objects.create(upload=Upload.objects.get(), block_tokens=16,
                                     params=agents.params, report=old, status="done")  # fmt: skip
    page = _page(client, analyst, stored)
    assert "data-split" not in page and "data-carried" not in page
    assert _text(page, 'data-metric="infinite_hit_ratio"') == pct(old["infinite_hit_ratio"])
    uids = [t.get("uid") for t in mrc_figure(old)["data"]]
    assert "curve" in uids and "cross-session" not in uids and "same-session" not in uids
    curve = client.get(reverse("analysis_download", args=[stored.pk, "curve.csv"]))
    first = next(csv.DictReader(io.StringIO(curve.content.decode())))
    assert first["same_session_hit_ratio"] == first["cross_session_hit_ratio"] == ""
