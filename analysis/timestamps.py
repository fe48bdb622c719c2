"""Request times, as integer microseconds so window edges compare exactly."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from analysis.errors import LineError, Refuse, refuse_line

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Epoch seconds pass 1e11 only in the year 5138; epoch milliseconds passed it in 1973,
# microseconds 1e14 in 1973 too, nanoseconds 1e17 likewise: magnitude tells the unit.
_UNITS = ((1e17, 1e-3), (1e14, 1.0), (1e11, 1e3))  # (threshold, microseconds per unit)
# int64 microseconds hold about +-292,000 years; refuse anything past year 9999
_MAX_US = 253_402_300_800 * 1_000_000

NO_ZONE_NOTE = "timestamps without a time zone were read as UTC"


def parse_timestamp(value: object) -> tuple[int, bool]:
    """Return (microseconds since the epoch, zone_was_assumed).

    Accepts ISO 8601 (with zone; without one UTC is assumed and flagged), epoch seconds
    or epoch milliseconds, as numbers or numeric strings.
    """
    if isinstance(value, bool) or value is None:
        raise LineError(f"timestamp {value!r} is not a time")
    if isinstance(value, int | float):
        return _from_number(float(value) if isinstance(value, float) else value), False
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            return _from_iso(text)
        return _from_number(int(text) if text.lstrip("-").isdigit() else number), False
    raise LineError(f"timestamp {value!r} is not a time")


def _from_number(number: int | float) -> int:
    """Epoch seconds, ms, µs or ns (told apart by magnitude) as microseconds."""
    if isinstance(number, float) and not math.isfinite(number):
        raise LineError(f"timestamp {number!r} is not a finite number")
    us_per_unit = next((u for threshold, u in _UNITS if abs(number) >= threshold), 1e6)
    if isinstance(number, int):  # exact integer arithmetic, no float rounding
        us = number // 1000 if us_per_unit < 1 else number * int(us_per_unit)
    else:
        us = round(number * us_per_unit)
    return _in_range(us, number)


def _in_range(us: int, original: object) -> int:
    if abs(us) > _MAX_US:
        raise LineError(f"timestamp {original!r} is out of range (after the year 9999)")
    return us


def _from_iso(text: str) -> tuple[int, bool]:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise LineError(f"timestamp {text!r} is neither ISO 8601 nor epoch seconds/ms") from None
    assumed = moment.tzinfo is None
    if assumed:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds, assumed


@dataclass(frozen=True)
class TraceClock:
    """The unit of a pre-hashed trace's timestamps, as its errors name it, and the
    microseconds one of it holds."""

    unit: str
    us: int


MILLISECONDS = TraceClock("milliseconds", 1000)  # Mooncake's traces
SECONDS = TraceClock("seconds", 1_000_000)  # Alibaba's Bailian traces


def as_trace_time(value: object, clock: TraceClock) -> int | float:
    """A trace's timestamp in its unit: a number, or a LineError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LineError(f"timestamp {value!r} is not a number of {clock.unit}")
    return value


def check_trace_time(
    value: float | np.ndarray, clock: TraceClock, refuse: Refuse = refuse_line
) -> None:
    """A trace's timestamps (one, or a column of them) in their unit must be finite and
    before the year 9999; checked before rounding: a huge float has no integer value."""
    # spelled so that ints of any size (no float holds them all), floats and arrays take it
    if isinstance(value, np.ndarray):
        magnitude = np.abs(value)
        with np.errstate(over="ignore"):  # a huge float times the unit is inf: past the bound
            scaled = magnitude * clock.us
    else:
        magnitude = abs(value)
        scaled = magnitude * clock.us
    if refuse((value != value) | (magnitude == math.inf)):
        raise LineError(f"timestamp {value!r} is not a finite number")
    if refuse(scaled > _MAX_US):
        raise LineError(f"timestamp {value!r} is out of range (after the year 9999)")


def trace_time_us(value: int | float, clock: TraceClock) -> int:
    """A trace's timestamp that passed check_trace_time, as microseconds."""
    return round(value * clock.us)


# Plausible request times (RELIABILITY.md). No request predates the epoch, and none comes
# from the future: a day of slack covers clocks that are off and zones read as UTC.
FUTURE_SLACK_US = 86_400 * 1_000_000
# A log whose requests span more than this gets a note: real logs cover hours to months;
# years apart means a wrong unit, a wrong clock or a placeholder such as 0.
MAX_PLAUSIBLE_SPAN_US = 366 * 86_400 * 1_000_000


def now_us() -> int:
    return time.time_ns() // 1000


def check_plausible(
    t_us: int | np.ndarray,
    original: object,
    now: int,
    relative: bool = False,
    refuse: Refuse = refuse_line,
) -> None:
    """Refuse a time no request can have: negative (before 1970, or before a relative
    trace's start), or more than a day in the future. A trace's relative milliseconds are
    never in the future (now is 1.7e12 ms); epoch ones may be. `t_us`: one time or a column
    of them (see Refuse)."""
    if refuse(t_us < 0):
        what = "before the trace's start" if relative else "before 1970"
        raise LineError(f"timestamp {original!r} is negative ({what})")
    if refuse(t_us > now + FUTURE_SLACK_US):
        raise LineError(f"timestamp {original!r} is in the future ({_date(t_us)})")


def _date(t_us: int | np.ndarray) -> str:
    """The day of a line's time (only a line's message names one)."""
    return (_EPOCH + timedelta(microseconds=int(t_us))).date().isoformat()
