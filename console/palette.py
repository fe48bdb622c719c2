"""Every colour a chart of the console draws, in one place, named for what it shows: the
analysis page's curves and bars, the fleet's routers, the compare page and the evidence
(benchmarks) pages all take theirs from here, so one thing keeps one colour on every page
(tests/console/test_palette.py checks that no figure draws a colour from anywhere else).

The page's stylesheet repeats a few of them (static/css/kvscope.css: the accent, ink and
muted text, and the session band's swatches); the same test checks that it agrees."""

from __future__ import annotations

# distinguishable, colour-blind-safe-ish; the first is the console's accent (--accent)
SERIES = ("#2f6fdf", "#e07b39", "#2a9d8f", "#c2417a", "#7b61c9", "#8a6d3b", "#5c6778")
INK = "#1d2430"  # --ink: reference lines (a ceiling), capacities
MUTED = "#5c6778"  # --muted: secondary lines and notes
WHITE = "#fff"  # the ring around a marker
LABEL_BOX = "rgba(255,255,255,0.85)"  # behind a label drawn over lines

# the hit-ratio curve and what is marked on it
SINGLE_CACHE = SERIES[0]  # one cache fed all of the traffic
RECOMMENDED = SERIES[1]  # the recommended size
KNEE = SERIES[5]  # where doubling the cache stops paying
BUDGET = SERIES[3]  # what a budget buys (entered budgets and the host's)
UNRESOLVED = MUTED  # sampled capacities below what SHARDS resolves

# the curve's stacked band (metrics.md section 7): line colour and fill (the page's
# swatches, .swatch.same and .swatch.cross, use the fills)
CROSS_SESSION, CROSS_SESSION_FILL = SERIES[2], "rgba(42, 157, 143, 0.5)"
SAME_SESSION, SAME_SESSION_FILL = SERIES[4], "rgba(123, 97, 201, 0.5)"
# the reuse-time histogram's fill under its outline
REUSE_FILL = "rgba(47, 111, 223, 0.5)"

# each router's colour, the same on every chart of every analysis
ROUTERS = {
    "round_robin": SERIES[0],
    "session": SERIES[1],
    "prefix": SERIES[2],
    "pooled": SERIES[3],
}
OTHER_ROUTER = SERIES[5]  # a router this console does not know yet

# material classes (the segment panel) and request-length statistics (the routes panel)
CLASSES = {"hot": "#d1495b", "occasional": "#edae49", "one_off": "#8d99ae"}
STATS = {"p50": SERIES[0], "p90": SERIES[2], "p99": SERIES[1], "max": SERIES[3]}
# the memory budgets' bars, and the host's reserves in greys, darker as they stack up
WEIGHTS, ACTIVE_KV, REUSABLE_KV = SERIES[4], SERIES[2], SERIES[0]
RESERVES = ("#b8c0cc", "#a3adbb", "#8d99ae", "#78849a", "#647087", "#505c73")

# the evidence pages: green and red are verdicts (inside the SLO or not), kept apart from
# the series colours; runs and tiers take the series colours in order
PASS, FAIL = "#2e7d32", "#c62828"


def series_colour(i: int) -> str:
    """The i-th of several lines that are not otherwise named (windows, compared analyses,
    benchmark runs), cycling."""
    return SERIES[i % len(SERIES)]


def router_colour(router: str) -> str:
    return ROUTERS.get(router, OTHER_ROUTER)


# every colour above: a figure draws no other (tests/console/test_palette.py)
ALL = frozenset({
    *SERIES, INK, MUTED, WHITE, LABEL_BOX, SINGLE_CACHE, RECOMMENDED, KNEE, BUDGET,
    UNRESOLVED, CROSS_SESSION, CROSS_SESSION_FILL, SAME_SESSION, SAME_SESSION_FILL,
    REUSE_FILL, *ROUTERS.values(), OTHER_ROUTER, *CLASSES.values(), *STATS.values(),
    WEIGHTS, ACTIVE_KV, REUSABLE_KV, *RESERVES, PASS, FAIL,
})  # fmt: skip
