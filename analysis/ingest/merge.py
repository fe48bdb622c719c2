"""Merging the block streams of consecutive parts of one log (a split ingest) into the
stream one pass would have made: codes and segments remapped by value, requests put in
time order, the notes and the block-size advice worded again for the whole log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from analysis.errors import TooManyBadLines, UnusableInput, over_budget
from analysis.ingest.notes import (
    BLANK_NOTE,
    FIT_NOTE,
    OUT_OF_ORDER,
    SPAN_NOTE,
    blank_lines_note,
    made_at_another_size,
    out_of_order_note,
    span_note,
    with_advice,
)
from analysis.ingest.order import reorder_occurrences, reorder_refs, reorder_requests, time_order
from analysis.ingest.tables import Codes
from analysis.readers import TraceFit
from analysis.stream import BlockStream, StreamHeader, ref_start


def merge_streams(parts: Sequence[BlockStream]) -> BlockStream:
    """One block stream from the streams of consecutive parts of one log (parallel ingest),
    exactly as if the log had been read in one pass: codes and segment indices are remapped
    by value, requests are put in time order (ties: file order)."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    if any(p.block_tokens != first.block_tokens or p.source_format != first.source_format
           for p in parts):  # fmt: skip
        raise ValueError("parts differ in block size or format")
    codes = Codes(), Codes(), Codes()  # tenants, users, routes
    requests = _merged_requests(parts, codes)
    start = ref_start(requests.pop("blocks"))
    segments, mappings = _merged_segments(parts)
    occurrences = _merged_occurrences(parts, mappings)
    refs = {"key": np.concatenate([p.ref_key for p in parts]),
            "tokens": np.concatenate([p.ref_tokens for p in parts])}  # fmt: skip
    order = time_order(requests["t_us"])
    if order is not None:
        requests = reorder_requests(requests, order)
        start, refs = reorder_refs(start, order, refs)
        occurrences = reorder_occurrences(occurrences, order)
    occurrences["req"] = occurrences["req"].astype(np.int32)
    # a trace's block-size advice: worded once, from every part's lines
    fit = TraceFit.combine(TraceFit.from_dict(p.trace_fit) for p in parts)
    header = StreamHeader(
        source_format=first.source_format,
        block_tokens=first.block_tokens,
        tenants=codes[0].values,
        users=codes[1].values,
        routes=codes[2].values,
        files=first.files,
        errors=[e for p in parts for e in p.errors],
        skipped_lines=sum(p.skipped_lines for p in parts),
        notes=_merged_notes(parts, requests, fit),
        stats={k: sum(p.stats.get(k, 0) for p in parts) for k in first.stats},
        trace_fit=fit.to_dict() if fit is not None else None,
        log_format=first.log_format,
        tools_position=first.tools_position,
        tokenizer=first.tokenizer,
    )
    return BlockStream.from_columns(
        header, {**requests, "ref_start": start}, refs, segments, occurrences
    )


def _merged_requests(
    parts: Sequence[BlockStream], codes: tuple[Codes, Codes, Codes]
) -> dict[str, np.ndarray]:
    """The parts' request tables one after another, tenants, users and routes recoded."""
    tables = [p.request_columns() for p in parts]
    for part, table in zip(parts, tables, strict=True):
        for name, values, coded in zip(("tenant", "user", "route"),
                                       (part.tenants, part.users, part.routes), codes,
                                       strict=True):  # fmt: skip
            column = table[name]
            recode = coded.codes(values)
            table[name] = recode[column] if column.size else column.astype(np.int32)
    return {name: np.concatenate([t[name] for t in tables]) for name in tables[0]}


def _merged_segments(parts: Sequence[BlockStream]) -> tuple[dict[str, Any], list[np.ndarray]]:
    """The segment table of all the parts, and each part's rows in it. A segment is
    numbered by its first appearance (the parts are in file order: as one pass numbers
    it), is a document when any part typed it as one (ROLE_DOCUMENT_PART < OTHER), and is
    named by the first label found. In arrays: a log's segments are hundreds of thousands."""
    ids = np.concatenate([p.seg_id for p in parts])
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    kept = np.sort(first)  # each segment's first appearance, in order of appearance
    rank = np.empty(ids.size, dtype=np.int64)
    rank[kept] = np.arange(kept.size)
    row = rank[first[inverse.ravel()]]  # each part's row -> its merged row
    all_roles = np.concatenate([p.seg_role_class for p in parts]).astype(np.int8)
    roles = all_roles[kept]
    np.minimum.at(roles, row, all_roles)
    all_labels = [label for p in parts for label in p.seg_label]
    labels = [all_labels[i] for i in kept.tolist()]
    rows = row.tolist() if any(all_labels) else []
    for i in (i for i, label in enumerate(all_labels) if label):
        labels[rows[i]] = labels[rows[i]] or all_labels[i]
    segments: dict[str, Any] = {
        "id": ids[kept],
        "role_class": roles,
        "tokens": np.concatenate([p.seg_tokens for p in parts]).astype(np.int32)[kept],
        "label": labels,
    }
    if parts[0].seg_preview is not None:
        previews = [x for p in parts for x in (p.seg_preview or [""] * p.seg_id.size)]
        segments["preview"] = [previews[i] for i in kept.tolist()]
    bounds = np.cumsum([p.seg_id.size for p in parts])[:-1]
    return segments, [m.astype(np.int32) for m in np.split(row, bounds)]


def _merged_occurrences(
    parts: Sequence[BlockStream], mappings: list[np.ndarray]
) -> dict[str, np.ndarray]:
    req, seg, offset = [], [], []
    first_request = 0
    for part, mapping in zip(parts, mappings, strict=True):
        req.append(part.occ_req.astype(np.int64) + first_request)
        seg.append(mapping[part.occ_seg] if part.occ_seg.size else part.occ_seg)
        offset.append(part.occ_offset)
        first_request += part.requests
    return {"req": np.concatenate(req), "seg": np.concatenate(seg).astype(np.int32),
            "offset": np.concatenate(offset)}  # fmt: skip


def _merged_notes(
    parts: Sequence[BlockStream], requests: dict[str, np.ndarray], fit: TraceFit | None
) -> list[str]:
    """The parts' notes, those about the whole log worded again for it: requests out of
    order are counted against the file's own order, as one pass counts them; blank lines
    and the span are the whole log's too."""
    notes = list(dict.fromkeys(n for p in parts for n in p.notes))
    blank = sum(int(m[1].replace(",", "")) for p in parts for n in p.notes
                if (m := BLANK_NOTE.match(n)))  # fmt: skip
    notes = [n for n in notes if OUT_OF_ORDER not in n and not BLANK_NOTE.match(n)
             and not n.startswith((SPAN_NOTE, FIT_NOTE))]  # fmt: skip
    if blank:
        notes.append(blank_lines_note(blank))
    t, lines = requests["t_us"], requests["line"]
    if span := span_note(t, lines, requests["file"], parts[0].files):
        notes.append(span)
    in_file = t[np.argsort(lines, kind="stable")]
    file_order = np.argsort(in_file, kind="stable")
    moved = int(np.count_nonzero(file_order != np.arange(file_order.size)))
    if moved:
        notes.append(out_of_order_note(moved))
    if fit is not None and (advice := fit.advice()):
        notes.append(advice)
    return notes


def merge_parts(
    streams: list[BlockStream], unusable: list[UnusableInput], max_bad_lines: int | None = None
) -> BlockStream:
    """merge_streams, plus the parts that had no usable line: their bad lines are listed
    too, in file order. Raises UnusableInput when no part had a usable line, and
    TooManyBadLines when a part, or all of them together, went past the error budget.

    A trace read at another block size than its own is advised once for the whole log:
    the sizes every part fits, the contradicting lines of all parts (each part's own
    advice counts its lines only, and a part whose lines all fit may still veto a size).
    When that advice names a size, the log is unusable at this one, as on one pass (the
    parts never stop for it themselves: their requests count when no size mends all)."""
    fit = TraceFit.combine([*(TraceFit.from_dict(s.trace_fit) for s in streams),
                            *(x.fit for x in unusable)])  # fmt: skip
    for exc in unusable:
        if isinstance(exc, TooManyBadLines):
            raise _advised(exc, fit, TooManyBadLines)
    if not streams:
        errors = [e for exc in unusable for e in exc.errors]
        skipped = sum(x.skipped_lines for x in unusable)
        raise _advised(UnusableInput(unusable[0].reason, errors, skipped), fit, UnusableInput)
    merged = merge_streams(streams)
    advice = fit.advice() if fit is not None else ""
    if unusable:  # their lines count too: the advice is worded again with them
        merged.notes = [n for n in merged.notes if not n.startswith(FIT_NOTE)]
        merged.notes += [advice] if advice else []
        merged.trace_fit = fit.to_dict() if fit is not None else None
        merged.errors = sorted([*merged.errors, *(e for x in unusable for e in x.errors)],
                               key=lambda e: e["line"])  # fmt: skip
        merged.skipped_lines += sum(x.skipped_lines for x in unusable)
    if max_bad_lines is not None and merged.skipped_lines > max_bad_lines:
        last = merged.errors[-1] if merged.errors else {"line": "?", "reason": "?"}
        raise over_budget(merged.skipped_lines, max_bad_lines, f"line {last['line']}",
                          last["reason"], merged.errors, fit, merged.requests)  # fmt: skip
    if fit is not None and advice:  # every contradicting line of every part fits one size
        raise made_at_another_size(merged.files, merged.block_tokens, merged.requests,
                                   merged.errors, merged.skipped_lines, fit)  # fmt: skip
    return merged


def _advised(exc: UnusableInput, fit: TraceFit | None, kind: type[UnusableInput]) -> UnusableInput:
    """`exc` (a part's, or all parts' together) with the whole log's advice in place of
    the part's own."""
    return kind(with_advice(exc.reason, fit), exc.errors, exc.skipped_lines, fit=fit,
                requests=exc.requests)  # fmt: skip
