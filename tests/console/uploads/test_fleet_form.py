"""The re-analysis form's Fleet fieldset (metrics.md section 8, #15): posted values become
the FleetParams an analysis runs with (checked by hand), stored in the form's own words
and read back onto the form; bad values are refused in words; nothing entered is no
fleet at all. No database."""

from __future__ import annotations

import re

import pytest

from analysis import params as engine_params
from analysis.params import MAX_STORE_THRESHOLD, ROUTERS, FleetParams
from console.engine import analysis_params
from console.uploads import analysis_forms
from console.uploads.analysis_forms import AnalysisForm, analysis_initial
from console.uploads.fleet_words import ROUTER_NAMES, ROUTER_PHRASES, ROUTER_WHAT
from tests.console.factories import opened_analysis_form

GIB = 2**30


def _posted(**fleet) -> dict:
    """The form as it opens (its initial values), with the fleet's fields as given."""
    return opened_analysis_form(256, **fleet)


def _form(**fleet) -> AnalysisForm:
    form = AnalysisForm(_posted(**fleet), block_sizes=[256])
    form.is_valid()
    return form


def test_a_posted_fleet_is_the_fleet_the_engine_gets():
    form = _form(
        replicas="4",
        routers=["round_robin", "prefix"],
        gpu_cache_gib="1.5",
        store_threshold="2",
        prefix_threshold="0.25",
    )
    assert form.is_valid(), form.errors
    params = form.params()
    # stored in the form's words: GiB, router names as the engine spells them
    fleet_fields = ("replicas", "routers", "gpu_cache_gib", "store_threshold", "prefix_threshold")
    assert {k: params[k] for k in fleet_fields} == {
        "replicas": 4,
        "routers": ["round_robin", "prefix"],
        "gpu_cache_gib": 1.5,
        "store_threshold": 2,
        "prefix_threshold": 0.25,
    }
    # 1.5 GiB = 1,610,612,736 bytes; the routers in the order of the checkboxes
    assert analysis_params(**params).fleet == FleetParams(
        replicas=4,
        routers=("round_robin", "prefix"),
        prefix_threshold=0.25,
        gpu_cache_bytes=1_610_612_736,
        store_threshold=2,
    )


def test_nothing_entered_is_one_cache_and_one_field_keeps_the_other_defaults():
    form = _form()
    assert form.is_valid(), form.errors
    assert analysis_params(**form.params()).fleet is None
    # admission alone: one replica with the store threshold, every other value FleetParams'
    form = _form(store_threshold="2")
    assert form.is_valid(), form.errors
    fleet = analysis_params(**form.params()).fleet
    assert fleet == FleetParams(store_threshold=2)
    assert (fleet.replicas, fleet.routers, fleet.gpu_cache_bytes) == (1, (), 0)
    # two replicas, no router ticked: every router (FleetParams.chosen_routers)
    fleet = analysis_params(**_form(replicas="2").params()).fleet
    assert fleet.chosen_routers() == ("round_robin", "session", "prefix", "pooled")


def test_a_stored_fleet_comes_back_onto_the_form():
    """Re-analysis opens with the stored values: posted again unchanged, the same params."""
    posted = _form(replicas="3", routers=["session", "pooled"], gpu_cache_gib="0.5")
    stored = posted.params()
    initial = analysis_initial(stored, 256)
    reopened = AnalysisForm(initial=initial, block_sizes=[256])
    ticked = re.findall(r'value="(\w+)" id="id_routers_\d+" checked', str(reopened["routers"]))
    assert ticked == ["session", "pooled"]
    assert reopened["replicas"].value() == 3
    again = AnalysisForm({k: v for k, v in initial.items() if v is not None}, block_sizes=[256])
    assert again.is_valid(), again.errors
    assert analysis_params(**again.params()).fleet == FleetParams(
        replicas=3, routers=("session", "pooled"), gpu_cache_bytes=GIB // 2
    )


@pytest.mark.parametrize(
    ("fleet", "field", "message"),
    [
        ({"replicas": "0"}, "replicas", "A fleet has at least 1 replica."),
        ({"replicas": "257"}, "replicas", "At most 256 replicas."),  # the engine's bound
        ({"replicas": "four"}, "replicas", "Replicas are a whole number, e.g. 4."),
        ({"replicas": "4", "routers": ["random"]}, "routers",
         "random is not a router this console knows."),
        ({"routers": ["prefix"]}, "routers", "Routers share the traffic among replicas: give 2 "
         "or more replicas to compare them, or untick the routers."),
        ({"replicas": "1", "routers": ["prefix"]}, "routers", "Routers share the traffic among "
         "replicas: give 2 or more replicas to compare them, or untick the routers."),
        ({"gpu_cache_gib": "-1"}, "gpu_cache_gib",
         "The GPU prefix cache cannot be negative: 0 is none."),
        ({"gpu_cache_gib": "lots"}, "gpu_cache_gib",
         "The GPU prefix cache is a number of GiB, e.g. 40."),
        ({"store_threshold": "0"}, "store_threshold",
         "A block is stored at its 1st use at the earliest."),
        ({"store_threshold": "1001"}, "store_threshold", "At most 1,000 uses."),
        ({"prefix_threshold": "50"}, "prefix_threshold",
         "The prefix threshold is a share from 0 to 1 (0.5 is half the prompt)."),
        ({"prefix_threshold": "-0.1"}, "prefix_threshold",
         "The prefix threshold is a share from 0 to 1."),
    ],
)  # fmt: skip
def test_bad_fleet_values_are_refused_in_words(fleet, field, message):
    form = _form(**fleet)
    assert not form.is_valid()
    assert form.errors[field] == [message]


def test_every_router_has_words_and_a_checkbox():
    assert set(ROUTER_NAMES) == set(ROUTER_WHAT) == set(ROUTER_PHRASES) == set(ROUTERS)
    choices = [value for value, _ in AnalysisForm(block_sizes=[256]).fields["routers"].choices]
    assert choices == list(ROUTERS)


def test_the_fleet_fieldset_is_on_the_form_with_help_for_each_field():
    html = AnalysisForm(block_sizes=[256]).as_div()
    for name in ("replicas", "gpu_cache_gib", "store_threshold", "prefix_threshold", "routers"):
        assert f'id="id_{name}_helptext"' in html
    # the defaults named in the help are FleetParams' own
    form = AnalysisForm(block_sizes=[256])
    assert f"Empty: {FleetParams.prefix_threshold:g}." in form.fields["prefix_threshold"].help_text
    assert f"Empty: {FleetParams.store_threshold}," in form.fields["store_threshold"].help_text


def test_the_store_threshold_is_bounded_as_the_engine_bounds_it():
    # the form's bound is analysis.params' constant itself, not a copy that could drift
    assert analysis_forms.MAX_STORE_THRESHOLD is engine_params.MAX_STORE_THRESHOLD
    at_bound = _form(store_threshold=str(MAX_STORE_THRESHOLD))
    assert at_bound.is_valid(), at_bound.errors
    analysis_params(**at_bound.params()).fleet.validate()  # the engine takes it too
    past = _form(store_threshold=str(MAX_STORE_THRESHOLD + 1))
    assert past.errors["store_threshold"] == [f"At most {MAX_STORE_THRESHOLD:,} uses."]
    with pytest.raises(ValueError, match="store threshold must be between 1 and"):
        FleetParams(store_threshold=MAX_STORE_THRESHOLD + 1).validate()


def test_a_prefix_threshold_alone_makes_no_fleet_and_is_carried_by_one():
    # report-contract.md: --replicas, --router, --gpu-cache-gib or --store-threshold make a
    # fleet; the prefix threshold only steers one
    assert analysis_params(prefix_threshold=0.25).fleet is None
    assert analysis_params(prefix_threshold=0.25, store_threshold=2).fleet == FleetParams(
        store_threshold=2, prefix_threshold=0.25
    )
    # a GPU prefix cache of 0 GiB given is a fleet (of one replica, no GPU cache); not
    # given, the GPU cache is FleetParams' default
    assert analysis_params(gpu_cache_gib=0).fleet == FleetParams(gpu_cache_bytes=0)
    assert analysis_params(replicas=2).fleet.gpu_cache_bytes == FleetParams.gpu_cache_bytes
    # on the form, a prefix threshold alone would be dropped: refused in words instead
    form = _form(prefix_threshold="0.25")
    assert form.errors["prefix_threshold"] == [
        "The prefix threshold steers the prefix-aware router of a fleet: give the replicas "
        "too, or leave it empty."
    ]
    with_fleet = _form(prefix_threshold="0.25", gpu_cache_gib="0.5")
    assert with_fleet.is_valid(), with_fleet.errors
    assert analysis_params(**with_fleet.params()).fleet == FleetParams(
        prefix_threshold=0.25, gpu_cache_bytes=GIB // 2
    )
