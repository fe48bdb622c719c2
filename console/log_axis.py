"""Every log axis of the console's charts, with ticks a reader can read: at 1, 2 and 5
times a power of ten of a unit, labelled with that unit (100 MiB, 200 MiB, 500 MiB, 1 GiB,
2 GiB, ... 500 GiB, 1 TiB), instead of plotly's bare "0.1, 2, 5, 1, 2, 5" of GiB.

A unit holds from 1 to under the next unit (500 MiB, then 1 GiB = 1,024 MiB), so every
tick is a round number of the unit it is written in. When the range holds more ticks than
a narrow chart has room for, the labelled ticks thin to the 1s, then to every other 1, and
the others stay as unlabelled minor grid lines. The axis's range is set, so each tick is
known to lie on it (plotly's own autorange can differ a little)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# labelled ticks a chart of the analysis page (at least 34rem wide) has room for
MAX_TICKS = 8
MANTISSAS = (1, 2, 5)
# of the range's span in decades (at least one), on each side: a marker at an end shows whole
PAD = 0.015


@dataclass(frozen=True)
class Unit:
    """The units an axis's values are written in: (one unit in the axis's values, its
    name), smallest first."""

    steps: tuple[tuple[float, str], ...]


# sizes drawn in GiB (console.format.gib), written in the binary unit that fits
BYTES_IN_GIB = Unit((
    (2**-30, "B"), (2**-20, "KiB"), (2**-10, "MiB"), (1.0, "GiB"), (2.0**10, "TiB"),
    (2.0**20, "PiB"),
))  # fmt: skip
SECONDS = Unit(((1e-6, "µs"), (1e-3, "ms"), (1.0, "s")))
COUNT = Unit(((1.0, ""),))


@dataclass(frozen=True)
class Tick:
    value: float  # in the axis's values
    text: str
    mantissa: int  # 1, 2 or 5
    exponent: int  # the power of ten of the unit


def _number(value: int) -> str:
    return f"{value:,}"


def candidates(unit: Unit, low: float, high: float) -> list[Tick]:
    """Every 1-2-5 tick of `unit` within [low, high], ascending: each unit but the last
    from 1 to 500 of it (1,000 MiB would sit beside 1 GiB), the last one up from 1."""
    ticks = []
    for i, (size, name) in enumerate(unit.steps):
        last = i + 1 == len(unit.steps)
        exponent = 0
        while (last or exponent < 3) and size * 10**exponent <= high * 1.000001:
            for mantissa in MANTISSAS:
                value = size * mantissa * 10**exponent
                if low * 0.999999 <= value <= high * 1.000001:
                    number = _number(mantissa * 10**exponent)
                    text = f"{number} {name}" if name else number
                    ticks.append(Tick(value, text, mantissa, exponent))
            exponent += 1
    return ticks


def labelled(ticks: list[Tick], max_ticks: int = MAX_TICKS) -> list[Tick]:
    """The ticks to write: all of them if they fit, else the 1s, else every n-th 1
    (counted from a unit's own 1, so 1 GiB stays when 10 GiB and 100 GiB go)."""
    if len(ticks) <= max_ticks:
        return ticks
    ones = [t for t in ticks if t.mantissa == 1]
    step = 1
    while len(ones[::step]) > max_ticks:
        step += 1
    start = next((i for i, t in enumerate(ones[:step]) if t.exponent == 0), 0)
    return ones[start::step]


def _span(values: Iterable[float]) -> tuple[float, float]:
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return 2**-10, 1.0  # 1 MiB to 1 GiB: an empty chart's axis
    low, high = min(positive), max(positive)
    if high <= low:
        low, high = low / 2, high * 2
    return low, high


def log_axis(values: Iterable[float], unit: Unit, title: str, max_ticks: int = MAX_TICKS,
             pad: float = PAD) -> dict:  # fmt: skip
    """A layout axis dict: log type, the range of the positive `values` (a little wider,
    unless pad is 0), its 1-2-5 ticks labelled in `unit`, the unlabelled ones as minor
    grid lines."""
    low, high = _span(values)
    pad *= max(math.log10(high / low), 1.0)
    lo, hi = math.log10(low) - pad, math.log10(high) + pad
    ticks = candidates(unit, 10**lo, 10**hi)
    shown = labelled(ticks, max_ticks)
    minor = [t.value for t in ticks if t not in shown]
    axis = {
        "type": "log",
        "range": [lo, hi],
        "tickmode": "array",
        "tickvals": [t.value for t in shown],
        "ticktext": [t.text for t in shown],
        "title": {"text": title},
    }
    if minor:
        axis["minor"] = {"tickmode": "array", "tickvals": minor, "showgrid": True}
    return axis


__all__ = ["BYTES_IN_GIB", "COUNT", "SECONDS", "Tick", "Unit", "candidates", "labelled",
           "log_axis"]  # fmt: skip
