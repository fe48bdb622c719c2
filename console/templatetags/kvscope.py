"""Display filters: human units (GiB, %, thousands separators). Formatting only."""

from __future__ import annotations

from django import template

from analysis.compare import window_name

register = template.Library()
GIB = 1 << 30


@register.filter
def gib(value, digits: int = 2) -> str:
    if value is None or value == "":
        return "—"
    return f"{value / GIB:,.{digits}f} GiB"


@register.filter
def bytes_h(value) -> str:
    if value is None:
        return "—"
    n = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1024
    return str(value)


@register.filter
def pct(value, digits: int = 1) -> str:
    if value is None or value == "":
        return "—"
    return f"{value * 100:.{digits}f} %"


@register.filter
def whole(value) -> str:
    """A count shown rounded to a whole number, with thousands separators."""
    return "—" if value is None or value == "" else f"{round(value):,}"


@register.filter
def num(value) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"


@register.filter
def seconds(value) -> str:
    """A window or lifetime in words: 300 -> 5 min, 3600 -> 1 h, 86400 -> 24 h."""
    if value is None or value == "":
        return "—"
    return window_name(float(value))


@register.filter
def signed(value, unit: str = "count") -> str:
    """A difference, with its sign, in the unit of its row."""
    if value is None:
        return "—"
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
    v = float(value)
    if v < 60:
        return f"{v:.1f} s"
    if v < 3600:
        return f"{int(v // 60)} min {int(v % 60)} s"
    return f"{int(v // 3600)} h {int(v % 3600 // 60):02d} min"
