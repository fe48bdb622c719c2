"""The fleet section's sentences (console.uploads.fleet_view) on fleets written by hand in
the report's shape: which router buys what, ties said once, the pooled store after the
routers, and the admission paragraph saying when admission recovers nothing. With the
fleet figures and fleet.csv of a report without a fleet. No database."""

from __future__ import annotations

from console.uploads.charts import report_figures
from console.uploads.exports import FLEET_COLUMNS, fleet_csv
from console.uploads.fleet_charts import fleet_figure, fleet_load_figure
from console.uploads.fleet_view import (
    admission_sentences,
    fleet_cost_sentence,
    fleet_sentence,
    split_figures,
)

GIB = 2**30


def _fleet(*ceilings: tuple[str, float], single: float = 0.4) -> dict:
    return {
        "replicas": 4,
        "single_cache_ceiling": single,
        "routers": [{"router": router, "ceiling": ceiling} for router, ceiling in ceilings],
    }


def test_the_highest_ceiling_first_and_the_pooled_store_after():
    fleet = _fleet(("round_robin", 0.2), ("prefix", 0.36), ("pooled", 0.37), single=0.37)
    assert fleet_sentence(fleet) == (
        "Prefix-aware routing reaches a 36.0 % ceiling where round robin reaches 20.0 %; "
        "a pooled store reaches 37.0 %; one cache fed all of the traffic reaches 37.0 %."
    )


def test_equal_ceilings_are_said_once():
    fleet = _fleet(("round_robin", 0.25), ("session", 0.2), ("prefix", 0.2))
    assert fleet_sentence(fleet) == (
        "Round robin reaches a 25.0 % ceiling where routing by session and prefix-aware "
        "routing reach 20.0 %; one cache fed all of the traffic reaches 40.0 %."
    )
    # 0.2001 and 0.2 both read 20.0 %: the same to the reader
    fleet = _fleet(("round_robin", 0.2001), ("session", 0.2), ("prefix", 0.1))
    assert fleet_sentence(fleet).startswith(
        "Round robin and routing by session reach a 20.0 % ceiling where prefix-aware "
        "routing reaches 10.0 %;"
    )
    fleet = _fleet(("round_robin", 0.3), ("prefix", 0.3))
    assert fleet_sentence(fleet).startswith(
        "Round robin and prefix-aware routing reach the same 30.0 % ceiling;"
    )


def test_one_router_and_the_pooled_store_alone():
    assert fleet_sentence(_fleet(("session", 0.125))) == (
        "Routing by session over 4 replicas reaches a 12.5 % ceiling; one cache fed all of "
        "the traffic reaches 40.0 %."
    )
    assert fleet_sentence(_fleet(("pooled", 0.4))) == (
        "A pooled store over 4 replicas reaches a 40.0 % ceiling; one cache fed all of the "
        "traffic reaches 40.0 %."
    )


def test_what_a_replica_costs_under_each_router():
    fleet = {"routers": [
        {"router": "round_robin", "recommendation": {"ram_bytes": 3 * GIB}},
        {"router": "prefix", "recommendation": {"ram_bytes": GIB // 4}},
    ]}  # fmt: skip
    assert fleet_cost_sentence(fleet, 0.9) == (
        "For 90 % of its ceiling, a replica needs 3.00 GiB with round robin and 0.25 GiB "
        "with prefix-aware routing (host RAM with headroom, all of its TP ranks)."
    )


def _admission_report(usual_ram: int, admitted_ram: int) -> dict:
    return {
        "windows": [
            {"window_s": 300.0, "useful_ws_peak_bytes": GIB},
            {"window_s": 3600.0, "useful_ws_peak_bytes": 2 * GIB},
        ],
        "recommendation": {"ram_bytes": usual_ram, "hit_ratio": 0.5, "ceiling": 0.6},
        "admission": {
            "store_threshold": 2,
            "ceiling": 0.45,
            "recommendation": {"ram_bytes": admitted_ram, "hit_ratio": 0.4},
        },
    }


def test_admission_states_both_sizes_and_what_it_recovers():
    useful, lru, admit = admission_sentences(_admission_report(8 * GIB, 2 * GIB))
    assert useful == (
        "The useful working set is what a cache needs if it never stores a block that will "
        "not come back: reused within 1 h, it peaks at 2.00 GiB."
    )
    assert lru == (
        "The LRU recommendation is larger because it stores one-offs too: 8.00 GiB of RAM "
        "for a 50.0 % hit ratio (ceiling 60.0 %)."
    )
    assert admit == (
        "Admitting a block only at its second use (vLLM's store_threshold 2) recovers part "
        "of the gap: 2.00 GiB of RAM for 40.0 % (ceiling 45.0 %); the price is that every "
        "use of a block up to its second use misses."
    )
    # no smaller: it is not said to recover anything, nor LRU to be larger
    _, lru, admit = admission_sentences(_admission_report(2 * GIB, 2 * GIB))
    assert lru.startswith("The LRU recommendation stores one-offs too: 2.00 GiB")
    assert "recovers nothing on this log: 2.00 GiB of RAM for 40.0 %" in admit
    assert admission_sentences({"recommendation": {}}) is None


def test_a_report_without_a_fleet_has_no_fleet_figures_and_an_empty_fleet_csv():
    report = {"mrc": [], "recommendation": {}}
    assert fleet_figure(report) is None and fleet_load_figure(report) is None
    assert fleet_csv(report).splitlines() == [",".join(FLEET_COLUMNS)]


def test_the_sections_figures_are_drawn_last_and_shown_apart():
    figures = {"mrc": {}, "admission": {}, "routes": {}, "fleet": {}, "fleet_load": {}}
    main, sections = split_figures(figures)
    assert list(main) == ["mrc", "routes"]
    assert list(sections) == ["admission", "fleet", "fleet_load"]


def test_report_figures_draws_the_sections_last_in_the_pages_order():
    """The page shows the sections after the other figures: drawn in that order, every
    figure's place on the page is its place in report_figures (the browser tests' check)."""
    points = [{"capacity_bytes": GIB, "capacity_slots": 1, "hit_ratio": 0.5,
               "gpu_hit_ratio": 0.1, "ram_hit_ratio": 0.4}]  # fmt: skip
    rec = {"capacity_bytes": GIB, "capacity_slots": 1, "ram_bytes": GIB, "per_rank_bytes": GIB,
           "hit_ratio": 0.5, "gpu_hit_ratio": 0.1, "ram_hit_ratio": 0.4, "host_fits": None,
           "ceiling": 0.5, "headroom": 0.0, "tp": 1}  # fmt: skip
    load = {"per_replica": [{"requests": 1, "prompt_tokens": 2, "prefill_tokens": 1}] * 2}
    report = {
        "mrc": points,
        "recommendation": rec,
        "admission": {"store_threshold": 2, "ceiling": 0.4, "mrc": points, "recommendation": rec},
        "fleet": {"replicas": 2, "single_cache_ceiling": 0.5, "exact": True, "routers": [
            {"router": "prefix", "ceiling": 0.5, "mrc": points, "recommendation": rec,
             "load": load}]},
    }  # fmt: skip
    names = list(report_figures(report))
    assert names[-3:] == ["admission", "fleet", "fleet_load"]
    load_bars = report_figures(report)["fleet_load"]["data"]
    uids = [bar["uid"] for bar in load_bars]
    assert uids == [f"load-{key}-prefix" for key in ("requests", "prompt_tokens", "prefill_tokens")]
    assert load_bars[1]["y"] == [2, 2]
