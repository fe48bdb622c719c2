"""The hot-segment and misplaced-reuse tables, and segments.csv, under tenant scope: one
row per tenant's copy of a segment, each naming its tenant; under global scope no Tenant
column. The log (tests.analysis.factories.two_tenant_rows): one document after a
different question in six requests 10 s apart, of tenants A, B, A, B and none twice; its
prompts are shorter than one 256-token block, so nothing hits as a prefix and every
repeat of the document is misplaced reuse."""

from __future__ import annotations

import csv
import io
import re
from html import unescape

import pytest
from django.urls import reverse

from analysis.tokens import load_encoding
from bench.generate import write_jsonl
from console.uploads.services import upload_create
from tests.analysis.factories import SHARED_DOCUMENT, two_tenant_rows
from tests.console.factories import PASSWORD, default_analysis, rerun

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def analyses(tmp_path, analyst):
    """The log's default analysis (global scope) and its re-run under tenant scope."""
    path = tmp_path / "tenants.jsonl"
    write_jsonl(iter(two_tenant_rows()), path)
    glob = default_analysis(upload_create(name="tenants", sources=[path], user=analyst))
    assert glob.report["scope"] == "global" and glob.report["windows"][0]["hit_ratio"] == 0
    return glob, rerun(glob, analyst, scope="tenant")


def _table(page: str, table_id: str) -> list[list[str]]:
    """The table's rows (its header first) as the texts of their cells."""
    start = page.index(f'id="{table_id}"')
    body = page[start : page.index("</table>", start)]
    rows = re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)
    return [[unescape(re.sub(r"<[^>]+>", "", c)).strip()
             for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, flags=re.S)]
            for row in rows]  # fmt: skip


def test_tenant_scope_tables_name_each_rows_tenant(client, analyst, analyses):
    glob, tenant = analyses
    n = len(load_encoding("cl100k_base").encode_ordinary(SHARED_DOCUMENT))
    assert client.login(username=analyst.username, password=PASSWORD)
    page = client.get(reverse("analysis_detail", args=[tenant.pk])).content.decode()
    hot = _table(page, "hot-segments")
    assert hot[0][:3] == ["Segment", "Tenant", "Kind"]
    # the document three times (A's, B's and the requests' without a tenant), 2 each
    by_tenant = {row[1]: row for row in hot[1:]}
    assert sorted(by_tenant) == ["A", "B", "no tenant"] and len(hot) == 4
    assert {row[4] for row in hot[1:]} == {"2"}  # occurrences
    misplaced = _table(page, "misplaced")
    assert misplaced[0][:2] == ["Segment", "Tenant"]
    assert {(row[1], row[-1]) for row in misplaced[1:]} == {
        ("A", f"{n:,}"), ("B", f"{n:,}"), ("no tenant", f"{n:,}")}  # fmt: skip
    # global scope: one row of 6 occurrences, no Tenant column
    page = client.get(reverse("analysis_detail", args=[glob.pk])).content.decode()
    hot = _table(page, "hot-segments")
    assert "Tenant" not in hot[0] and len(hot) == 2 and hot[1][3] == "6"


def test_segments_csv_has_a_tenant_column_under_tenant_scope(client, analyst, analyses):
    glob, tenant = analyses
    assert client.login(username=analyst.username, password=PASSWORD)
    body = client.get(reverse("analysis_download", args=[tenant.pk, "segments.csv"]))
    reader = csv.DictReader(io.StringIO(body.content.decode()))
    rows = list(reader)
    assert reader.fieldnames[:3] == ["key", "tenant", "kind"]
    assert sorted(row["tenant"] for row in rows) == ["", "A", "B"]
    assert {row["occurrences"] for row in rows} == {"2"}
    assert len({row["key"] for row in rows}) == 1  # the same segment in every tenant
    body = client.get(reverse("analysis_download", args=[glob.pk, "segments.csv"]))
    reader = csv.DictReader(io.StringIO(body.content.decode()))
    assert "tenant" not in reader.fieldnames and len(list(reader)) == 1
