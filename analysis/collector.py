"""Python's cyclic garbage collector, paused while a log is read line by line.

Reading allocates millions of short-lived containers (each line's parsed JSON, its
messages) while the memo of texts and the tables grow, and CPython's collector runs its
full collections over everything that is alive: about 0.5 s of a 7.8 s part of the 1 GB
chat log (BENCHMARKS.md, #19). The reading makes no reference cycles (a test: the
collector finds next to nothing after a log of good and bad lines of every kind), so
reference counting frees everything anyway. The collector's state is restored on the
way out, whatever happened.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off for the block, then as it was. Process-wide: two overlapping
    pauses (two ingests in one process's threads) leave it on once the first that found
    it on is over, never off for good."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
