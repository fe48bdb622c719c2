"""Display filters: human units (GiB, %, thousands separators), in the formats of
console.format. Formatting only.

A stored report may hold values no page should meet (1e308 GiB entered before the form had
bounds, an integer past any float, inf read back from SQLite): every numeric filter shows
them as "out of range" instead of raising (a 500 on the page)."""

from __future__ import annotations

import math

from django import template
from django.templatetags.static import static

from console.format import bytes_text, gib_text, percent_text, window_name
from console.staticfinders import STATIC_PATH as PLOTLY_PATH

register = template.Library()
OUT_OF_RANGE = "out of range"


def _finite(value) -> float | None:
    """value as a finite float, or None (not a number, inf, nan, or past a float)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


@register.filter
def gib(value, digits: int = 2) -> str:
    if value is None or value == "":
        return "—"
    number = _finite(value)
    if number is None:
        return OUT_OF_RANGE
    return gib_text(number, digits)


@register.filter
def gib_abs(value, digits: int = 2) -> str:
    """The size without its sign, for sentences that carry the sign in words ("short by
    4,565.36 GiB", never "short by -4,565.36 GiB")."""
    number = _finite(value) if value not in (None, "") else None
    return gib(abs(number), digits) if number is not None else gib(value, digits)


@register.filter
def bytes_h(value) -> str:
    if value is None:
        return "—"
    n = _finite(value)
    if n is None:
        return OUT_OF_RANGE
    return bytes_text(n)


@register.filter
def pct(value, digits: int = 1) -> str:
    if value is None or value == "":
        return "—"
    number = _finite(value)
    if number is None:
        return OUT_OF_RANGE
    return percent_text(number, digits)


@register.filter
def whole(value) -> str:
    """A count shown rounded to a whole number, with thousands separators."""
    if value is None or value == "":
        return "—"
    if isinstance(value, int):  # exact, however large
        return f"{value:,}"
    number = _finite(value)
    return OUT_OF_RANGE if number is None else f"{round(number):,}"


@register.filter
def num(value) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, int):
        return f"{value:,}"
    number = _finite(value)
    if number is None:
        return OUT_OF_RANGE
    if not number.is_integer():
        return f"{number:,.2f}"
    return f"{int(number):,}"


@register.filter
def seconds(value) -> str:
    """A window or lifetime in words: 300 -> 5 min, 3600 -> 1 h, 86400 -> 24 h."""
    if value is None or value == "":
        return "—"
    number = _finite(value)
    return OUT_OF_RANGE if number is None else window_name(number)


@register.filter
def signed(value, unit: str = "count") -> str:
    """A difference, with its sign, in the unit of its row."""
    if value is None:
        return "—"
    if _finite(value) is None:
        return OUT_OF_RANGE
    sign = "+" if value > 0 else ("−" if value < 0 else "±")
    magnitude = abs(value)
    if unit == "ratio":
        return f"{sign}{magnitude * 100:.1f} pt"
    if unit == "relative":  # a change as a fraction of its baseline
        return f"{sign}{magnitude * 100:.1f} %"
    if unit == "bytes":
        return f"{sign}{bytes_h(magnitude)}"
    return f"{sign}{num(magnitude)}"


@register.filter
def unit_format(value, unit: str) -> str:
    if unit == "ratio":
        return pct(value)
    if unit == "bytes":
        return bytes_h(value)
    return num(value)


@register.filter
def get(mapping, key):
    return mapping.get(key) if mapping else None


@register.filter
def reuses(segment_row: dict, window_s: float):
    """A hot-segment row's reuse count within a window (keys like reuses_300s)."""
    return segment_row.get(f"reuses_{window_s:g}s")


@register.filter
def index(sequence, position: int):
    """sequence[position - 1]: deltas are listed for the 2nd, 3rd... report."""
    return sequence[position - 1] if 0 < position <= len(sequence) else None


@register.filter
def duration(value) -> str:
    """Elapsed seconds for people: 5.3 s, 12 min 5 s, 1 h 06 min."""
    if value is None or value == "":
        return "—"
    v = _finite(value)
    if v is None:
        return OUT_OF_RANGE
    if v < 60:
        return f"{v:.1f} s"
    if v < 3600:
        return f"{int(v // 60)} min {int(v % 60)} s"
    return f"{int(v // 3600)} h {int(v % 3600 // 60):02d} min"


@register.simple_tag
def plotly_src() -> str:
    """The URL of plotly.js: versioned by the plotly release (and hashed in production),
    so it may be cached for good."""
    return static(PLOTLY_PATH)
