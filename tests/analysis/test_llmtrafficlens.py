"""kvscope against llmtrafficlens 0.13.4 on pre-hashed traces: the shared Mooncake trace and
a synthetic Bailian one (tests/analysis/synthetic_bailian.py), both with warm-up 0.5.

What llmtrafficlens computes on such a trace (read from its source: adapters.read and
read_hashed_jsonl, cli._load, metrics.replay, capacity_curve, continuation_depths,
fix_reversed and session_key_presence, report.build_profile):
- a line is a request at int(timestamp) (Mooncake's milliseconds; Bailian's seconds cut to
  whole seconds), its input_length, its hash_ids as given, its chat_id as session key;
  parent_chat_id is read and no figure uses it. Blocks are 512 tokens (Mooncake), 16
  (Bailian). Requests replay stably sorted by that integer, so a Bailian trace's lines
  within one second replay in file order; a log in which more than 80 % of continuations
  (below) come before the request they continue is replayed back to front (not the case
  on either trace here: checked).
- warm-up: the first int(0.5 n) requests fill the cache and are not counted; a rate is hit
  tokens over the input_length of the counted requests.
- LRU per token capacity: capacity // block size blocks (at least 1). A request's blocks
  are looked up one by one, first to last: one found is a hit, whatever came before it (not
  only the longest cached prefix), and becomes the most recent; one not found is stored,
  and past the capacity the least recent block is evicted at once. A request's head is
  older than its tail, so it goes first; and once block j is gone, j + 1 (touched right
  after it) is the least recent, so the store of j's miss evicts it: on a chained trace
  a hit past a miss never happens, its hits form a prefix too.
- every hit weighs the block size, the last, partial block too. Unbounded, a hit is a block
  seen before: the ceiling.
- same_conversation / across_requests: a request's continuation depth is the longest d
  below its block count such that its first d blocks are the whole block list of some
  request of the trace (earlier or later, any chat_id); hits on those d blocks are
  same-conversation, the others across requests. No session id enters.
- session-id share: requests whose chat_id is truthy (a chat_id 0 is none) over requests.
- every share rounded to 4 decimals; here the fractions are read before rounding, by
  shadowing the builtin round in its metrics module (and its command line's report.json is
  checked to hold them rounded).

kvscope (metrics.md sections 2, 4, 7): requests in time order (ties: file order); the same
warm-up and whole; each request hits on the longest prefix cached before it, then touches
its blocks last to first; a last block weighs input_length - B (n - 1); a hit is
same-session when the block's previous reference came from the same session (Bailian: the
root chat_id of the parent chain; Mooncake names none: each request its own); the session
share counts requests that carry an id.

What agrees, tool against tool to 1e-6: an unbounded cache hits the same references, so
where every last block is full (input_length = B x blocks: a variant of each trace) its
ceiling is kvscope's infinite-cache ratio, and so is its rate at a capacity the trace
never fills; on Mooncake both have no sessions (share 0) and no same-conversation or
same-session hits. What differs, each tool's figures reproduced by brute force of its own
definition on the same input: the ceiling (its last blocks weigh B: higher by those blocks'
missing tokens), the rates where the cache fills (its heads evicted first, a miss evicting
the request's next block; its last blocks weighing B), the same/cross split (continuation
depth vs the previous reference's session), the Bailian session share (its chat_id 0) and
the order of lines within one second.

The peer is installed once in a virtualenv of its own (tests/analysis/peers.py)."""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from analysis import AnalysisParams, IngestOptions, Report, analyze, ingest
from tests.golden.cases import shared_trace

from .peers import peer_python
from .synthetic_bailian import SYSTEM_TOKENS, bailian_lines
from .trace_definitions import (
    BLOCK,
    WARMUP,
    Line,
    continuation_depths,
    its_lru,
    our_lru,
    read_lines,
    unbounded_hits,
)

PACKAGE = "llmtrafficlens==0.13.4"
KEY = b"llmtrafficlens-test-key"
GIB = 1 << 30
# its report's capacities, 16 K to 16 M tokens by fours (report.DEFAULT_CAPACITIES), and
# per trace some where it fills less or never: the Mooncake trace has 43,924 distinct
# blocks (64 M tokens hold 131,072), the Bailian one 5,985 (1 K tokens hold 64 blocks)
REPORTED = tuple(16 * 4**i * 1024 for i in range(6))
CAPACITIES = {"mooncake": (*REPORTED, 64 << 20), "bailian": (1 << 10, 2 << 10, 4 << 10,
              8 << 10, *REPORTED)}  # fmt: skip
WINDOW_S = 300  # a reuse window shorter than either trace

# Its own functions on a trace, the shares before rounding, as JSON on stdout.
_ITS_RUN = """
import json, sys
from llmtrafficlens import adapters, metrics
# replay() and session_key_presence() round with the builtin round, found here first
metrics.round = lambda number, ndigits=None: number
path, fmt, capacities = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
block = adapters.infer_block_size(fmt)
requests = adapters.read(path, fmt, block, b"")
flipped = metrics.fix_reversed(requests)  # as its command line's _load does
print(json.dumps({"block": block, "warmup": metrics.DEFAULT_WARMUP, "flipped": flipped,
                  "curve": metrics.capacity_curve(requests, block, capacities),
                  "session": metrics.session_key_presence(requests)}))
"""


def _its_figures(trace: Path, fmt: str, capacities: tuple[int, ...]) -> dict:
    """Its curve (by capacity in tokens, None unbounded, exact) and session share."""
    command = [str(peer_python("llmtrafficlens-0.13.4", PACKAGE)), "-c", _ITS_RUN, str(trace),
               fmt, json.dumps(capacities)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, f"llmtrafficlens on {trace} failed:\n{done.stderr}"
    figures = json.loads(done.stdout)
    assert (figures["block"], figures["warmup"], figures["flipped"]) == (BLOCK[fmt], WARMUP, False)
    figures["curve"] = {point["capacity_tokens"]: point for point in figures["curve"]}
    return figures


def _its_report(trace: Path, fmt: str, out: Path) -> dict:
    """`llmtrafficlens profile TRACE --format FMT`: its report.json."""
    command = [str(peer_python("llmtrafficlens-0.13.4", PACKAGE)), "-m", "llmtrafficlens.cli",
               "profile", str(trace), "--format", fmt, "-o", str(out / "report")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=out)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr}"
    return json.loads((out / "report.json").read_text())


def _ours(trace: Path, fmt: str) -> Report:
    """kvscope at its capacities (as budgets, headroom 0: capacity // B blocks each)."""
    stream = ingest([trace], IngestOptions(hash_key=KEY, format=fmt))
    kv = AnalysisParams().profile.kv_bytes_per_token(None)
    budgets = tuple(c // BLOCK[fmt] * BLOCK[fmt] * kv / GIB for c in CAPACITIES[fmt])
    params = AnalysisParams(windows_s=(WINDOW_S,), warmup=WARMUP, headroom=0, budgets_gib=budgets)
    return analyze(stream, params)


@dataclass(frozen=True)
class Seen:
    """One trace seen by both tools, and read here."""

    fmt: str
    path: Path
    lines: list[Line]
    ours: Report
    its: dict

    @property
    def counted(self) -> int:  # both tools' whole: the counted requests' input_length
        return sum(line.input_length for line in self.lines[math.floor(WARMUP * len(self.lines)) :])


def _seen(path: Path, fmt: str) -> Seen:
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return Seen(fmt, path, read_lines(rows, fmt), _ours(path, fmt),
                _its_figures(path, fmt, CAPACITIES[fmt]))  # fmt: skip


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def mooncake() -> Seen:
    trace = shared_trace()
    assert trace is not None, "the shared Mooncake trace is not on this machine"
    return _seen(trace, "mooncake")


@pytest.fixture(scope="module")
def bailian(tmp_path_factory) -> Seen:
    return _seen(_write(tmp_path_factory.mktemp("ltl") / "bailian.jsonl", bailian_lines()),
                 "bailian")  # fmt: skip


@pytest.fixture(params=["mooncake", "bailian"])
def seen(request) -> Seen:
    return request.getfixturevalue(request.param)


def _point(hits: int, same: int, whole: int) -> tuple[float, float, float]:
    return hits / whole, same / whole, (hits - same) / whole


def _approx(values) -> object:
    return pytest.approx(values, abs=1e-6)


def test_its_rates_are_its_definition(seen):
    """At each capacity and unbounded: hit rate, same-conversation, across requests."""
    block, whole = BLOCK[seen.fmt], seen.counted
    for capacity in (*CAPACITIES[seen.fmt], None):
        same, across = its_lru(seen.lines, block, capacity)
        point = seen.its["curve"][capacity]
        got = (point["hit_rate"], point["same_conversation"], point["across_requests"])
        assert got == _approx(((same + across) / whole, same / whole, across / whole)), capacity


def test_our_ratios_are_ours(seen):
    """At its capacities (at_budget), unbounded, and within a window: all, same-session,
    cross-session."""
    ours, block, whole = seen.ours, BLOCK[seen.fmt], seen.counted
    for capacity, entry in zip(CAPACITIES[seen.fmt], ours.at_budget, strict=True):
        assert entry["capacity_slots"] == capacity // block
        got = (entry["hit_ratio"], entry["same_session_hit_ratio"],
               entry["cross_session_hit_ratio"])  # fmt: skip
        assert got == _approx(_point(*our_lru(seen.lines, capacity // block), whole)), capacity
    reuses = list(unbounded_hits(seen.lines))
    for window, bound in ((ours.windows[0], WINDOW_S * 1_000_000), (None, math.inf)):
        hit = [r for r in reuses if r.after_us <= bound]
        hits = sum(r.tokens for r in hit)
        expected = _point(hits, sum(r.tokens for r in hit if r.same_session), whole)
        if window is None:
            got = (ours.infinite_hit_ratio, ours.infinite_same_session_hit_ratio,
                   ours.infinite_cross_session_hit_ratio)  # fmt: skip
        else:
            got = (window.hit_ratio, window.same_session_hit_ratio,
                   window.cross_session_hit_ratio)  # fmt: skip
            assert window.hit_ratio < ours.infinite_hit_ratio  # some reuses come later
        assert got == _approx(expected)


def test_the_reports_curve_is_ours(bailian):
    points = bailian.ours.mrc
    assert len(points) >= 20
    for p in points:
        got = (p["hit_ratio"], p["same_session_hit_ratio"], p["cross_session_hit_ratio"])
        expected = _point(*our_lru(bailian.lines, p["capacity_slots"]), bailian.counted)
        assert got == _approx(expected), p["capacity_slots"]


def test_unbounded_both_hit_the_same_references(seen, tmp_path):
    """Its ceiling weighs each hit a whole block, kvscope's infinite ratio the block's
    tokens: it is higher by the tokens the hit last blocks lack. With every last block
    full the two are equal, and so are its rates and kvscope's at capacities the trace
    never fills."""
    block, whole = BLOCK[seen.fmt], seen.counted
    reuses = list(unbounded_hits(seen.lines))
    assert seen.its["curve"][None]["hit_rate"] == _approx(block * len(reuses) / whole)
    lacking = sum(block - r.tokens for r in reuses if r.last)
    assert lacking > 0
    gap = seen.its["curve"][None]["hit_rate"] - seen.ours.infinite_hit_ratio
    assert gap == _approx(lacking / whole)

    rows = [orjson.loads(line) for line in seen.path.read_bytes().splitlines()]
    full = [{**row, "input_length": block * len(row["hash_ids"])} for row in rows]
    path = _write(tmp_path / f"{seen.fmt}-full.jsonl", full)
    ours, its = _ours(path, seen.fmt), _its_figures(path, seen.fmt, CAPACITIES[seen.fmt])
    assert its["curve"][None]["hit_rate"] == _approx(ours.infinite_hit_ratio)
    never_full = [(c, entry) for c, entry in zip(CAPACITIES[seen.fmt], ours.at_budget, strict=True)
                  if c // block >= ours.distinct_blocks]  # fmt: skip
    assert never_full
    for capacity, entry in never_full:
        assert its["curve"][capacity]["hit_rate"] == _approx(entry["hit_ratio"])
        assert entry["hit_ratio"] == _approx(ours.infinite_hit_ratio)


def test_where_the_cache_fills_it_evicts_the_heads(seen):
    """Weighed alike, the two LRUs still differ once the cache fills: its replay, first to
    last, leaves a request's head older than its tail, and a miss's store evicts the block
    the request looks up next; engine order keeps the shared heads. At the smallest
    capacity kvscope hits more than twice as much."""
    block, smallest = BLOCK[seen.fmt], CAPACITIES[seen.fmt][0]
    its_order = sum(its_lru(seen.lines, block, smallest, our_weights=True))
    ours, _ = our_lru(seen.lines, smallest // block)
    assert ours > 2 * its_order > 0


def test_same_conversation_is_not_same_session(seen):
    """Its split follows whole requests of the trace, kvscope's the session of the block's
    previous reference. Same-conversation for it, cross-session for kvscope: a system
    prompt's blocks in a turn that continues a block-aligned earlier turn, last referenced
    by another conversation; a conversation's hits on a warmer's prompt (the aligned system
    prompt alone). Same-session for kvscope, not for it: a turn's hits on the prompt of the
    turn before, whose partial last block it fills (so that prompt is not its prefix)."""
    depths = continuation_depths(seen.lines)
    reuses = list(unbounded_hits(seen.lines))
    in_depth = [r.index < depths[r.request] for r in reuses]
    cross_in_depth = sum(not r.same_session for r, d in zip(reuses, in_depth, strict=True) if d)
    same_beyond = sum(r.same_session for r, d in zip(reuses, in_depth, strict=True) if not d)
    its_same = seen.its["curve"][None]["same_conversation"]
    if seen.fmt == "mooncake":
        # no request is the whole prefix of another, and none names a session: both 0
        assert not any(depths) and not any(r.same_session for r in reuses)
        assert all(point["same_conversation"] == 0 for point in seen.its["curve"].values())
        assert all(entry["same_session_hit_ratio"] == 0 for entry in seen.ours.at_budget)
        assert its_same == seen.ours.infinite_same_session_hit_ratio == 0
    else:
        assert cross_in_depth > 0 and same_beyond > 0
        # (no other line is as short as a warmer: every turn adds a question to a prompt)
        warmers = {line.keys for line in seen.lines if line.input_length == SYSTEM_TOKENS[-1]}
        on_warmers = [r for r in reuses if seen.lines[r.request].keys[: depths[r.request]]
                      in warmers and not r.same_session]  # fmt: skip
        assert warmers and on_warmers
        assert seen.ours.infinite_same_session_hit_ratio > 5 * its_same > 0


def test_session_share(seen):
    n = len(seen.lines)
    if seen.fmt == "mooncake":  # no line names one
        assert seen.its["session"]["presence_rate"] == seen.ours.session_share == 0
    else:
        # every line has a chain root for kvscope; for it the line whose chat_id is 0
        # (the trace numbers them from 0) has none
        assert seen.ours.session_share == 1
        assert seen.its["session"]["with_session_key"] == n - 1
        assert seen.its["session"]["presence_rate"] == _approx((n - 1) / n)


def test_its_report_holds_these_figures_rounded(seen, tmp_path):
    """`llmtrafficlens profile`'s report.json: the same fractions, rounded to 4 decimals."""
    report = _its_report(seen.path, seen.fmt, tmp_path)
    reuse = report["reuse_potential"]
    assert reuse["warmup"] == WARMUP
    assert reuse["total_input_tokens"] == sum(line.input_length for line in seen.lines)
    assert [point["capacity_tokens"] for point in reuse["curve"]] == [*REPORTED, None]
    for point in reuse["curve"]:
        exact = seen.its["curve"][point["capacity_tokens"]]
        for field in ("hit_rate", "same_conversation", "across_requests"):
            assert point[field] == round(exact[field], 4)
    assert reuse["ceiling"] == round(seen.its["curve"][None]["hit_rate"], 4)
    assert report["session"]["presence_rate"] == round(seen.its["session"]["presence_rate"], 4)
    # its order check: requests with a continuation, and those whose continued request
    # (the latest with that whole block list) comes after them; fine below 80 %
    latest = {line.keys: i for i, line in enumerate(seen.lines)}
    depths = enumerate(zip(seen.lines, continuation_depths(seen.lines), strict=True))
    later = [latest[line.keys[:d]] > i for i, (line, d) in depths if d]
    order = report["sample"]["order"]
    assert (order["continuations"], order["out_of_order"]) == (len(later), sum(later))
    assert sum(later) <= 0.8 * len(later)


def test_lines_within_one_second_replay_in_file_order(tmp_path):
    """It replays a Bailian trace by whole seconds (then file order), kvscope by time. By
    hand: line 1 (5.7 s, blocks 1 2, 16 + 4 tokens) and line 2 (5.2 s, blocks 1 3, 16 +
    16); warm-up 0.5 leaves the second replayed counted, which hits block 1: for it line 2,
    16 of 32 tokens; for kvscope line 1, 16 of 20."""
    rows = [{"chat_id": 1, "parent_chat_id": -1, "timestamp": 5.7, "input_length": 20,
             "output_length": 5, "type": "text", "turn": 1, "hash_ids": [1, 2]},
            {"chat_id": 2, "parent_chat_id": -1, "timestamp": 5.2, "input_length": 32,
             "output_length": 5, "type": "text", "turn": 1, "hash_ids": [1, 3]}]  # fmt: skip
    path = _write(tmp_path / "one-second.jsonl", rows)
    assert _its_figures(path, "bailian", ())["curve"][None]["hit_rate"] == _approx(16 / 32)
    stream = ingest([path], IngestOptions(hash_key=KEY, format="bailian"))
    assert analyze(stream, AnalysisParams(warmup=WARMUP)).infinite_hit_ratio == _approx(16 / 20)
