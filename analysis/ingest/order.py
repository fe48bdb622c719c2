"""Time order: requests are kept sorted by arrival (ties: file order), and a log or a
merge of parts that is not is re-ordered here, its block references and occurrences with
its requests."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from analysis.stream import ref_start


def time_order(t_us: np.ndarray) -> np.ndarray | None:
    """The stable order that sorts the requests by time; None when they are in it."""
    order = np.argsort(t_us, kind="stable")
    if not bool(np.any(order != np.arange(order.size))):
        return None
    return order


def reorder_requests(columns: Mapping[str, np.ndarray], order: np.ndarray) -> dict[str, np.ndarray]:
    return {name: values[order] for name, values in columns.items()}


def reorder_refs(
    start: np.ndarray, order: np.ndarray, columns: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(each request's first reference, the reference columns), requests in `order`."""
    ref_index = gather_ranges(start, order)
    new_start = ref_start(np.diff(start)[order])
    return new_start, {name: values[ref_index] for name, values in columns.items()}


def reorder_occurrences(
    occurrences: Mapping[str, np.ndarray], order: np.ndarray
) -> dict[str, np.ndarray]:
    """The occurrences of requests put in `order`: renumbered, in the new request order
    (a request's own occurrences keep theirs)."""
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    req = rank[occurrences["req"]].astype(occurrences["req"].dtype, copy=False)
    occ_order = np.argsort(req, kind="stable")
    return {"req": req[occ_order], "seg": occurrences["seg"][occ_order],
            "offset": occurrences["offset"][occ_order]}  # fmt: skip


def gather_ranges(start: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Indices of the ranges [start[i], start[i+1]) for i in `order`, concatenated."""
    lengths = (start[1:] - start[:-1])[order]
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    new_start = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=new_start[1:])
    shift = np.repeat(start[:-1][order] - new_start, lengths)
    return np.arange(total, dtype=np.int64) + shift
