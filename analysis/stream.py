"""The block stream: everything kept from an ingest, and the only input of every metric.

Per request: time, tenant, user, model route, prompt and output token counts, and the
range of its block references. Per block reference: the global-scope prefix key and the
tokens it holds. For chat logs also the segment table (keyed id, role class, token count,
optional label / preview) and each request's segment occurrences with their token offset.
No token ids and no prompt text (unless previews were asked for).

Stored as Parquet files in one folder, written under a temporary name then renamed, so a
reader never sees half a stream.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

# Segment role classes; the kind (instruction/document/conversation) is derived at analysis
# time because it depends on the doc_min_tokens parameter.
ROLE_INSTRUCTION = 0  # system / developer
ROLE_DOCUMENT_PART = 1  # text from a part explicitly typed as a document or file
ROLE_OTHER = 2
ROLE_TOOLS = 3  # a request's tool definitions (metrics.md section 7): an instruction

FORMAT_VERSION = 1
REFS_SCHEMA = pa.schema([("key", pa.uint64()), ("tokens", pa.int32())])
OCCURRENCES_SCHEMA = pa.schema([("req", pa.int32()), ("seg", pa.int32()), ("offset", pa.int64())])
# each table's numeric columns as stored, and the dtype a stream holds them in
REQUEST_DTYPES = {"t_us": "int64", "tenant": "int32", "user": "int32", "route": "int32",
                  "prompt_tokens": "int64", "output_tokens": "int64", "line": "int64",
                  "file": "int16", "session": "uint64", "cache_control": "int8",
                  "reported_prompt_tokens": "int64", "cached_tokens": "int64",
                  "blocks": "int64"}  # fmt: skip
# request columns added after streams were first stored, and what a stream without them
# reads as: no session, no cache breakpoint, no usage reported
_LATER_REQUEST_COLUMNS = {"session": 0, "cache_control": 0, "reported_prompt_tokens": -1,
                          "cached_tokens": -1}  # fmt: skip
SEGMENT_DTYPES = {"id": "uint64", "role_class": "int8", "tokens": "int32"}
_SEGMENT_TEXTS = ("label", "preview")
_REFS_DTYPES = {"key": "uint64", "tokens": "int32"}
_OCCURRENCES_DTYPES = {"req": "int32", "seg": "int32", "offset": "int64"}
_PARQUET = {"compression": "zstd"}


@dataclass(kw_only=True)
class StreamHeader:
    """A stream's small table (meta.json): what is not a column."""

    source_format: str  # "chat" | "mooncake"
    block_tokens: int
    tenants: list[str]
    users: list[str]
    routes: list[str]
    files: list[str]
    # what the ingest saw
    errors: list[dict] = field(default_factory=list)
    skipped_lines: int = 0
    notes: list[str] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    # a pre-hashed trace read line by line: what its lines say about its block size
    # (analysis.readers.TraceFit.to_dict()), for the parts of a split ingest to merge
    trace_fit: dict | None = None
    # what the reader read: "chat", "csv", "mooncake" or "bailian" (source_format is the
    # stream's kind: "chat" for chat bodies however they came, "mooncake" for a trace)
    log_format: str = ""
    # chat logs: where tool definitions were placed, and the tokenizer that counted
    tools_position: str = ""
    tokenizer: str = ""


@dataclass(kw_only=True)
class BlockStream(StreamHeader):
    """The header's fields, then the columns."""

    # requests, in arrival order (ties: file order)
    req_t_us: np.ndarray  # int64
    req_tenant: np.ndarray  # int32 codes into tenants
    req_user: np.ndarray  # int32 codes into users
    req_route: np.ndarray  # int32 codes into routes
    req_prompt_tokens: np.ndarray  # int64, tails included
    req_output_tokens: np.ndarray  # int64, -1 unknown
    req_line: np.ndarray  # int64 line number in its file
    req_file: np.ndarray  # int16 index into files
    req_session: np.ndarray  # uint64 keyed hash of the session id, 0 when it has none
    req_cache_control: np.ndarray  # int8 1 when the body marks a cache breakpoint
    # what the engine's response reported (#18): its count of the prompt, and the tokens it
    # served from its prefix cache; int64, -1 unknown
    req_reported_prompt_tokens: np.ndarray
    req_cached_tokens: np.ndarray
    req_ref_start: np.ndarray  # int64, len n+1: refs of request i are [start[i], start[i+1])
    # block references, request by request, block by block
    ref_key: np.ndarray  # uint64
    ref_tokens: np.ndarray  # int32
    # segments (chat logs only; empty for traces)
    seg_id: np.ndarray  # uint64 keyed H(role, text)
    seg_role_class: np.ndarray  # int8
    seg_tokens: np.ndarray  # int32 len(enc(text))
    seg_label: list[str]
    seg_preview: list[str] | None  # only when previews were turned on
    occ_req: np.ndarray  # int32 request index, ascending
    occ_seg: np.ndarray  # int32 index into the segment table
    occ_offset: np.ndarray  # int64 token offset of the text inside the prompt

    @property
    def requests(self) -> int:
        return int(self.req_t_us.size)

    @property
    def block_refs(self) -> int:
        # from the request bounds, not the keys: analyze(consume=True) lets the keys go
        return int(self.req_ref_start[-1]) if self.req_ref_start.size else 0

    def let_keys_go(self) -> None:
        """Drop the block keys (the largest column: 8 bytes a reference) from this
        stream, for a caller that reads nothing of it but the analysis it is handing it to;
        it can no longer be saved."""
        self.ref_key = self.ref_key[:0].copy()
        # a loaded stream's keys may be Arrow's buffer: its pool keeps what is freed
        pa.default_memory_pool().release_unused()

    def ref_request(self) -> np.ndarray:
        """Request index of every block reference."""
        counts = np.diff(self.req_ref_start)
        dtype = np.int32 if self.requests < 2**31 - 1 else np.int64
        return np.repeat(np.arange(self.requests, dtype=dtype), counts)

    # --- the stream by its tables' column names (as stored) ----------------------------
    @classmethod
    def from_columns(
        cls,
        header: StreamHeader,
        requests: Mapping[str, np.ndarray],
        refs: Mapping[str, np.ndarray],
        segments: Mapping[str, Any],
        occurrences: Mapping[str, np.ndarray],
    ) -> BlockStream:
        """A stream from its tables, each keyed by its stored column names (REQUEST_DTYPES
        with "blocks" or "ref_start", REFS_SCHEMA, SEGMENT_DTYPES with "label" and
        optionally "preview", OCCURRENCES_SCHEMA): the one place columns become fields."""
        start = requests.get("ref_start")
        if start is None:
            start = ref_start(requests["blocks"])
        requests = _with_later_columns(requests, requests["t_us"].size)
        return cls(
            **_header_fields(header),
            req_t_us=requests["t_us"],
            req_tenant=requests["tenant"],
            req_user=requests["user"],
            req_route=requests["route"],
            req_prompt_tokens=requests["prompt_tokens"],
            req_output_tokens=requests["output_tokens"],
            req_line=requests["line"],
            req_file=requests["file"],
            req_session=requests["session"],
            req_cache_control=requests["cache_control"],
            req_reported_prompt_tokens=requests["reported_prompt_tokens"],
            req_cached_tokens=requests["cached_tokens"],
            req_ref_start=start,
            ref_key=refs["key"],
            ref_tokens=refs["tokens"],
            seg_id=segments["id"],
            seg_role_class=segments["role_class"],
            seg_tokens=segments["tokens"],
            seg_label=segments["label"],
            seg_preview=segments.get("preview"),
            occ_req=occurrences["req"],
            occ_seg=occurrences["seg"],
            occ_offset=occurrences["offset"],
        )

    def request_columns(self) -> dict[str, np.ndarray]:
        """The request table as stored: REQUEST_DTYPES' columns, then "blocks"."""
        return {
            "t_us": self.req_t_us,
            "tenant": self.req_tenant,
            "user": self.req_user,
            "route": self.req_route,
            "prompt_tokens": self.req_prompt_tokens,
            "output_tokens": self.req_output_tokens,
            "line": self.req_line,
            "file": self.req_file,
            "session": self.req_session,
            "cache_control": self.req_cache_control,
            "reported_prompt_tokens": self.req_reported_prompt_tokens,
            "cached_tokens": self.req_cached_tokens,
            "blocks": np.diff(self.req_ref_start),
        }

    def segment_columns(self) -> dict[str, Any]:
        """The segment table as stored ("preview" only when previews were kept)."""
        segments: dict[str, Any] = {
            "id": self.seg_id,
            "role_class": self.seg_role_class,
            "tokens": self.seg_tokens,
            "label": self.seg_label,
        }
        if self.seg_preview is not None:
            segments["preview"] = self.seg_preview
        return segments

    def occurrence_columns(self) -> dict[str, np.ndarray]:
        return {"req": self.occ_req, "seg": self.occ_seg, "offset": self.occ_offset}

    # --- storage ---------------------------------------------------------------------
    def save(
        self,
        folder: str | Path,
        refs: Iterable[pa.Table] | None = None,
        occurrences: Iterable[pa.Table] | None = None,
    ) -> Path:
        """Write the stream under `folder` (atomically). `refs` / `occurrences`, when
        given, stand for those columns in chunks (an ingest that spilled them to disk)."""
        folder = Path(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        try:
            self._write(tmp, refs, occurrences)
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return folder

    def _write(
        self,
        tmp: Path,
        refs: Iterable[pa.Table] | None,
        occurrences: Iterable[pa.Table] | None,
    ) -> None:
        pq.write_table(pa.table(self.request_columns()), tmp / "requests.parquet", **_PARQUET)
        if refs is None:
            if self.ref_key.size != self.block_refs:
                raise ValueError("this stream's keys were let go (analyze(consume=True))")
            refs = [pa.table({"key": self.ref_key, "tokens": self.ref_tokens})]
        _write_chunks(refs, tmp / "refs.parquet", REFS_SCHEMA)
        segments = self.segment_columns()
        for name in _SEGMENT_TEXTS:
            if name in segments:
                segments[name] = pa.array(segments[name], type=pa.string())
        pq.write_table(pa.table(segments), tmp / "segments.parquet", **_PARQUET)
        if occurrences is None:
            occurrences = [pa.table(self.occurrence_columns())]
        _write_chunks(occurrences, tmp / "occurrences.parquet", OCCURRENCES_SCHEMA)
        meta = {"format_version": FORMAT_VERSION, **_header_fields(self)}
        (tmp / "meta.json").write_bytes(orjson.dumps(meta))

    @classmethod
    def load(cls, folder: str | Path) -> BlockStream:
        folder = Path(folder)
        meta = stream_meta(folder)
        # (streams stored before these fields have none)
        for name, default in (("trace_fit", None), ("log_format", ""), ("tools_position", ""),
                              ("tokenizer", "")):  # fmt: skip
            meta.setdefault(name, default)
        header = StreamHeader(**{f.name: meta[f.name] for f in dataclasses.fields(StreamHeader)})
        seg = pq.read_table(folder / "segments.parquet")
        segments: dict[str, Any] = _columns(seg, SEGMENT_DTYPES)
        segments.update({n: seg.column(n).to_pylist() for n in _SEGMENT_TEXTS
                         if n in seg.column_names})  # fmt: skip
        stream = cls.from_columns(
            header,
            _request_columns(pq.read_table(folder / "requests.parquet")),
            _columns(pq.read_table(folder / "refs.parquet"), _REFS_DTYPES),
            segments,
            _columns(pq.read_table(folder / "occurrences.parquet"), _OCCURRENCES_DTYPES),
        )
        # Arrow's pool keeps what reading the files freed (the pages decoded on the way):
        # as much again as the columns themselves, held through the analysis unless handed
        # back (100 M references: 3.0 GB resident, 1.7 GB after)
        pa.default_memory_pool().release_unused()
        return stream


def ref_start(blocks: np.ndarray) -> np.ndarray:
    """Each request's first block reference (len n+1) from its count of blocks."""
    start = np.zeros(blocks.size + 1, dtype=np.int64)
    np.cumsum(blocks, out=start[1:])
    return start


def _header_fields(source: BlockStream | StreamHeader) -> dict[str, Any]:
    """StreamHeader's fields by name, in their order (as meta.json holds them), from a
    header or a stream (a stream's fields of the same names)."""
    return {f.name: getattr(source, f.name) for f in dataclasses.fields(StreamHeader)}


def _request_columns(table: pa.Table) -> dict[str, np.ndarray]:
    present = {n: d for n, d in REQUEST_DTYPES.items() if n in table.column_names}
    return _columns(table, present)


def _with_later_columns(requests: Mapping[str, np.ndarray], n: int) -> Mapping[str, np.ndarray]:
    """The request columns, with those added since a stream was stored at their defaults."""
    later = _LATER_REQUEST_COLUMNS.items()
    missing = {name: np.full(n, value, REQUEST_DTYPES[name])
               for name, value in later if name not in requests}  # fmt: skip
    return {**requests, **missing} if missing else requests


def _columns(table: pa.Table, dtypes: Mapping[str, str]) -> dict[str, np.ndarray]:
    return {
        name: table.column(name).to_numpy().astype(dtype, copy=False)
        for name, dtype in dtypes.items()
    }


def stream_meta(folder: str | Path) -> dict:
    """A stored stream's small table (tenants, users, routes, files, errors, notes...)
    without reading its columns."""
    folder = Path(folder)
    meta = orjson.loads((folder / "meta.json").read_bytes())
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{folder}: block stream format {meta.get('format_version')}")
    return meta


def _write_chunks(tables: Iterable[pa.Table], path: Path, schema: pa.Schema) -> None:
    """One Parquet file from tables written one after another (a row group or more each)."""
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for table in tables:
            writer.write_table(table.cast(schema))
