"""Field helpers both readers use: dotted lookups, tenant and user, token counts."""

from __future__ import annotations

import numpy as np

from analysis.errors import LineError, Refuse, refuse_line

# No model has a context anywhere near this; larger counts are corrupt, not traffic.
MAX_TOKENS = 1 << 40


def first(obj: dict, *paths: tuple[str, ...]) -> object:
    """The first present, non-null value among dotted paths."""
    for path in paths:
        node: object = obj
        for key in path:
            if not isinstance(node, dict) or key not in node:
                node = None
                break
            node = node[key]
        if node is not None:
            return node
    return None


def as_str(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def tenant_and_user(obj: dict) -> tuple[str, str]:
    """A request's tenant and user, at the top level or under `metadata`."""
    return (as_str(first(obj, ("tenant",), ("metadata", "tenant"))),
            as_str(first(obj, ("user",), ("metadata", "user"))))  # fmt: skip


def check_count(value: int | np.ndarray, what: str, refuse: Refuse) -> None:
    """The bounds of a token count (NaN, a column's missing value, breaks none)."""
    if refuse(value < 0):
        raise LineError(f"{what} {value} is negative")
    if refuse(value > MAX_TOKENS):
        raise LineError(f"{what} {value} is absurd (more than {MAX_TOKENS:,})")


def whole_number(value: object, what: str) -> int:
    """A line's count as given, refused when it is not an integer."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise LineError(f"{what} {value!r} is not a whole number")
    return value


def token_count(value: object, what: str) -> int:
    """A line's token count; -1 when it is not given."""
    if value is None:
        return -1
    count = whole_number(value, what)
    check_count(count, what, refuse_line)
    return count
