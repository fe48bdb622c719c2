"""The analysis page's first screen, for a capacity planner: the recommended RAM per
replica and per TP rank, the hit ratio it buys, the host budget's fit and what the host
buys instead, the knee, and what any size asked for buys (metrics.md sections 4 and 9).

With a fleet the figures are per replica, for the router the policy would take by default
(console.policies.fleet.best_router); without one, one cache fed all of the traffic.
No arithmetic: every number is the engine's (the report, or analysis.metrics.at_budget's
reading of its stored curve steps); this module picks, compares and words them."""

from __future__ import annotations

from analysis.metrics.at_budget import buys
from console.format import GIB, gib_text, percent_text, window_name
from console.policies.fleet import best_router
from console.uploads.admission_words import longest_window
from console.uploads.fleet_words import router_phrase

# the largest size the "what does N GiB buy?" field takes: 1 PiB per replica
MAX_ASK_GIB = 1 << 20


def planned_router(report: dict) -> dict | None:
    """The fleet router the first screen's figures are for (None: one cache)."""
    fleet = report.get("fleet")
    return best_router(fleet) if fleet else None


def first_screen(report: dict) -> dict:
    """The first screen's figures: "subject" (whose sizes they are, in words), "router"
    (its name, None for one cache), "recommendation", "host" (None without host RAM),
    "knee" and "budgets" (each budget asked for and what it buys)."""
    entry = planned_router(report)
    rec = report["recommendation"]
    shown = dict(rec)
    if entry is not None:
        shown.update(entry["recommendation"], ceiling=entry["ceiling"])
    router = entry["router"] if entry is not None else None
    return {
        "router": router,
        "subject": _subject(report, router),
        "recommendation": shown,
        "host": _host(report, shown, entry),
        "knee": _knee(report),
        "budgets": [
            _exact(report, e, entry) for e in _entries(report, entry) if e["source"] == "budget"
        ],
        "can_ask": bool(report.get("curve_steps")),
        "why": why_larger(report, shown),
    }


def why_larger(report: dict, rec: dict) -> str | None:
    """Why the recommendation is larger than the useful working set, when it is (the
    longest window's peak): the LRU cache stores the one-offs too."""
    longest = longest_window(report)
    if longest is None:
        return None
    peak = longest["useful_ws_peak_bytes"]
    if rec["capacity_bytes"] <= peak:
        return None
    return (
        f"Why more than the {gib_text(peak)} useful working set (blocks reused within "
        f"{window_name(longest['window_s'])})? An LRU cache stores every block, the one-offs "
        "too, until it evicts them; the useful working set counts only blocks that come back."
    )


def _subject(report: dict, router: str | None) -> str:
    if router is None:
        return "one cache fed all of the traffic"
    replicas = report["fleet"]["replicas"]
    return f"each of {replicas} replicas with {router_phrase(router)}"


def _entries(report: dict, entry: dict | None) -> list[dict]:
    """The exact at_budget entries of the single cache, or of the router per replica."""
    return (entry if entry is not None else report).get("at_budget") or []


def _exact(report: dict, at: dict, entry: dict | None) -> dict:
    """An exact at_budget entry in the shape of a reading (buys), with its sentence."""
    rec = report["recommendation"]
    host = rec.get("host")
    got = {
        **at,
        "router": entry["router"] if entry is not None else None,
        "ceiling": entry["ceiling"] if entry is not None else rec["ceiling"],
        "within": 0.0,
        "host_fits": at["ram_bytes"] <= host["available_bytes"] if host else None,
    }
    return {**got, "sentence": answer_sentence(got)}


def _host(report: dict, rec: dict, entry: dict | None) -> dict | None:
    """The host's fit and what its available RAM buys (also when the recommendation does
    not fit: above all then), from the engine's exact at_budget."""
    host = report["recommendation"].get("host")
    if not host:
        return None
    available = host["available_bytes"]
    at = next((e for e in _entries(report, entry) if e["source"] == "host"), None)
    return {
        **host,
        "fits": rec["ram_bytes"] <= available,
        "spare_bytes": available - rec["ram_bytes"],
        "buys": _exact(report, at, entry) if at is not None else None,
    }


def _knee(report: dict) -> dict | None:
    """The knee and its sentence (the single cache's curve: the fleet has its own chart)."""
    knee = report.get("knee")
    if not knee:
        return None
    gain = report.get("params", {}).get("knee_gain", 0.01)
    points = gain * 100
    amount = "one point" if points == 1 else f"{points:g} points"
    # host RAM as the recommendation gives it (older reports: the capacity alone)
    ram = knee.get("ram_bytes", knee["capacity_bytes"])
    return {
        **knee,
        "ram_bytes": ram,
        "sentence": f"Past {gib_text(ram)}, doubling RAM adds less than {amount} of hit ratio.",
    }


def _asked(report: dict, ram_bytes: int, router: str | None) -> dict:
    """What `ram_bytes` per replica buys, and the answer in words."""
    got = buys(report, ram_bytes, router)
    return {**got, "sentence": answer_sentence(got)}


def answer_sentence(got: dict) -> str:
    """ "512.00 GiB per replica buys a 14.2 % hit ratio (of a 65.1 % ceiling); it fits the
    host." — the words of a reading, for the page and the field's answer alike."""
    per = f"per replica with {router_phrase(got['router'])}" if got["router"] else "of host RAM"
    text = (
        f"{gib_text(got['ram_bytes'])} {per} buys a {percent_text(got['hit_ratio'])} hit ratio "
        f"(of a {percent_text(got['ceiling'])} ceiling)"
    )
    if got["host_fits"] is not None:
        text += "; it fits the host" if got["host_fits"] else "; it does not fit the host"
    return text + "."


def ask(report: dict, gib: float, router: str | None) -> dict:
    """The field's answer for `gib` GiB per replica: the reading and its sentence."""
    if not 0 < gib <= MAX_ASK_GIB:
        raise ValueError(f"give a size above 0 and up to {MAX_ASK_GIB:,} GiB")
    if not report.get("curve_steps"):
        raise ValueError("this analysis predates stored curve steps: run it again to ask")
    return _asked(report, round(gib * GIB), router)
