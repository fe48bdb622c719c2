"""Same-session and cross-session hits (metrics.md section 7): a hit is same-session when
the block's previous reference came from the same session (conversation history), else
cross-session (shared material: system prompts, tools, documents). A request without a
session id is a session of its own."""

from __future__ import annotations

import numba
import numpy as np

from analysis.reuse import dense_ids
from analysis.stream import BlockStream


def session_codes(stream: BlockStream) -> np.ndarray:
    """Per request, a code equal exactly when two requests share a session: the dense id
    of its keyed session id, or -(index + 1) for a request that names none."""
    keys = stream.req_session
    named = keys != 0
    codes = -np.arange(1, keys.size + 1, dtype=np.int64)
    if named.any():
        codes[named] = dense_ids(keys[named])[0]
    return codes


def same_session_refs(stream: BlockStream, ref_req: np.ndarray, prev_req: np.ndarray) -> np.ndarray:
    """Per block reference: its previous reference, of request `prev_req` (-1: none), is of
    the same session."""
    return _same_session(session_codes(stream), ref_req, prev_req)


@numba.njit(cache=True, nogil=True)
def _same_session(codes, ref_req, prev_req):  # pragma: no cover (compiled)
    # one pass instead of numpy's masks and gathers (four temporaries of every reference)
    same = np.empty(prev_req.size, dtype=np.bool_)
    for i in range(prev_req.size):
        p = prev_req[i]
        same[i] = p >= 0 and codes[ref_req[i]] == codes[p]
    return same
