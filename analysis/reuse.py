"""Reuse in the reference stream: scoped key ids, previous/next references, reuse times.

Scopes follow metrics.md section 2: a scoped key is H(scope_salt, global key), which has
exactly the same equalities as pairing the global key with the request's salt code. So
scoping is a factorization of (key, salt) pairs; nothing is re-hashed.
"""

from __future__ import annotations

import numba
import numpy as np

from analysis.params import SCOPES

NO_REF = -1


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(key: np.uint64) -> np.uint64:  # pragma: no cover (compiled)
    """splitmix64's finalizer: every key bit moves every hash bit. (A plain multiplicative
    hash would cluster keys that were themselves selected by one, e.g. a SHARDS sample.)"""
    z = key ^ (key >> np.uint64(30))
    z = z * _M1
    z = z ^ (z >> np.uint64(27))
    z = z * _M2
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _factorize(keys: np.ndarray, codes: np.ndarray) -> int:  # pragma: no cover (compiled)
    """Open addressing, linear probing, doubled at half load: memory follows the number
    of distinct keys, not of references."""
    bits = 16
    slots = np.full(1 << bits, -1, dtype=np.int64)  # slot -> code
    uniques = np.empty(1 << (bits - 1), dtype=np.uint64)  # code -> key
    count = 0
    for i in range(keys.size):
        key = keys[i]
        mask = np.int64((1 << bits) - 1)
        slot = np.int64(_mix(key) >> np.uint64(64 - bits))
        while True:
            code = slots[slot]
            if code < 0:
                if count == uniques.size:  # grow: double, re-insert every key
                    bits += 1
                    grown = np.empty(uniques.size * 2, dtype=np.uint64)
                    grown[:count] = uniques[:count]
                    uniques = grown
                    slots = np.full(1 << bits, -1, dtype=np.int64)
                    mask = np.int64((1 << bits) - 1)
                    for c in range(count):
                        s = np.int64(_mix(uniques[c]) >> np.uint64(64 - bits))
                        while slots[s] >= 0:
                            s = (s + 1) & mask
                        slots[s] = c
                    slot = np.int64(_mix(key) >> np.uint64(64 - bits))
                    continue
                slots[slot] = count
                uniques[count] = key
                codes[i] = count
                count += 1
                break
            if uniques[code] == key:
                codes[i] = code
                break
            slot = (slot + 1) & mask
    return count


def dense_ids(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense codes 0..k-1 for the distinct values (in order of first appearance)."""
    codes = np.empty(values.size, dtype=index_dtype(values.size))
    if not values.size:
        return codes, 0
    keys = np.ascontiguousarray(values).view(np.uint64) if values.dtype.itemsize == 8 else (
        values.astype(np.int64).view(np.uint64))  # fmt: skip
    return codes, int(_factorize(keys, codes))


def salt_codes(tenant: np.ndarray, user: np.ndarray, scope: str) -> np.ndarray:
    """Per request: the code of its scope salt (empty / tenant / tenant+user)."""
    if scope == "global":
        return np.zeros(tenant.size, dtype=np.int64)
    if scope == "tenant":
        return tenant.astype(np.int64)
    if scope == "user":
        pair = tenant.astype(np.int64) * (int(user.max(initial=0)) + 1) + user
        return dense_ids(pair)[0]
    raise ValueError(f"scope must be one of {SCOPES}")


def scoped_ids(keys: np.ndarray, salts: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense ids of (key, salt) pairs: equal exactly when the scoped keys are equal."""
    ids, distinct = dense_ids(keys)
    if salts.size and salts.max(initial=0) > 0:
        ids, distinct = dense_ids(ids.astype(np.int64) * (int(salts.max()) + 1) + salts)
    return ids, distinct


@numba.njit(cache=True, nogil=True)
def _prev_next(ids: np.ndarray, prev: np.ndarray, nxt: np.ndarray, last: np.ndarray) -> None:
    # prev and nxt come uninitialised: every prev[i] is written, and nxt[i] is -1 until a
    # later reference to the same id (visited after i) points it there
    for i in range(ids.size):
        k = ids[i]
        p = last[k]
        prev[i] = p
        nxt[i] = -1
        if p >= 0:
            nxt[p] = i
        last[k] = i


def index_dtype(n: int) -> type[np.int32] | type[np.int64]:
    """int32 indices while they fit: half the memory of int64 on big streams."""
    return np.int32 if n < 2**31 - 1 else np.int64


def prev_next(ids: np.ndarray, distinct: int) -> tuple[np.ndarray, np.ndarray]:
    """Index of the previous and next reference to the same id (-1 when none)."""
    dtype = index_dtype(ids.size)
    prev = np.empty(ids.size, dtype=dtype)
    nxt = np.empty(ids.size, dtype=dtype)
    last = np.full(max(distinct, 1), -1, dtype=dtype)
    _prev_next(ids, prev, nxt, last)
    return prev, nxt


@numba.njit(cache=True, nogil=True)
def _reuse_times(t_us: np.ndarray, prev: np.ndarray) -> np.ndarray:  # pragma: no cover
    out = np.empty(t_us.size, dtype=np.int64)
    for i in range(t_us.size):
        p = prev[i]
        out[i] = t_us[i] - t_us[p] if p >= 0 else -1
    return out


def reuse_times(t_us: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """t - t_prev in microseconds; -1 for a first reference (infinite reuse time)."""
    return _reuse_times(t_us, prev)


@numba.njit(cache=True, nogil=True)
def _ref_reuse_times(req_t_us, ref_req, prev):  # pragma: no cover (compiled)
    out = np.empty(prev.size, dtype=np.int64)
    for i in range(prev.size):
        p = prev[i]
        out[i] = req_t_us[ref_req[i]] - req_t_us[ref_req[p]] if p >= 0 else -1
    return out


def ref_reuse_times(req_t_us: np.ndarray, ref_req: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """reuse_times of block references from their requests' times (no per-reference time
    array: one less 8-byte column over millions of references)."""
    return _ref_reuse_times(req_t_us, ref_req, prev)


def hits_within(reuse_us: np.ndarray, window_us: int | None) -> np.ndarray:
    """References whose reuse time is <= the window (None: infinite window)."""
    seen = reuse_us >= 0
    if window_us is None:
        return seen
    return seen & (reuse_us <= window_us)


def to_us(seconds: float) -> int:
    return round(seconds * 1_000_000)
