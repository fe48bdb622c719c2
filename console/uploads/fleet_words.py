"""The fleet's routers (analysis.params.ROUTERS, metrics.md section 8) in words: the
analysis form's checkboxes, the fleet section's table and sentence, and the router
chart's legend all name them from here, so they agree."""

from __future__ import annotations

from analysis.params import ROUTER_NAMES

# what each router does, in one line (the form's checkboxes)
ROUTER_WHAT = {
    "round_robin": "the i-th request to replica i mod N",
    "session": "each session to one replica",
    "prefix": "to the replica that saw the longest prefix (SGLang, llm-d, production-stack)",
    "pooled": "one host store shared by every replica (Mooncake Store, LMCache remote)",
}

# a block's k-th use in words (k-th past these)
ORDINALS = {1: "first", 2: "second", 3: "third"}

# a router as the subject of a sentence ("prefix-aware routing reaches ...")
ROUTER_PHRASES = {
    "round_robin": "round robin",
    "session": "routing by session",
    "prefix": "prefix-aware routing",
    "pooled": "a pooled store",
}


def router_name(router: str) -> str:
    """A router in words; one this console does not know yet, as the engine names it."""
    return ROUTER_NAMES.get(router, router.replace("_", " "))


def router_phrase(router: str) -> str:
    """A router as the subject of a sentence; one unknown here, by its name."""
    return ROUTER_PHRASES.get(router, router_name(router))


def use_ordinal(k: int) -> str:
    """A block's k-th use in words: "first", "second", "third", else "k-th"."""
    return ORDINALS.get(k, f"{k}-th")


def fleet_label(params: dict) -> str:
    """An analysis's fleet in words, from its stored parameters: "4 replicas · round robin /
    prefix-aware"; "" for one cache fed all of the traffic (no fleet asked)."""
    parts = []
    if replicas := params.get("replicas"):
        parts.append(f"{replicas} replica{'s' * (replicas != 1)}")
    if routers := params.get("routers"):
        parts.append(" / ".join(router_name(r) for r in routers))
    return " · ".join(parts)


def same_requests_note(entry: dict) -> str | None:
    """What a router that deals exactly as an earlier one (the report's
    same_partition_as) says of itself; None for one that deals its own way. Sessions
    dealt as round robin: the log names no sessions (metrics.md section 8)."""
    earlier = entry.get("same_partition_as")
    if not earlier:
        return None
    note = f"same requests as {router_name(earlier)}"
    if entry["router"] == "session" and earlier == "round_robin":
        note += " (the log names no sessions)"
    return note


__all__ = [
    "ORDINALS",
    "ROUTER_NAMES",
    "ROUTER_PHRASES",
    "ROUTER_WHAT",
    "fleet_label",
    "router_name",
    "router_phrase",
    "same_requests_note",
    "use_ordinal",
]
