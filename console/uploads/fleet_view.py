"""What the analysis page says of a fleet and of admission (metrics.md section 8), in words
read from the report: which router buys what, what a replica's RAM costs under each, the
LRU-vs-useful gap that admission narrows, and which stored figures the page shows in
those sections rather than among the others.

No arithmetic: the numbers are the engine's, compared (which is larger) and formatted
here (console.format)."""

from __future__ import annotations

from console.format import gib_text, percent_text, window_name
from console.uploads.fleet_words import router_phrase

# the figures shown in the page's own sections (console.uploads.charts draws them last,
# in this order, so the page lists every figure in drawing order)
SECTION_FIGURES = ("admission", "fleet", "fleet_load")
ORDINALS = {1: "first", 2: "second", 3: "third"}


def split_figures(figures: dict[str, dict]) -> tuple[dict[str, dict], dict[str, dict]]:
    """The page's figures apart from its sections', and the sections' ({name: figure})."""
    main = {name: fig for name, fig in figures.items() if name not in SECTION_FIGURES}
    sections = {name: fig for name, fig in figures.items() if name in SECTION_FIGURES}
    return main, sections


def _joined(parts: list[str]) -> str:
    """["a", "b", "c"] as "a, b and c"."""
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _routed_clause(routed: list[dict], replicas: int) -> str:
    """The routers' ceilings, the highest first (as sorted by the caller); routers whose
    ceilings read the same are said together ("x and y reach 20.0 %")."""
    groups = _groups(routed)
    (first, text), rest = groups[0], groups[1:]
    if not rest:
        if len(first) == 1:
            return f"{_capital(first[0])} over {replicas} replicas reaches a {text} ceiling"
        return f"{_capital(_joined(first))} reach the same {text} ceiling"
    best = f"{_capital(_joined(first))} {_reach(first)} a {text} ceiling"
    return f"{best} where {_joined([f'{_joined(g)} {_reach(g)} {t}' for g, t in rest])}"


def _groups(routed: list[dict]) -> list[tuple[list[str], str]]:
    """The routers as phrases, those next to each other whose ceilings read the same
    (rounded as shown) in one group: [(phrases, ceiling text)]."""
    groups: list[tuple[list[str], str]] = []
    for entry in routed:
        name, text = router_phrase(entry["router"]), percent_text(entry["ceiling"])
        if groups and groups[-1][1] == text:
            groups[-1][0].append(name)
        else:
            groups.append(([name], text))
    return groups


def _reach(subjects: list[str]) -> str:
    return "reaches" if len(subjects) == 1 else "reach"


def fleet_sentence(fleet: dict) -> str:
    """Which router buys what, from the fleet's ceilings: the routers from the highest
    ceiling down, the pooled store after them, the single cache for reference (e.g.
    "Prefix-aware routing reaches a 36.0 % ceiling where round robin reaches 20.0 %; a
    pooled store reaches 37.0 %; one cache fed all of the traffic reaches 37.0 %.")."""
    entries = fleet.get("routers") or []
    # highest ceiling first; equals keep the report's order (sorted is stable)
    routed = sorted(
        (e for e in entries if e["router"] != "pooled"), key=lambda e: e["ceiling"], reverse=True
    )
    pooled = next((e for e in entries if e["router"] == "pooled"), None)
    clauses = [_routed_clause(routed, fleet["replicas"])] if routed else []
    if pooled is not None:
        ceiling = percent_text(pooled["ceiling"])
        clauses.append(
            f"a pooled store reaches {ceiling}"
            if routed
            else f"A pooled store over {fleet['replicas']} replicas reaches a {ceiling} ceiling"
        )
    clauses.append(
        f"one cache fed all of the traffic reaches {percent_text(fleet['single_cache_ceiling'])}"
    )
    return "; ".join(clauses) + "."


def fleet_cost_sentence(fleet: dict, target: float) -> str:
    """What a replica's host RAM costs under each router, at the recommendation's rule."""
    costs = [
        f"{gib_text(e['recommendation']['ram_bytes'])} with {router_phrase(e['router'])}"
        for e in fleet.get("routers") or []
    ]
    return (
        f"For {percent_text(target, 0)} of its ceiling, a replica needs "
        f"{_joined(costs)} (host RAM with headroom, all of its TP ranks)."
    )


def _useful_clause(report: dict) -> str:
    """The longest window's useful working set peak, if the report has windows."""
    windows = report.get("windows") or []
    if not windows:
        return ""
    longest = max(reversed(windows), key=lambda w: w["window_s"])
    peak = gib_text(longest["useful_ws_peak_bytes"])
    return f": reused within {window_name(longest['window_s'])}, it peaks at {peak}"


def admission_sentences(report: dict) -> list[str] | None:
    """The LRU-vs-useful gap in words, with the two recommended sizes and hit ratios;
    None without the admission curve."""
    admission = report.get("admission")
    if not admission:
        return None
    usual, admitted = report["recommendation"], admission["recommendation"]
    k = admission["store_threshold"]
    use = f"{ORDINALS.get(k, f'{k}th')} use"
    recovers = admitted["ram_bytes"] < usual["ram_bytes"]
    lru = (
        f"The LRU recommendation {'is larger because it stores' if recovers else 'stores'} "
        f"one-offs too: {gib_text(usual['ram_bytes'])} of RAM for a "
        f"{percent_text(usual['hit_ratio'])} hit ratio (ceiling {percent_text(usual['ceiling'])})."
    )
    sized = (
        f"{gib_text(admitted['ram_bytes'])} of RAM for "
        f"{percent_text(admitted['hit_ratio'])} (ceiling {percent_text(admission['ceiling'])})"
    )
    if recovers:
        admit = (
            f"Admitting a block only at its {use} (vLLM's store_threshold {k}) recovers "
            f"part of the gap: {sized}; the price is that every use of a block up to its "
            f"{use} misses."
        )
    else:
        admit = (
            f"Admitting a block only at its {use} (vLLM's store_threshold {k}) recovers "
            f"nothing on this log: {sized}."
        )
    useful = (
        "The useful working set is what a cache needs if it never stores a block that will "
        f"not come back{_useful_clause(report)}."
    )
    return [useful, lru, admit]


def fleet_page(report: dict | None, figures: dict[str, dict]) -> dict:
    """The analysis page's context for its charts, its fleet section and its admission
    paragraph: "figures" (the others), "section_figures", "fleet_sentence",
    "fleet_cost" and "admission_sentences" (None when the report has no such part)."""
    main, sections = split_figures(figures)
    fleet = (report or {}).get("fleet")
    target = ((report or {}).get("recommendation") or {}).get("target")
    return {
        "figures": main,
        "section_figures": sections,
        "fleet_sentence": fleet_sentence(fleet) if fleet else None,
        "fleet_cost": fleet_cost_sentence(fleet, target) if fleet and target else None,
        "admission_sentences": admission_sentences(report) if report else None,
    }


__all__ = [
    "SECTION_FIGURES",
    "admission_sentences",
    "fleet_cost_sentence",
    "fleet_page",
    "fleet_sentence",
    "split_figures",
]
