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
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off for the block, then as it was. In a process's main thread only
    (a command, a Celery task, a part's worker process): the switch is process-wide, and
    an ingest in another thread (the web server's eager mode) must not stop the
    collection of the requests' garbage for minutes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
