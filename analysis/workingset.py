"""Working sets over time (metrics.md section 4), as step functions of live block slots.

Both measures are unions of half-open intervals [start, end) per block: the value at an
instant tau counts the intervals with start <= tau < end. Events at the same instant are
applied together, so a zero-length interval never counts and an interval ending at tau is
not live at tau.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from analysis.reuse import ReuseTimes


@dataclass(frozen=True)
class StepFunction:
    """value[i] holds on [times[i], times[i+1]); 0 before times[0]."""

    times: np.ndarray  # int64 us, strictly increasing
    values: np.ndarray  # int64 slots

    @property
    def peak(self) -> int:
        return int(self.values.max(initial=0))

    def time_weighted_quantiles(self, start: int, end: int, qs: tuple[float, ...]) -> list[int]:
        """Quantiles of the value over [start, end], weighted by how long each value holds.

        For each q: the smallest value v such that the value is <= v for at least a
        share q of the span. A span of zero length gives the value at `start`.
        """
        if end <= start:
            return [self.value_at(start)] * len(qs)
        inside = (self.times > start) & (self.times < end)
        # (each temporary let go as soon as it is read: 100 M references put 4.6 M
        # request times here, 35 MiB an array)
        durations = np.diff(np.concatenate([[start], self.times[inside], [end]]))
        values = np.concatenate(([self.value_at(start)], self.values[inside]))
        order = np.argsort(values, kind="stable")
        values = values[order]
        cumulative = durations[order]
        del order, durations
        np.cumsum(cumulative, out=cumulative)
        total = cumulative[-1]
        out = []
        for q in qs:
            # tiny tolerance: q * total is a float, durations are exact integers
            index = int(np.searchsorted(cumulative, q * total - 1e-9, side="left"))
            out.append(int(values[min(index, values.size - 1)]))
        return out

    def value_at(self, t: int) -> int:
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        return int(self.values[i]) if i >= 0 else 0

    def bucket_max(self, start: int, end: int, buckets: int) -> tuple[np.ndarray, np.ndarray]:
        """(bucket start times, max value within each bucket) for charts."""
        if end <= start or buckets < 1:
            return np.array([start], dtype=np.int64), np.array([self.value_at(start)])
        edges = np.linspace(start, end, buckets + 1).astype(np.int64)
        if not self.times.size:  # nothing is ever live (no reuse within the window)
            return edges[:-1], np.zeros(buckets, dtype=np.int64)
        carried_index = np.searchsorted(self.times, edges[:-1], side="right") - 1
        carried = np.where(carried_index >= 0, self.values[np.maximum(carried_index, 0)], 0)
        out = carried.copy()
        inside = (self.times >= start) & (self.times < end)
        if inside.any():
            which = np.searchsorted(edges, self.times[inside], side="right") - 1
            which = np.clip(which, 0, buckets - 1)  # (times are sorted: so is which)
            first = np.flatnonzero(np.concatenate(([True], which[1:] != which[:-1])))
            each = which[first]
            out[each] = np.maximum(out[each], np.maximum.reduceat(self.values[inside], first))
        return edges[:-1], out


@dataclass(frozen=True)
class TimeGrid:
    """The distinct request times. Every interval here starts at a request time and ends
    at one (or, for TTL occupancy, at t + W, which is placed on the first request time at
    or after it: the value at every request time stays exact, and only the peak and the
    bucket maxima are read from TTL occupancy, which only grows at request times). So a
    step function is a bincount on this grid: O(N), no sort of 2N events."""

    times: np.ndarray  # int64, strictly increasing
    of_request: np.ndarray  # grid index of each request

    @classmethod
    def of_requests(cls, req_t_us: np.ndarray) -> TimeGrid:
        new = np.ones(req_t_us.size, dtype=bool)
        new[1:] = req_t_us[1:] != req_t_us[:-1]  # requests are in time order
        index = np.cumsum(new, dtype=np.int64) - 1
        if req_t_us.size < 2**31 - 1:
            index = index.astype(np.int32)
        return cls(req_t_us[new], index)

    def function(self, deltas: np.ndarray) -> StepFunction:
        return StepFunction(self.times, np.cumsum(deltas[: self.times.size]))


_NO_WINDOW = np.iinfo(np.int64).max


@numba.njit(cache=True, nogil=True)
def _useful_deltas(of_request, req_t_us, ref_req, prev_req, window_us, size):  # pragma: no cover
    deltas = np.zeros(size + 1, dtype=np.int64)
    for i in range(prev_req.size):
        p = prev_req[i]  # the previous reference's request
        if p >= 0:
            r = ref_req[i]
            if req_t_us[r] - req_t_us[p] <= window_us:
                deltas[of_request[p]] += 1
                deltas[of_request[r]] -= 1
    return deltas


@numba.njit(cache=True, nogil=True)
def _ttl_deltas(of_request, ref_req, expiry, prev_req, size):  # pragma: no cover (compiled)
    # Each reference's block is held from its time to its expiry, unless the next
    # reference comes first: that next reference, seeing it as its prev, moves the end.
    deltas = np.zeros(size + 1, dtype=np.int64)
    for i in range(prev_req.size):
        r = ref_req[i]
        at = of_request[r]
        deltas[at] += 1
        deltas[expiry[r]] -= 1
        p = prev_req[i]  # the previous reference's request
        if p >= 0:
            end = expiry[p]
            if at < end:
                deltas[end] += 1
                deltas[at] -= 1
    return deltas


def useful_working_set(grid: TimeGrid, reuse: ReuseTimes, window_us: int | None) -> StepFunction:
    """Each reuse within the window keeps its block live from the previous reference
    (each reference's request placed on the grid by grid.of_request)."""
    window = _NO_WINDOW if window_us is None else window_us
    deltas = _useful_deltas(grid.of_request, reuse.req_t_us, reuse.ref_req, reuse.prev_req,
                            window, grid.times.size)  # fmt: skip
    return grid.function(deltas)


def ttl_occupancy(grid: TimeGrid, reuse: ReuseTimes, window_us: int) -> StepFunction:
    """A store-everything cache with lifetime W holds a block on [t, min(t + W, t_next))."""
    expiry = np.searchsorted(grid.times, reuse.req_t_us + window_us, side="left")
    return grid.function(_ttl_deltas(grid.of_request, reuse.ref_req, expiry, reuse.prev_req,
                                      grid.times.size))  # fmt: skip
