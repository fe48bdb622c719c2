"""Shares are entered and shown as percentages (target, headroom, warm-up, the offload
estimate's hit ratio), stored and given to the engine as shares, and a stored analysis
opens its form in percent again."""

from __future__ import annotations

import re

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from console.percent_fields import percentage, share
from console.uploads.analysis_forms import AnalysisForm, analysis_initial
from console.uploads.page_forms import OffloadForm
from tests.console.factories import PASSWORD, opened_analysis_form, rerun


def _params(**values) -> dict:
    form = AnalysisForm(opened_analysis_form(256, **values), block_sizes=[256])
    assert form.is_valid(), form.errors
    return form.params()


def test_the_form_opens_in_percent():
    form = AnalysisForm(block_sizes=[256])
    values = {name: form[name].value() for name in ("target", "headroom", "warmup")}
    assert values == {"target": 90, "headroom": 10, "warmup": 0}  # 0.9, 0.1 and 0 of it
    assert 'value="90"' in str(form["target"])  # a whole number, not 90.0


def test_percentages_posted_are_stored_as_shares():
    params = _params(target="90", headroom="10", warmup="50")
    assert (params["target"], params["headroom"], params["warmup"]) == (0.9, 0.1, 0.5)
    params = _params(target="85", headroom="12.5", warmup="")  # empty: no warm-up
    assert (params["target"], params["headroom"], params["warmup"]) == (0.85, 0.125, 0.0)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("target", "150", "Give the target as a percentage of the ceiling from 1 to 100, e.g. 90."),
        ("target", "0.5", "Give the target as a percentage of the ceiling from 1 to 100, e.g. 90."),
        ("target", "ninety", "Give the target as a percentage of the ceiling from 1 to 100"),
        ("headroom", "-5", "Give the headroom as a percentage from 0 to 500, e.g. 10."),
        ("headroom", "600", "Give the headroom as a percentage from 0 to 500, e.g. 10."),
        ("warmup", "100", "Give the warm-up as a percentage of the requests from 0 to 99"),
    ],
)
def test_a_percentage_out_of_range_is_refused_in_words(name, value, message):
    form = AnalysisForm(opened_analysis_form(256, **{name: value}), block_sizes=[256])
    assert not form.is_valid()
    assert form.errors[name][0].startswith(message)


def test_a_stored_analysis_opens_its_shares_as_percentages_and_round_trips():
    stored = _params(target="85", headroom="20", warmup="50")
    initial = analysis_initial(stored, 256)
    assert (initial["target"], initial["headroom"], initial["warmup"]) == (85, 20, 50)
    reopened = AnalysisForm(initial=initial, block_sizes=[256])
    assert 'value="85"' in str(reopened["target"])
    posted = {k: v for k, v in initial.items() if v is not None and k != "routers"}
    again = AnalysisForm(posted, block_sizes=[256])
    assert again.is_valid(), again.errors
    assert {k: again.params()[k] for k in ("target", "headroom", "warmup")} == {
        "target": 0.85,
        "headroom": 0.2,
        "warmup": 0.5,
    }


def test_percentage_and_share_by_hand():
    assert 0.07 * 100 != 7  # why percentage() rounds: 7.000000000000001
    assert percentage(0.07) == 7 and isinstance(percentage(0.07), int)
    assert percentage(0.29) == 29 and percentage(0.9) == 90
    assert percentage(0.125) == 12.5 and percentage(0.0) == 0
    assert share(90) == 0.9 and share(12.5) == 0.125


def test_the_offload_estimates_hit_ratio_is_a_percentage():
    ask = {"pcie": "5", "prefill_tokens_per_s": "30000", "hit_ratio": "25"}
    assert OffloadForm(ask).estimate_args()["hit_ratio"] == 0.25
    blank = OffloadForm({**ask, "hit_ratio": ""})
    assert blank.estimate_args()["hit_ratio"] is None  # at the recommended size
    refused = OffloadForm({**ask, "hit_ratio": "150"})
    assert not refused.is_valid()
    assert refused.errors["hit_ratio"] == [
        "Give the hit ratio as a percentage from 0 to 100, e.g. 25."
    ]
    assert refused.estimate_args()["hit_ratio"] is None  # the estimate keeps the default


def test_a_percentage_field_shows_its_unit_after_the_box():
    form = AnalysisForm(block_sizes=[256])
    html = render_to_string("_field.html", {"field": form["target"]})
    assert '<span class="suffix" aria-hidden="true">%</span>' in html
    assert 'id="id_target"' in html.split('class="suffix"')[0]  # the box, then the unit
    assert "Target share of the ceiling (%)" in html  # the unit in the label, read aloud
    other = render_to_string("_field.html", {"field": form["tp"]})
    assert "suffix" not in other


@pytest.mark.django_db(transaction=True)
def test_the_pages_of_a_stored_analysis_show_its_shares_in_percent(client, analysis, analyst):
    again = rerun(analysis, analyst, target=0.85, headroom=0.25, warmup=0.5)
    assert client.login(username=analyst.username, password=PASSWORD)
    for url in (
        reverse("analysis_detail", args=[again.pk]),
        reverse("upload_detail", args=[again.upload_id]),  # opens from the latest analysis
    ):
        page = client.get(url).content.decode()
        for name, shown in (("target", "85"), ("headroom", "25"), ("warmup", "50")):
            box = re.search(rf'<input[^>]*id="id_{name}"[^>]*>', page).group(0)
            assert f'value="{shown}"' in box, (url, box)
