"""Reuse in the reference stream: scoped key ids, previous references, reuse times.

Scopes follow metrics.md section 2: a scoped key is H(scope_salt, global key), which has
exactly the same equalities as pairing the global key with the request's salt code. So
scoping is a factorization of (key, salt) pairs; nothing is re-hashed.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.params import SCOPES
from analysis.prefetch import prefetch

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
def _factorize(keys: np.ndarray, codes: np.ndarray, bits: int) -> int:  # pragma: no cover
    """Open addressing, linear probing, at most half full (2**bits slots to start),
    doubled when it would be more: memory follows the number of distinct keys, not of
    references. The slot of the key a few references ahead is fetched early (prefetch):
    over millions of distinct keys each lookup is a cache miss, and so they overlap."""
    slots = np.full(1 << bits, -1, dtype=codes.dtype)  # slot -> code
    uniques = np.empty(1 << (bits - 1), dtype=np.uint64)  # code -> key
    count = 0
    for i in range(keys.size):
        if i + _AHEAD < keys.size:
            prefetch(slots, np.int64(_mix(keys[i + _AHEAD]) >> np.uint64(64 - bits)))
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
                    slots = np.full(1 << bits, -1, dtype=codes.dtype)
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


@numba.njit(cache=True, nogil=True)
def _sampled_keys(keys: np.ndarray, shift: int) -> np.ndarray:  # pragma: no cover
    """The references whose key's hash ends in `shift` zero bits: every reference of a
    1 / 2**shift share of the distinct keys. (The low bits: the table places a key by its
    high ones, and a sample alike in those would crowd one end of it.)"""
    low = np.uint64((1 << shift) - 1)
    count = 0
    for i in range(keys.size):
        count += _mix(keys[i]) & low == 0
    out = np.empty(count, dtype=np.uint64)
    j = 0
    for i in range(keys.size):
        if _mix(keys[i]) & low == 0:
            out[j] = keys[i]
            j += 1
    return out


_AHEAD = 16  # references between a slot's prefetch and its lookup
_MIN_BITS = 16
_ESTIMATE_ABOVE = 1 << 22  # references: below, growing the table costs little
_SAMPLE_SHIFT = 6  # the estimate's sample: 1 / 64 of the distinct keys


def estimated_distinct(keys: np.ndarray) -> int:
    """The distinct keys, from those of a 1/64 hash sample of them (within a few % once
    the sample holds thousands)."""
    sample = _sampled_keys(keys, _SAMPLE_SHIFT)
    scratch = np.empty(sample.size, dtype=np.int32)
    return int(_factorize(sample, scratch, _MIN_BITS)) << _SAMPLE_SHIFT


def _table_bits(keys: np.ndarray) -> int:
    """The hash table's starting size: room for the distinct keys a sample of them
    promises at half load, plus 5 % for the estimate's own error (so the table is never
    rebuilt while it fills: rebuilding a table of tens of millions of keys, 2 to 4 times
    over, was half the time). An estimate short even so only means one doubling; the
    codes are the same at any starting size."""
    if keys.size < _ESTIMATE_ABOVE:
        return _MIN_BITS
    distinct = estimated_distinct(keys)
    return max(_MIN_BITS, int(np.ceil(np.log2(max(distinct * 2 * 1.05, 1)))))


def dense_ids(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense codes 0..k-1 for the distinct values (in order of first appearance)."""
    codes = np.empty(values.size, dtype=index_dtype(values.size))
    if not values.size:
        return codes, 0
    keys = np.ascontiguousarray(values).view(np.uint64) if values.dtype.itemsize == 8 else (
        values.astype(np.int64).view(np.uint64))  # fmt: skip
    return codes, int(_factorize(keys, codes, _table_bits(keys)))


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
def _previous_refs(ids: np.ndarray, prev: np.ndarray, last: np.ndarray) -> None:
    # prev comes uninitialised: every prev[i] is written
    for i in range(ids.size):
        k = ids[i]
        prev[i] = last[k]
        last[k] = i


@numba.njit(cache=True, nogil=True)
def _repeated_in_request(prev: np.ndarray, starts: np.ndarray) -> np.ndarray:  # pragma: no cover
    out = np.empty(prev.size, dtype=np.bool_)
    for r in range(starts.size - 1):
        first = starts[r]
        for i in range(first, starts[r + 1]):
            out[i] = prev[i] >= first
    return out


def repeated_in_request(prev: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The references whose previous reference is in their own request: a key's later
    copies within a request (`starts`: each request's first reference, then the total).
    Request by request, not prev >= starts[ref_req]: no 8-byte column of 100 M starts."""
    if starts[-1] != prev.size:
        raise ValueError("starts must end at the number of references")
    return _repeated_in_request(prev, np.asarray(starts, dtype=np.int64))


def index_dtype(n: int) -> type[np.int32] | type[np.int64]:
    """int32 indices while they fit: half the memory of int64 on big streams."""
    return np.int32 if n < 2**31 - 1 else np.int64


def previous_refs(ids: np.ndarray, distinct: int) -> np.ndarray:
    """Index of the previous reference to the same id (-1 when none). (What a reference's
    next one would say, each measure reads from its next reference's prev: one N-long
    column less.)"""
    dtype = index_dtype(ids.size)
    prev = np.empty(ids.size, dtype=dtype)
    last = np.full(max(distinct, 1), -1, dtype=dtype)
    _previous_refs(ids, prev, last)
    return prev


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
    if window_us is None:
        return reuse_us >= 0
    return _within(reuse_us, window_us)


@numba.njit(cache=True, nogil=True)
def _within(reuse_us: np.ndarray, window_us: int) -> np.ndarray:  # pragma: no cover
    # one pass: no two N-long temporaries beside the result (200 MB at 100 M references)
    out = np.empty(reuse_us.size, dtype=np.bool_)
    for i in range(reuse_us.size):
        out[i] = 0 <= reuse_us[i] <= window_us
    return out


class ReuseTimes(NamedTuple):
    """Each block reference's reuse time (us since the previous reference to its key), read
    off its requests' times instead of stored: the previous reference's request
    (`prev_req`, -1: none) is an index, half the bytes of a time (100 M references: 381 MiB
    less), and kernels that read that request find it in order instead of looking it up."""

    req_t_us: np.ndarray  # each request's time (in time order: no gap is negative)
    ref_req: np.ndarray  # each reference's request
    prev_req: np.ndarray  # the request of its previous reference (-1: none)

    @classmethod
    def of(cls, req_t_us: np.ndarray, ref_req: np.ndarray, prev: np.ndarray) -> ReuseTimes:
        """From each reference's previous reference (`prev`, -1: none)."""
        return cls(req_t_us, ref_req, _previous_requests(ref_req, prev))

    def within(self, window_us: int | None) -> np.ndarray:
        """The references reused within the window (None: any reuse), as hits_within."""
        if window_us is None:
            return self.prev_req >= 0
        return _requests_within(self.req_t_us, self.ref_req, self.prev_req, window_us)

    def times_us(self) -> np.ndarray:
        """Every reference's reuse time, -1 for a first reference (an 8-byte column)."""
        return _request_gaps(self.req_t_us, self.ref_req, self.prev_req)

    def take(self, keep: np.ndarray) -> ReuseTimes:
        return ReuseTimes(self.req_t_us, self.ref_req[keep], self.prev_req[keep])

    def tokens_within(
        self, window_us: int, tokens: np.ndarray, first_counted: int, same_session: np.ndarray
    ) -> tuple[int, int]:
        """The tokens of the references reused within the window, of the requests from
        `first_counted` on (past the warm-up), and of those the ones whose previous
        reference was of their session: sums in one pass, no mask of every reference."""
        hit, same = _tokens_within(self.req_t_us, self.ref_req, self.prev_req, window_us,
                                   tokens, first_counted, same_session)  # fmt: skip
        return int(hit), int(same)


@numba.njit(cache=True, nogil=True)
def _previous_requests(ref_req, prev):  # pragma: no cover (compiled)
    out = np.empty(prev.size, dtype=ref_req.dtype)
    n = prev.size
    for i in range(n):
        if i + _AHEAD < n and prev[i + _AHEAD] >= 0:
            prefetch(ref_req, np.int64(prev[i + _AHEAD]))  # a random read: start it early
        p = prev[i]
        out[i] = ref_req[p] if p >= 0 else -1
    return out


@numba.njit(cache=True, nogil=True)
def _requests_within(req_t_us, ref_req, prev_req, window_us):  # pragma: no cover (compiled)
    out = np.empty(prev_req.size, dtype=np.bool_)
    for i in range(prev_req.size):
        p = prev_req[i]
        out[i] = p >= 0 and req_t_us[ref_req[i]] - req_t_us[p] <= window_us
    return out


@numba.njit(cache=True, nogil=True)
def _tokens_within(
    req_t_us, ref_req, prev_req, window_us, tokens, first_counted, same_session
):  # pragma: no cover (compiled)
    hit = 0
    same = 0
    for i in range(prev_req.size):
        p = prev_req[i]
        r = ref_req[i]
        if p >= 0 and r >= first_counted and req_t_us[r] - req_t_us[p] <= window_us:
            hit += tokens[i]
            if same_session[i]:
                same += tokens[i]
    return hit, same


@numba.njit(cache=True, nogil=True)
def _request_gaps(req_t_us, ref_req, prev_req):  # pragma: no cover (compiled)
    out = np.empty(prev_req.size, dtype=np.int64)
    for i in range(prev_req.size):
        p = prev_req[i]
        out[i] = req_t_us[ref_req[i]] - req_t_us[p] if p >= 0 else -1
    return out


def to_us(seconds: float) -> int:
    return round(seconds * 1_000_000)
