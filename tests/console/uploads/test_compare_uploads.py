"""Comparing analyses of two uploads, from the analysis page's picker to the compare page
and its CSV: the parameters that differ (the log, the block size) as the first rows, and
each figure's difference to the baseline the reader chose."""

from __future__ import annotations

import csv
import io
import re
from html import unescape

import pytest
from django.urls import reverse

from bench.generate import chat_requests, write_jsonl
from console.models import Analysis
from console.uploads.services import upload_create
from tests.console.factories import PASSWORD, default_analysis, gib_shown

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_uploads(analysis, analyst, tmp_path) -> tuple[Analysis, Analysis]:
    """The chat log's default analysis (256-token blocks), and a later upload's: another
    log, ingested at 64 tokens per block."""
    path = tmp_path / "night.jsonl"
    write_jsonl(chat_requests(90, seed=5, documents=4, doc_words=(200, 400)), path)
    night = upload_create(name="night", sources=[path], user=analyst, block_sizes=[64])
    return analysis, default_analysis(night)


def _page(client, name: str, **query) -> str:
    return unescape(client.get(reverse(name, kwargs=query.pop("kwargs", {})), query)
                    .content.decode())  # fmt: skip


def _cells(page: str, key: str) -> list[str]:
    start = page.index(f'data-key="{key}"')
    row = page[start : page.index("</tr>", start)]
    return re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)


def test_the_analysis_page_offers_every_uploads_analyses(client, analyst, two_uploads):
    day, night = two_uploads
    assert client.login(username=analyst.username, password=PASSWORD)
    page = _page(client, "analysis_detail", kwargs={"pk": day.pk})
    picker = page[page.index('id="compare-picker"') : page.index("</form>", page.index(
        'id="compare-picker"'))]  # fmt: skip
    # grouped by upload, the newest upload first; this analysis ticked and the baseline
    assert re.findall(r'data-upload="(\d+)"', picker) == [str(night.upload.pk),
                                                         str(day.upload.pk)]  # fmt: skip
    assert f'name="a" value="{day.pk}" checked' in picker
    assert f'name="a" value="{night.pk}">' in picker
    assert f'value="{day.pk}" aria-label="baseline: analysis #{day.pk}" checked' in picker
    # every choice is labelled (keyboard and screen readers): the box by its analysis
    assert picker.count('<label><input type="checkbox"') == 2 and "<legend>night" in picker


def test_the_second_upload_as_baseline(client, analyst, two_uploads):
    day, night = two_uploads
    assert client.login(username=analyst.username, password=PASSWORD)
    # the baseline need not be ticked: it is compared too, as the first column
    page = _page(client, "compare", a=[day.pk], baseline=night.pk)
    assert "Parameters that differ: Upload (log); Block size (tokens)." in page
    assert f'data-analysis="{night.pk}" data-baseline' in page
    assert _cells(page, "param_source") == [f"night (upload #{night.upload.pk})",
                                            f"day (upload #{day.upload.pk})"]  # fmt: skip
    assert _cells(page, "param_block_tokens") == [
        "64", '256<span class="delta" data-delta>+192</span>']  # fmt: skip
    # the day's figures shown against the night's
    ram = [a.report["recommendation"]["ram_bytes"] for a in (night, day)]
    sign = "+" if ram[1] > ram[0] else "−"
    assert _cells(page, "ram_bytes") == [gib_shown(ram[0]), f'{gib_shown(ram[1])}<span '
        f'class="delta" data-delta>{sign}{gib_shown(abs(ram[1] - ram[0]))}</span>']  # fmt: skip
    hit = [a.report["infinite_hit_ratio"] for a in (night, day)]
    points = (hit[1] - hit[0]) * 100
    assert f"{'+' if points > 0 else '−'}{abs(points):.1f} points" in _cells(
        page, "infinite_hit_ratio")[1]  # fmt: skip
    # the other column offers to become the baseline
    assert f'href="?a={night.pk}&a={day.pk}&baseline={day.pk}" data-make-baseline' in page


def test_the_csv_has_the_baseline_column_and_the_differences(client, analyst, two_uploads):
    day, night = two_uploads
    assert client.login(username=analyst.username, password=PASSWORD)
    response = client.get(reverse("compare"), {"a": [day.pk, night.pk], "baseline": night.pk,
                                               "format": "csv"})  # fmt: skip
    reader = csv.DictReader(io.StringIO(response.content.decode()))
    rows = {row["key"]: row for row in reader}
    assert reader.fieldnames[4:] == [f"#{day.pk}", f"#{night.pk} (baseline)",
                                     f"delta #{day.pk} vs #{night.pk}"]  # fmt: skip
    delta = f"delta #{day.pk} vs #{night.pk}"
    ram = [a.report["recommendation"]["ram_bytes"] for a in (day, night)]
    assert int(rows["ram_bytes"][delta]) == ram[0] - ram[1]
    assert int(rows["param_block_tokens"][delta]) == 256 - 64
    assert rows["param_source"][f"#{night.pk} (baseline)"] == f"night (upload #{night.upload.pk})"
    assert rows["param_source"][delta] == ""  # words have no difference
    hit = [a.report["infinite_hit_ratio"] for a in (day, night)]
    assert float(rows["infinite_hit_ratio"][delta]) == pytest.approx(hit[0] - hit[1])


def test_more_than_four_are_cut_with_a_message(client, analyst, two_uploads):
    day, night = two_uploads
    assert client.login(username=analyst.username, password=PASSWORD)
    page = _page(client, "compare", a=[day.pk, night.pk, 10**6, 10**6 + 1, 10**6 + 2])
    assert "Up to 4 analyses compare at once" in page
    assert re.findall(r'data-analysis="(\d+)"', page) == [str(day.pk), str(night.pk)]


def test_a_lone_analysis_says_there_is_nothing_to_compare(client, analyst, analysis):
    assert client.login(username=analyst.username, password=PASSWORD)
    page = _page(client, "analysis_detail", kwargs={"pk": analysis.pk})
    assert "No other finished analysis to compare with yet" in page
    assert 'name="baseline"' not in page
