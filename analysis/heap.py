"""Handing memory that no object holds any more back to the operating system.

glibc keeps what the many mid-sized arrays of a big read freed (Arrow's batches and their
numpy copies fall under its mmap threshold, which rises to the size of the largest array
freed) in its heap: after a 100-million-reference trace about 1 GB of the process's
resident memory is such free space, held through the analysis that follows. malloc_trim
returns it. Where the C library is not glibc there is nothing to call, and nothing is done.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the C library this process already has
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_heap() -> None:
    """Return the heap's free pages to the OS (glibc's malloc_trim; elsewhere nothing)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
