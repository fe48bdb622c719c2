"""The segment view (metrics.md section 3): which material is hot, wherever it sits in a
prompt, and how much repeated content a prefix cache cannot reuse (misplaced reuse)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.reuse import dense_ids, previous_refs, reuse_times
from analysis.stream import ROLE_DOCUMENT_PART, ROLE_INSTRUCTION, ROLE_TOOLS, BlockStream

KINDS = ("instruction", "document", "conversation")
CLASSES = ("hot", "occasional", "one_off")


def segment_kinds(stream: BlockStream, doc_min_tokens: int) -> np.ndarray:
    """Kind index (into KINDS) of each segment in the table."""
    kinds = np.full(stream.seg_id.size, 2, dtype=np.int8)
    documents = (stream.seg_role_class == ROLE_DOCUMENT_PART) | (
        stream.seg_tokens >= doc_min_tokens
    )
    kinds[documents] = 1
    kinds[np.isin(stream.seg_role_class, (ROLE_INSTRUCTION, ROLE_TOOLS))] = 0
    return kinds


@dataclass(frozen=True)
class Occurrences:
    """Segment occurrences with their scoped identity and reuse times."""

    scoped: np.ndarray  # dense id of (segment, scope salt)
    distinct: int
    segment: np.ndarray  # index into the segment table
    req: np.ndarray
    reuse_us: np.ndarray  # -1 for the first occurrence in its scope
    start: np.ndarray  # token offset of the text in its prompt
    tokens: np.ndarray


def occurrences(stream: BlockStream, req_salts: np.ndarray) -> Occurrences:
    seg = stream.occ_seg.astype(np.int64)
    req = stream.occ_req.astype(np.int64)
    salts = req_salts[req]
    scoped, distinct = dense_ids(seg * (int(salts.max(initial=0)) + 1) + salts)
    prev = previous_refs(scoped, distinct)
    return Occurrences(
        scoped=scoped,
        distinct=distinct,
        segment=seg,
        req=req,
        reuse_us=reuse_times(stream.req_t_us[req], prev),
        start=stream.occ_offset,
        tokens=stream.seg_tokens[seg].astype(np.int64),
    )


def segment_classes(
    occ: Occurrences, kinds: np.ndarray, window_us: int, min_reuses: int
) -> dict[str, dict[str, dict[str, int]]]:
    """Per kind and class: distinct scoped segments, unique tokens, total tokens, and
    reused tokens (tokens of the occurrences that are reuses within the window)."""
    n = occ.distinct
    count = np.bincount(occ.scoped, minlength=n)
    reused = (occ.reuse_us >= 0) & (occ.reuse_us <= window_us)
    reuses = np.bincount(occ.scoped, weights=reused, minlength=n).astype(np.int64)
    # kind and token count of each scoped segment (the same for all its occurrences)
    seg_of = np.zeros(n, dtype=np.int64)
    seg_of[occ.scoped] = occ.segment
    kind = kinds[seg_of]
    tokens = np.zeros(n, dtype=np.int64)
    tokens[occ.scoped] = occ.tokens
    klass = np.where(count == 1, 2, np.where(reuses >= min_reuses, 0, 1))
    out: dict[str, dict[str, dict[str, int]]] = {}
    for k, kind_name in enumerate(KINDS):
        out[kind_name] = {}
        for c, class_name in enumerate(CLASSES):
            sel = (kind == k) & (klass == c)
            out[kind_name][class_name] = {
                "count": int(sel.sum()),
                "unique_tokens": int(tokens[sel].sum()),
                "total_tokens": int((tokens[sel] * count[sel]).sum()),
                "reused_tokens": int((tokens[sel] * reuses[sel]).sum()),
            }
    return out


def misplaced_tokens(occ: Occurrences, hit_prefix_tokens: np.ndarray, window_us: int) -> np.ndarray:
    """Per occurrence: tokens of a segment reused within the window that its request did
    not get from prefix hits (they lie past the request's hit prefix)."""
    reused = (occ.reuse_us >= 0) & (occ.reuse_us <= window_us)
    end = occ.start + occ.tokens
    covered_to = np.maximum(occ.start, hit_prefix_tokens[occ.req])
    return np.where(reused, np.maximum(end - covered_to, 0), 0)
