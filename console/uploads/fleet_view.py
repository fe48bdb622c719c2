"""What the analysis page says of a fleet and of admission (metrics.md section 8), in words
read from the report: which router buys what, what a replica's RAM costs under each, the
LRU-vs-useful gap that admission narrows, and which stored figures the page shows in
those sections rather than among the others.

No arithmetic: the numbers are the engine's, compared (which is larger) and formatted
here (console.format)."""

from __future__ import annotations

from console.format import gib_text, percent_text
from console.uploads.admission_words import admission_sentences
from console.uploads.fleet_words import router_phrase

# the figures shown in the page's own sections (console.uploads.charts draws them last,
# in this order, so the page lists every figure in drawing order)
SECTION_FIGURES = ("admission", "fleet", "fleet_load", "logged_cache")


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


def _dealt_alike(entries: list[dict]) -> list[str]:
    """Each router that deals exactly as an earlier one (the report's same_partition_as),
    as a sentence: it tested nothing of its own."""
    sentences = []
    for entry in entries:
        if not entry.get("same_partition_as"):
            continue
        earlier = router_phrase(entry["same_partition_as"])
        sentence = f"{_capital(router_phrase(entry['router']))} deals as {earlier} here"
        if (entry["router"], entry["same_partition_as"]) == ("session", "round_robin"):
            sentence += ": the log names no sessions"
        sentences.append(sentence + ".")
    return sentences


def fleet_sentence(fleet: dict) -> str:
    """Which router buys what, from the fleet's ceilings: the routers from the highest
    ceiling down, the pooled store after them, the single cache for reference (e.g.
    "Prefix-aware routing reaches a 36.0 % ceiling where round robin reaches 20.0 %; a
    pooled store reaches 37.0 %; one cache fed all of the traffic reaches 37.0 %."), then
    each router that dealt as an earlier one, said as such rather than as a result."""
    entries = fleet.get("routers") or []
    own = [e for e in entries if not e.get("same_partition_as")]
    # highest ceiling first; equals keep the report's order (sorted is stable)
    routed = sorted(
        (e for e in own if e["router"] != "pooled"), key=lambda e: e["ceiling"], reverse=True
    )
    pooled = next((e for e in own if e["router"] == "pooled"), None)
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
    return " ".join(["; ".join(clauses) + ".", *_dealt_alike(entries)])


def fleet_cost_sentence(fleet: dict, target: float) -> str:
    """What a replica's host RAM costs under each router, at the recommendation's rule (a
    router dealing as an earlier one costs the same: said once, by the earlier)."""
    costs = [
        f"{gib_text(e['recommendation']['ram_bytes'])} with {router_phrase(e['router'])}"
        for e in fleet.get("routers") or []
        if not e.get("same_partition_as")
    ]
    return (
        f"For {percent_text(target, 0)} of its ceiling, a replica needs "
        f"{_joined(costs)} (host RAM with headroom, all of its TP ranks)."
    )


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
