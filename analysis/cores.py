"""How many cores the engine may keep busy: its worker processes (a split ingest) and its
helper threads (an analysis's independent parts, whose kernels release the GIL)."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores this process may run on (its share under a container or taskset; where
    the system cannot say, as on macOS, the machine's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
