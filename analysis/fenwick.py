"""A Fenwick (binary indexed) tree over slots 0..n-1, held in an array of n + 1 counts
(element 0 unused): the two operations the LRU stack kernels are built on (analysis.mrc's
whole stack, analysis.near_stack's top of it). Inlined where they are called: numba's
on-disk cache of a kernel does not notice a change made here, so after editing this file
remove analysis/__pycache__/*.nbi and *.nbc (a fresh install or image has none)."""

from __future__ import annotations

import numba


@numba.njit(cache=True, nogil=True, inline="always")
def fenwick_add(tree, slot, delta):  # pragma: no cover (compiled)
    """Adds `delta` at `slot`."""
    j = slot + 1
    while j < tree.size:
        tree[j] += delta
        j += j & -j


@numba.njit(cache=True, nogil=True, inline="always")
def fenwick_prefix(tree, slot):  # pragma: no cover (compiled)
    """The sum over slots 0..`slot`, `slot` included."""
    total = 0
    j = slot + 1
    while j > 0:
        total += tree[j]
        j -= j & -j
    return total
