"""The two tiers of one replica (metrics.md section 8): stack distances in the replica's
own stream for its GPU prefix cache, and among the admitted references for its host RAM;
then each request's hits as an engine finds them: the GPU prefix first, the host tier for
the rest, contiguously."""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.mrc import request_starts, stack_distances
from analysis.reuse import previous_refs, ref_reuse_times


class TierDistances(NamedTuple):
    """Per reference of a stream (0: never a hit): the stack distance in the stream (the
    GPU tier's), the RAM distance among its admitted references, and the reuse time since
    the block's previous reference in the stream (us, -1 for none; an empty array where
    no block lifetime is asked for, as nothing reads it then)."""

    gpu: np.ndarray
    ram: np.ndarray
    reuse_us: np.ndarray


def tier_distances(
    ids: np.ndarray,
    ref_req: np.ndarray,
    distinct: int,
    req_t_us: np.ndarray | None,
    store_threshold: int,
    gpu_tier: bool = True,
) -> TierDistances:
    """Both tiers' distances over one stream of references, in engine order. Without a
    GPU tier (`gpu_tier` False) and with k > 1 nothing reads the stream's own distances:
    they are left at 0 (never a GPU hit), saving the costliest pass of the two. Reuse
    times only from the requests' times `req_t_us` (None: none are read)."""
    prev = previous_refs(ids, distinct)
    if gpu_tier or store_threshold <= 1:
        gpu = stack_distances(prev, request_starts(ref_req))
    else:  # (int32 as stack distances are)
        gpu = np.zeros(ids.size, dtype=np.int32)
    if req_t_us is None:
        reuse = np.zeros(0, dtype=np.int64)
    else:
        reuse = ref_reuse_times(req_t_us, ref_req, prev)
    del prev
    return TierDistances(gpu, admitted_distances(ids, ref_req, distinct, store_threshold, gpu),
                         reuse)  # fmt: skip


def admitted_distances(
    ids: np.ndarray,
    ref_req: np.ndarray,
    distinct: int,
    store_threshold: int,
    distances: np.ndarray,
) -> np.ndarray:
    """RAM distances: a block enters host RAM at its k-th reference, so the host tier is an
    LRU over each block's k-th and later references; the first of them cannot hit (0).
    With k = 1 every reference is admitted: the stream's own `distances`."""
    if store_threshold <= 1:
        return distances
    admitted = occurrence_numbers(ids, distinct) >= store_threshold
    out = np.zeros(ids.size, dtype=distances.dtype)
    prev = previous_refs(ids[admitted], distinct)
    out[admitted] = stack_distances(prev, request_starts(ref_req[admitted]))
    return out


@numba.njit(cache=True, nogil=True)
def _occurrence_numbers(ids, distinct):  # pragma: no cover (compiled)
    seen = np.zeros(distinct, dtype=np.int32)
    out = np.empty(ids.size, dtype=np.int32)
    for i in range(ids.size):
        seen[ids[i]] += 1
        out[i] = seen[ids[i]]
    return out


def occurrence_numbers(ids: np.ndarray, distinct: int) -> np.ndarray:
    """1 for a key's first reference, 2 for its second, ..."""
    return _occurrence_numbers(ids, max(distinct, 1))


class RequestHits(NamedTuple):
    """Per reference: a GPU hit (inside its request's GPU prefix), and the smallest host
    RAM capacity in slots at which it is a RAM hit (0: at none)."""

    gpu_hit: np.ndarray
    ram_slots: np.ndarray


def request_hits(
    starts: np.ndarray,
    gpu: np.ndarray,
    gpu_slots: int,
    ram: np.ndarray,
    gpu_ok: np.ndarray | None,
    ram_ok: np.ndarray | None,
) -> RequestHits:
    """Each request looked up as an engine does: its GPU prefix (the leading run of
    references with GPU distance <= gpu_slots) hits at every host capacity; after it, block
    j is a RAM hit at C iff every block from the end of the GPU prefix up to j has a RAM
    distance <= C: the running maximum. `gpu_ok` / `ram_ok` (None: all) are the references
    a block lifetime lets hit in each tier."""
    empty = np.ones(0, dtype=np.bool_)
    return RequestHits(*_request_hits(
        np.asarray(starts, dtype=np.int64), gpu, int(gpu_slots), ram,
        empty if gpu_ok is None else gpu_ok, empty if ram_ok is None else ram_ok,
    ))  # fmt: skip


@numba.njit(cache=True, nogil=True)
def _request_hits(starts, gpu, gpu_slots, ram, gpu_ok, ram_ok):  # pragma: no cover (compiled)
    n = gpu.size
    gpu_hit = np.zeros(n, dtype=np.bool_)
    ram_slots = np.zeros(n, dtype=np.int64)
    check_gpu, check_ram = gpu_ok.size > 0, ram_ok.size > 0
    for r in range(starts.size - 1):
        i, e = starts[r], starts[r + 1]
        while i < e and 0 < gpu[i] <= gpu_slots and (not check_gpu or gpu_ok[i]):
            gpu_hit[i] = True
            i += 1
        run = 0
        while i < e and ram[i] > 0 and (not check_ram or ram_ok[i]):
            run = max(run, ram[i])
            ram_slots[i] = run
            i += 1
    return gpu_hit, ram_slots
