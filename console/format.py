"""Units and number formats the console shows: one definition for pages, charts and CSVs.

The page filters (console/templatetags/kvscope.py) add what a template needs on top of
these (a dash for a missing value, "out of range" for one no float holds); the charts and
the CSVs call them directly."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

# The console's name for a window or a lifetime in words (300 -> "5 min", 3600 -> "1 h").
# Defined in the engine, which labels the comparison's rows with it; pages, charts and
# comparisons all name windows through this one import, so they agree.
from analysis.compare import window_name

GIB = 1 << 30
BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def gib(nbytes: float) -> float:
    """Bytes in GiB (the unit of every chart axis and of the curve's capacity_gib column)."""
    return nbytes / GIB


def gib_text(nbytes: float, digits: int = 2) -> str:
    """1.5 GiB as "1.50 GiB", with thousands separators (the pages' sizes)."""
    return f"{nbytes / GIB:,.{digits}f} GiB"


def gib_number(nbytes: float) -> str:
    """GiB without the unit, for chart labels: from 1 GiB as gib_text writes it (two
    decimals, thousands separators: a label and its card agree), three significant
    digits below it (a 0.004 GiB point would otherwise read 0.00)."""
    value = nbytes / GIB
    return f"{value:,.2f}" if value >= 1 or value == 0 else f"{value:.3g}"


def gib_size_text(nbytes: float) -> str:
    """A size in GiB however small or large it is (a column of sizes in one unit, never
    TiB): as gib_text from 1 GiB, three significant digits below it (as gib_number)."""
    return f"{gib_number(nbytes)} GiB"


def bytes_text(nbytes: float, digits: int = 2) -> str:
    """A size in the largest binary unit under 1,024 of it: 512 B, 9.77 KiB, 1.50 GiB."""
    if abs(nbytes) < 1024:
        return f"{nbytes:,.0f} B"
    for unit in BYTE_UNITS[1:-1]:
        nbytes /= 1024
        if abs(nbytes) < 1024:
            return f"{nbytes:,.{digits}f} {unit}"
    return f"{nbytes / 1024:,.{digits}f} {BYTE_UNITS[-1]}"


def percent(ratio: float) -> float:
    """A ratio (0.25) as a percentage (25.0), the unit of every chart's hit-ratio axis."""
    return ratio * 100


def percent_text(ratio: float, digits: int = 1) -> str:
    """0.25 as "25.0 %" (the pages' ratios)."""
    return f"{ratio * 100:.{digits}f} %"


def money_text(amount: float) -> str:
    """An amount in the planner's own currency, two decimals with separators: 1234.5 as
    "1,234.50", -3 as "−3.00" (the cost view names no currency: prices are the user's)."""
    text = f"{abs(amount):,.2f}"
    return f"−{text}" if amount < 0 and text.strip("0.,") else text


def times_text(ratio: float) -> str:
    """A ratio of two amounts as a factor: 1.8 as "1.80×" (the busiest replica's load
    over the mean)."""
    return f"{ratio:.2f}×"


# The one way a moment is written for people, on every page and in every CSV: minutes (or
# seconds, where the order of close events matters) and the zone's abbreviation, so a
# reader in another zone never has to guess.
MOMENT_FORMAT = "%Y-%m-%d %H:%M %Z"
MOMENT_FORMAT_SECONDS = "%Y-%m-%d %H:%M:%S %Z"


def moment_text(moment: dt.datetime | dt.date, seconds: bool = False) -> str:
    """A moment in the configured time zone (settings.TIME_ZONE) with its abbreviation:
    "2026-12-01 14:03 UTC" ("2026-12-01 14:03:07 UTC" with seconds). A calendar day (a
    date, such as the day raw files are kept until) has no zone: "2026-12-01"."""
    if not isinstance(moment, dt.datetime):
        return moment.isoformat()
    zone = timezone.get_default_timezone()
    if timezone.is_naive(moment):  # (stored by USE_TZ=False code: read as the zone's own)
        moment = timezone.make_aware(moment, zone)
    return timezone.localtime(moment, zone).strftime(
        MOMENT_FORMAT_SECONDS if seconds else MOMENT_FORMAT
    )


__all__ = [
    "BYTE_UNITS",
    "GIB",
    "bytes_text",
    "gib",
    "gib_number",
    "gib_size_text",
    "gib_text",
    "moment_text",
    "money_text",
    "percent",
    "percent_text",
    "times_text",
    "window_name",
]
