"""Display filters: human units (GiB, %, thousands separators) and dates, in the formats of
console.format, and `fields`, a form's fields by name (a fieldset's). Formatting only.

A stored report may hold values no page should meet (1e308 GiB entered before the form had
bounds, an integer past any float, inf read back from SQLite): every numeric filter shows
them as "out of range" instead of raising (a 500 on the page)."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import wraps

import orjson
from django import template
from django.templatetags.static import static
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from console.format import (
    bytes_text,
    gib_size_text,
    gib_text,
    moment_text,
    money_text,
    percent_text,
    times_text,
    window_name,
)
from console.staticfinders import STATIC_PATH as PLOTLY_PATH
from console.uploads.curve_words import sampling_words
from console.uploads.fleet_words import fleet_label, router_name, same_requests_note, use_ordinal
from console.uploads.prompts import TOOLS_POSITION_PLACED, log_format_name, upload_log_format

register = template.Library()
OUT_OF_RANGE = "out of range"


def _finite(value) -> float | None:
    """value as a finite float, or None (not a number, inf, nan, or past a float)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _one_number(
    *, dash_for: tuple = (None, ""), exact_ints: bool = False
) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """A filter of one number from the filter's formatting of a finite one: "—" for a
    missing value (one of dash_for), OUT_OF_RANGE for one no finite float holds; with
    exact_ints an int is formatted as it is (exact, however large)."""

    def decorate(format_number: Callable[..., str]) -> Callable[..., str]:
        @wraps(format_number)  # Django reads the filter's arguments through it
        def show(value, *args) -> str:
            if value in dash_for:
                return "—"
            if exact_ints and isinstance(value, int):
                return format_number(value, *args)
            number = _finite(value)
            return OUT_OF_RANGE if number is None else format_number(number, *args)

        return show

    return decorate


@register.filter
@_one_number()
def gib(number: float, digits: int = 2) -> str:
    return gib_text(number, digits)


@register.filter
@_one_number()
def money(number: float) -> str:
    return money_text(number)


@register.filter
@_one_number()
def money_abs(number: float) -> str:
    """The amount without its sign, for sentences that carry the sign in words ("loses
    221.72 a month", never "loses −221.72")."""
    return money_text(abs(number))


@register.filter
def gib_abs(value, digits: int = 2) -> str:
    """The size without its sign, for sentences that carry the sign in words ("short by
    4,565.36 GiB", never "short by -4,565.36 GiB")."""
    number = _finite(value) if value not in (None, "") else None
    return gib(abs(number), digits) if number is not None else gib(value, digits)


@register.filter
@_one_number(dash_for=(None,))  # an empty string is no size: "out of range", not "—"
def bytes_h(number: float) -> str:
    return bytes_text(number)


@register.filter
@_one_number()
def pct(number: float, digits: int = 1) -> str:
    return percent_text(number, digits)


@register.filter
@_one_number(exact_ints=True)
def whole(number: int | float) -> str:
    """A count shown rounded to a whole number, with thousands separators."""
    return f"{round(number):,}"


@register.filter
@_one_number(exact_ints=True)
def num(number: int | float) -> str:
    if isinstance(number, int) or number.is_integer():
        return f"{int(number):,}"
    return f"{number:,.2f}"


@register.filter
@_one_number()
def times(number: float) -> str:
    """A factor: the busiest replica's load over the mean, 1.8 -> 1.80×."""
    return times_text(number)


@register.filter
def curve_sampling(report: dict) -> str:
    return sampling_words(report)


@register.filter
def router(name: str) -> str:
    """A fleet's router in words (round_robin -> round robin)."""
    return router_name(str(name))


@register.filter
def fleet(params: dict) -> str:
    """An analysis's fleet from its parameters ("4 replicas · round robin / session"), or
    "one cache" when none was asked."""
    return fleet_label(params or {}) or "one cache"


@register.filter
def same_requests(entry: dict) -> str | None:
    """A fleet router dealing exactly as an earlier one, in words; None otherwise."""
    return same_requests_note(entry)


@register.filter
def use_number(k: int) -> str:
    """A block's k-th use: 2 -> second."""
    return use_ordinal(int(k))


@register.filter
@_one_number()
def seconds(number: float) -> str:
    """A window or lifetime in words: 300 -> 5 min, 3600 -> 1 h, 86400 -> 24 h."""
    return window_name(number)


@register.filter
@_one_number()
def gib_size(number: float) -> str:
    """A size in GiB at any magnitude (the comparison's sizes: one unit down a column)."""
    return gib_size_text(number)


@register.filter
def signed(value, unit: str = "count") -> str:
    """A difference, with its sign, in the unit of its row ("+3.2 points", "−120 GiB")."""
    if value is None:
        return "—"
    if _finite(value) is None:
        return OUT_OF_RANGE
    sign = "+" if value > 0 else ("−" if value < 0 else "±")
    magnitude = abs(value)
    if unit == "ratio":
        return f"{sign}{magnitude * 100:.1f} points"
    if unit == "relative":  # a change as a fraction of its baseline
        return f"{sign}{magnitude * 100:.1f} %"
    if unit == "bytes":
        if magnitude < 1024:  # a byte or two of rounding (per rank x tp): no difference
            return "±0.00 GiB"
        return f"{sign}{gib_size(magnitude)}"
    return f"{sign}{num(magnitude)}"


@register.filter
def unit_format(value, unit: str) -> str:
    """A comparison's value in the unit of its row: words as they are, ratios in %,
    sizes in GiB (as the analysis pages show them), counts with separators."""
    if unit == "text":  # words, e.g. the routers of a fleet
        return str(value) if value else "—"
    if unit == "ratio":
        return pct(value)
    if unit == "bytes":
        return gib_size(value)
    return num(value)


@register.filter
def get(mapping, key):
    return mapping.get(key) if mapping else None


@register.filter
def fields(form, names: str) -> list:
    """The form's bound fields named in `names` (separated by spaces), in that order: the
    fields of one fieldset of a long form."""
    return [form[name] for name in names.split()]


@register.filter
def reuses(segment_row: dict, window_s: float):
    """A hot-segment row's reuse count within a window (keys like reuses_300s)."""
    return segment_row.get(f"reuses_{window_s:g}s")


@register.filter
def index(sequence, position: int):
    """sequence[position - 1]: the item of a loop's forloop.counter (1-based) in another
    sequence, e.g. a comparison row's difference beside its value."""
    return sequence[position - 1] if 0 < position <= len(sequence) else None


@register.filter
def hit_split(ratios: dict, prefix: str = "") -> dict | None:
    """A hit ratio and its same-session and cross-session parts (metrics.md section 7) as
    texts: {"total", "same", "cross", "sign"}, read from <prefix>hit_ratio,
    <prefix>same_session_hit_ratio and <prefix>cross_session_hit_ratio (a window, the
    recommendation, or the report with prefix "infinite_"). Each part is rounded on its
    own, so an unchanged part reads the same on every card; when the parts' texts then
    miss the total's last digit, `sign` is "≈" (else "="). None when a report stored
    before the split has no parts, or a value is no finite number."""
    keys = [f"{prefix}{name}hit_ratio" for name in ("", "same_session_", "cross_session_")]
    values = [_finite(ratios.get(key)) if ratios else None for key in keys]
    if any(value is None for value in values):
        return None
    total, same, cross = (percent_text(value) for value in values)
    # the texts' own numbers (one decimal each): does what is written add up?
    adds_up = f"{float(same[:-2]) + float(cross[:-2]):.1f} %" == total
    return {"total": total, "same": same, "cross": cross, "sign": "=" if adds_up else "≈"}


@register.filter
def log_format(upload) -> str:
    """What the reader read of an upload, in words ("gateway CSV"); before the ingest, the
    format chosen ("auto": found when read)."""
    read = upload_log_format(upload)
    if read or upload.format == "auto":
        return read or "detected when read"
    return log_format_name(upload.format)


@register.filter
def tools_placed(position: str) -> str:
    """Where an upload's tool definitions go, in words (the option as stored)."""
    return TOOLS_POSITION_PLACED.get(position, position)


@register.filter
@_one_number()
def duration(number: float) -> str:
    """Elapsed seconds for people: 5.3 s, 12 min 5 s, 1 h 06 min."""
    if number < 60:
        return f"{number:.1f} s"
    if number < 3600:
        return f"{int(number // 60)} min {int(number % 60)} s"
    return f"{int(number // 3600)} h {int(number % 3600 // 60):02d} min"


@register.filter
def when(moment, precision: str = "minutes") -> str:
    """Every date a page shows, in one format with the time zone (console.format.moment_text):
    {{ upload.created_at|when }} -> 2026-12-01 14:03 UTC; |when:"seconds" where close events
    are told apart by it (the audit trail, a stalled job's last beat). "—" for none."""
    if moment in (None, ""):
        return "—"
    return moment_text(moment, seconds=precision == "seconds")


@register.simple_tag
def plotly_src() -> str:
    """The URL of plotly.js: versioned by the plotly release (and hashed in production),
    so it may be cached for good."""
    return static(PLOTLY_PATH)


# json_script's escapes: the JSON cannot close its <script> or open markup
_SCRIPT_ESCAPES = ((">", "\\u003E"), ("<", "\\u003C"), ("&", "\\u0026"))


def _script_safe(data: str) -> str:
    """`data` with json_script's escapes: one str.replace per character (each a C loop
    over the string) is ~50 times faster than str.translate's lookup per character, a
    sixth of the analysis page's server time on 130 KB of figures."""
    for char, escape in _SCRIPT_ESCAPES:
        if char in data:
            data = data.replace(char, escape)
    return data


@register.filter
def figure_script(figure: dict, element_id: str) -> str:
    """json_script for a Plotly figure, serialized by orjson: the same data, ten times
    faster than json.dumps on a page of figures (a fifth of its server time)."""
    data = orjson.dumps(figure, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    return format_html('<script id="{}" type="application/json">{}</script>', element_id,
                       mark_safe(_script_safe(data)))  # fmt: skip
