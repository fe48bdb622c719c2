"""Segment tables under tenant scope (metrics.md sections 2-3): the same segment shared
within two tenants is two entries, and each top-segment and misplaced-segment row names
its tenant as the stream keeps it (the tenant's name; "" for requests without one).

The log, by hand (4-token blocks, a 60 s window): one document D after a different
question in each request, so no request shares a first block with another and D is never
reused as a prefix:
    t=0 A, t=10 B, t=20 A, t=30 B, t=40 no tenant, t=50 no tenant
- global scope: D occurs 6 times, each a reuse within 60 s of the one before but the
  first: 5 reuses, and those 5 occurrences' tokens are misplaced (5 x len(D)).
- tenant scope: D is three scoped segments (A, B, none), each occurring twice, 20 s
  apart: 1 reuse each, and its second occurrence's tokens misplaced (len(D)).
"""

from __future__ import annotations

import pytest

from analysis import AnalysisParams, analyze
from tests.analysis.factories import (
    SHARED_DOCUMENT as DOCUMENT,
    TENANT_QUESTIONS as QUESTIONS,
    two_tenant_rows,
)

BLOCK = 4
WINDOW = 60


@pytest.fixture
def stream(ingest_rows, render):
    prompts = [render([("user", q), ("user", DOCUMENT)]) for q in QUESTIONS]
    # no two prompts share their first block: no prefix hit anywhere, in any scope
    assert len({tuple(p[:BLOCK]) for p in prompts}) == len(prompts)
    return ingest_rows(two_tenant_rows(), block_tokens=BLOCK)


def _report(stream, scope: str):
    return analyze(stream, AnalysisParams(windows_s=(WINDOW,), scope=scope))


def test_global_scope_one_entry_and_no_tenant(stream, enc):
    n = len(enc(DOCUMENT))
    report = _report(stream, "global")
    assert report.windows[0].hit_ratio == 0.0
    [top] = report.top_segments  # the questions occur once: never reused, not listed
    assert (top["occurrences"], top[f"reuses_{WINDOW}s"], top["tokens"]) == (6, 5, n)
    [misplaced] = report.top_misplaced
    assert misplaced["misplaced_tokens"] == 5 * n
    assert "tenant" not in top and "tenant" not in misplaced


def test_tenant_scope_one_entry_per_tenant_naming_it(stream, enc):
    n = len(enc(DOCUMENT))
    report = _report(stream, "tenant")
    top = {row["tenant"]: row for row in report.top_segments}
    assert sorted(top) == ["", "A", "B"] and len(report.top_segments) == 3
    # the same segment: one key in every tenant's entry, as in the global table
    glob = _report(stream, "global").top_segments[0]
    assert {row["key"] for row in top.values()} == {glob["key"]}
    for tenant, (first, last) in {"A": (0, 20), "B": (10, 30), "": (40, 50)}.items():
        row = top[tenant]
        assert (row["occurrences"], row[f"reuses_{WINDOW}s"]) == (2, 1)
        assert (row["first_seen_s"], row["last_seen_s"]) == (first, last)
    misplaced = {row["tenant"]: row["misplaced_tokens"] for row in report.top_misplaced}
    assert misplaced == {"A": n, "B": n, "": n}
    assert report.windows[0].misplaced_reuse_tokens == 3 * n


def test_user_scope_rows_carry_no_tenant(stream):
    # only tenant scope names the tenant (user scope would need user names, shown nowhere)
    report = _report(stream, "user")
    assert report.top_segments and all("tenant" not in row for row in report.top_segments)
