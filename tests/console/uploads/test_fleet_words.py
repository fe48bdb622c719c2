"""The fleet section's sentences (console.uploads.fleet_view) on fleets written by hand in
the report's shape: which router buys what, ties said once, the pooled store after the
routers, and the admission paragraph saying when admission recovers nothing. With the
fleet figures and fleet.csv of a report without a fleet. No database."""

from __future__ import annotations

from console.uploads.charts import report_figures
from console.uploads.exports import FLEET_COLUMNS, fleet_csv
from console.uploads.fleet_charts import ROUTER_COLOURS, fleet_figure, fleet_load_figure
from console.uploads.fleet_view import (
    admission_sentences,
    fleet_cost_sentence,
    fleet_sentence,
    split_figures,
)
from console.uploads.fleet_words import same_requests_note, use_ordinal

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


def _admission_report(usual_ram: int, admitted_ram: int, *equal: tuple[int, float, float]) -> dict:
    """A report whose admission compares at the given (GiB, admitted, every block) sizes:
    the admission recommends 2 GiB, the usual cache 8 GiB (their capacities, in slots of
    1 GiB)."""
    return {
        "windows": [
            {"window_s": 300.0, "useful_ws_peak_bytes": GIB},
            {"window_s": 3600.0, "useful_ws_peak_bytes": 2 * GIB},
        ],
        "recommendation": {
            "ram_bytes": usual_ram,
            "capacity_bytes": 8 * GIB,
            "capacity_slots": 8,
            "hit_ratio": 0.5,
            "ceiling": 0.6,
            "target": 0.9,
        },
        "admission": {
            "store_threshold": 2,
            "ceiling": 0.45,
            "recommendation": {"ram_bytes": admitted_ram, "capacity_slots": 2, "hit_ratio": 0.4},
            "at_equal_size": [
                {
                    "capacity_slots": gib,
                    "capacity_bytes": gib * GIB,
                    "hit_ratio": ours,
                    "store_every_block_hit_ratio": theirs,
                }
                for gib, ours, theirs in equal
            ],
        },
    }


def test_admission_compares_at_equal_sizes_and_says_when_it_does_not_pay():
    # the shared trace's shape: admission lower at both sizes
    report = _admission_report(9 * GIB, 3 * GIB, (2, 0.38, 0.4), (8, 0.44, 0.5))
    useful, lru, own, equal, verdict = admission_sentences(report)
    assert useful == (
        "The useful working set is what a cache needs if it never stores a block that will "
        "not come back: reused within 1 h, it peaks at 2.00 GiB."
    )
    # the usual cache's capacity (8 GiB) is above the useful working set's 2 GiB peak
    assert lru == (
        "The LRU recommendation is larger because it stores one-offs too: 9.00 GiB of RAM "
        "for a 50.0 % hit ratio (ceiling 60.0 %)."
    )
    assert own == (
        "Storing a block only at its second use (vLLM's store_threshold 2) recommends 3.00 GiB "
        "of RAM for 40.0 % (ceiling 45.0 %); its target is 90 % of its own ceiling, so only "
        "equal sizes compare the two."
    )
    assert equal == (
        "At 2.00 GiB of cache (its recommended capacity), it hits 38.0 % where storing every "
        "block hits 40.0 %; at 8.00 GiB (the usual cache's recommended capacity), 44.0 % "
        "against 50.0 %."
    )
    assert verdict == (
        "On this traffic admission does not pay at these sizes: the one-offs it keeps out "
        "are fewer than the second uses it gives up."
    )
    # equal as shown (40.04 % and 40.0 % both read 40.0 %) does not pay either
    report = _admission_report(9 * GIB, 3 * GIB, (2, 0.4004, 0.4))
    assert admission_sentences(report)[-1].startswith(
        "On this traffic admission does not pay at this size:"
    )


def test_admission_that_pays_at_one_size_and_not_the_other():
    # the chat sample's shape: higher at the admission's size, lower at the usual one's
    report = _admission_report(9 * GIB, 3 * GIB, (2, 0.48, 0.45), (8, 0.53, 0.56))
    assert admission_sentences(report)[-1] == (
        "On this traffic admission pays at 2.00 GiB (the one-offs it keeps out leave room for "
        "more hits than the second uses it gives up) but not at 8.00 GiB."
    )
    report = _admission_report(9 * GIB, 3 * GIB, (2, 0.48, 0.45), (8, 0.57, 0.56))
    assert admission_sentences(report)[-1] == (
        "On this traffic admission pays at these sizes: the one-offs it keeps out leave room "
        "for more hits than the second uses it gives up."
    )


def test_admission_without_equal_sizes_compares_nothing():
    """A report stored before at_equal_size: the two recommendations, no verdict."""
    report = _admission_report(2 * GIB, 2 * GIB)
    del report["admission"]["at_equal_size"]
    report["windows"][1]["useful_ws_peak_bytes"] = 9 * GIB  # above the usual 8 GiB
    _, lru, own = admission_sentences(report)
    assert lru.startswith("The LRU recommendation stores one-offs too: 2.00 GiB")
    assert own == (
        "Storing a block only at its second use (vLLM's store_threshold 2) recommends 2.00 GiB "
        "of RAM for 40.0 % (ceiling 45.0 %)."
    )
    assert admission_sentences({"recommendation": {}}) is None


def test_uses_in_words():
    assert [use_ordinal(k) for k in (1, 2, 3, 4, 12)] == [
        "first", "second", "third", "4-th", "12-th"]  # fmt: skip


def test_a_router_dealing_as_an_earlier_one_is_said_so_and_drawn_once():
    points = [{"capacity_bytes": GIB, "capacity_slots": 1, "hit_ratio": 0.2,
               "gpu_hit_ratio": 0.0, "ram_hit_ratio": 0.2}]  # fmt: skip
    rec = {"capacity_bytes": GIB, "ram_bytes": GIB, "hit_ratio": 0.2}
    load = {"per_replica": [{"requests": 1, "prompt_tokens": 2, "prefill_tokens": 1}] * 4}
    entry = {"mrc": points, "recommendation": rec, "load": load, "same_partition_as": None}
    fleet = {"replicas": 4, "single_cache_ceiling": 0.4, "exact": True, "routers": [
        {**entry, "router": "round_robin", "ceiling": 0.2},
        {**entry, "router": "session", "ceiling": 0.2, "same_partition_as": "round_robin"},
        {**entry, "router": "prefix", "ceiling": 0.36},
    ]}  # fmt: skip
    assert fleet_sentence(fleet) == (
        "Prefix-aware routing reaches a 36.0 % ceiling where round robin reaches 20.0 %; "
        "one cache fed all of the traffic reaches 40.0 %. Routing by session deals as round "
        "robin here: the log names no sessions."
    )
    assert fleet_cost_sentence(fleet, 0.9) == (
        "For 90 % of its ceiling, a replica needs 1.00 GiB with round robin and 1.00 GiB "
        "with prefix-aware routing (host RAM with headroom, all of its TP ranks)."
    )
    assert same_requests_note(fleet["routers"][1]) == (
        "same requests as round robin (the log names no sessions)"
    )
    assert same_requests_note(fleet["routers"][0]) is None
    # prefix-aware dealing as round robin (a log too small to match): no word of sessions
    assert same_requests_note({"router": "prefix", "same_partition_as": "round_robin"}) == (
        "same requests as round robin"
    )
    lines = [t for t in fleet_figure({"fleet": fleet})["data"] if t["mode"] == "lines"]
    assert [t["name"] for t in lines] == ["round robin (= session)", "prefix-aware",
                                          "single-cache ceiling"]  # fmt: skip


def test_each_router_keeps_its_colour_whichever_routers_are_asked_for():
    """Prefix-aware is drawn in the same colour alone, after round robin, or after three
    others: the colour is the router's, not its place in the report."""
    points = [{"capacity_bytes": GIB, "capacity_slots": 1, "hit_ratio": 0.2,
               "gpu_hit_ratio": 0.0, "ram_hit_ratio": 0.2}]  # fmt: skip
    rec = {"capacity_bytes": GIB, "ram_bytes": GIB, "hit_ratio": 0.2}
    load = {"per_replica": [{"requests": 1, "prompt_tokens": 2, "prefill_tokens": 1}] * 2}

    def colours(*routers: str) -> tuple[dict, dict]:
        fleet = {"replicas": 2, "single_cache_ceiling": 0.4, "exact": True, "routers": [
            {"router": r, "ceiling": 0.2, "mrc": points, "recommendation": rec, "load": load}
            for r in routers]}  # fmt: skip
        curves = {t["uid"]: t["line"]["color"] for t in fleet_figure({"fleet": fleet})["data"]
                  if t["uid"].startswith("fleet-") and "recommended" not in t["uid"]}  # fmt: skip
        bars = {t["uid"]: t["marker"]["color"]
                for t in fleet_load_figure({"fleet": fleet})["data"]}  # fmt: skip
        return curves, bars

    alone = colours("prefix")
    second = colours("round_robin", "prefix")
    last = colours("round_robin", "session", "pooled", "prefix")
    prefix = ROUTER_COLOURS["prefix"]
    assert prefix != ROUTER_COLOURS["round_robin"]
    for curves, bars in (alone, second, last):
        assert curves["fleet-prefix"] == prefix
        assert bars["load-requests-prefix"] == bars["load-prefill_tokens-prefix"] == prefix
    assert second[0]["fleet-round_robin"] == last[0]["fleet-round_robin"]


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
