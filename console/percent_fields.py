"""Shares entered as percentages: the forms take 90 for a target of 0.9 of the ceiling, as
people say it, and hand the engine its shares (analysis.params keeps shares)."""

from __future__ import annotations

from django import forms


def share(percentage: float) -> float:
    """90 (%) -> 0.9, what the engine and the stored parameters hold."""
    return percentage / 100


def percentage(ratio: float) -> float | int:
    """0.9 -> 90, as a form shows it: a whole number when it is one (not 7.000000000000001,
    which 0.07 * 100 is in floating point), else twelve significant digits."""
    value = float(f"{ratio * 100:.12g}")
    return int(value) if value.is_integer() else value


class PercentField(forms.FloatField):
    """A share of something, entered and shown as a percentage: the form holds percent,
    the form's own conversion (share()) gives the engine its share. `message` says the
    range in words, for a value out of it or not a number."""

    suffix = "%"  # templates/_input.html writes it after the box

    def __init__(self, *, min_value: float, max_value: float, message: str, **kwargs):
        messages = {"invalid": message, "min_value": message, "max_value": message}
        super().__init__(
            min_value=min_value, max_value=max_value, error_messages=messages, **kwargs
        )
