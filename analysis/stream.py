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

import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

# Segment role classes; the kind (instruction/document/conversation) is derived at analysis
# time because it depends on the doc_min_tokens parameter.
ROLE_INSTRUCTION = 0  # system / developer
ROLE_DOCUMENT_PART = 1  # text from a part explicitly typed as a document or file
ROLE_OTHER = 2

FORMAT_VERSION = 1
REFS_SCHEMA = pa.schema([("key", pa.uint64()), ("tokens", pa.int32())])
OCCURRENCES_SCHEMA = pa.schema([("req", pa.int32()), ("seg", pa.int32()), ("offset", pa.int64())])


@dataclass
class BlockStream:
    source_format: str  # "chat" | "mooncake"
    block_tokens: int
    # requests, in arrival order (ties: file order)
    req_t_us: np.ndarray  # int64
    req_tenant: np.ndarray  # int32 codes into tenants
    req_user: np.ndarray  # int32 codes into users
    req_route: np.ndarray  # int32 codes into routes
    req_prompt_tokens: np.ndarray  # int64, tails included
    req_output_tokens: np.ndarray  # int64, -1 unknown
    req_line: np.ndarray  # int64 line number in its file
    req_file: np.ndarray  # int16 index into files
    req_ref_start: np.ndarray  # int64, len n+1: refs of request i are [start[i], start[i+1])
    tenants: list[str]
    users: list[str]
    routes: list[str]
    files: list[str]
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
    # what the ingest saw
    errors: list[dict] = field(default_factory=list)
    skipped_lines: int = 0
    notes: list[str] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    # a pre-hashed trace read line by line: what its lines say about its block size
    # (analysis.readers.TraceFit.to_dict()), for the parts of a split ingest to merge
    trace_fit: dict | None = None

    @property
    def requests(self) -> int:
        return int(self.req_t_us.size)

    @property
    def block_refs(self) -> int:
        return int(self.ref_key.size)

    def ref_request(self) -> np.ndarray:
        """Request index of every block reference."""
        counts = np.diff(self.req_ref_start)
        dtype = np.int32 if self.requests < 2**31 - 1 else np.int64
        return np.repeat(np.arange(self.requests, dtype=dtype), counts)

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
        opts = {"compression": "zstd"}
        pq.write_table(
            pa.table(
                {
                    "t_us": self.req_t_us,
                    "tenant": self.req_tenant,
                    "user": self.req_user,
                    "route": self.req_route,
                    "prompt_tokens": self.req_prompt_tokens,
                    "output_tokens": self.req_output_tokens,
                    "line": self.req_line,
                    "file": self.req_file,
                    "blocks": np.diff(self.req_ref_start),
                }
            ),
            tmp / "requests.parquet",
            **opts,
        )
        if refs is None:
            refs = [pa.table({"key": self.ref_key, "tokens": self.ref_tokens})]
        _write_chunks(refs, tmp / "refs.parquet", REFS_SCHEMA)
        segments = {
            "id": self.seg_id,
            "role_class": self.seg_role_class,
            "tokens": self.seg_tokens,
            "label": pa.array(self.seg_label, type=pa.string()),
        }
        if self.seg_preview is not None:
            segments["preview"] = pa.array(self.seg_preview, type=pa.string())
        pq.write_table(pa.table(segments), tmp / "segments.parquet", **opts)
        if occurrences is None:
            occurrences = [
                pa.table({"req": self.occ_req, "seg": self.occ_seg, "offset": self.occ_offset})
            ]
        _write_chunks(occurrences, tmp / "occurrences.parquet", OCCURRENCES_SCHEMA)
        meta = {
            "format_version": FORMAT_VERSION,
            "source_format": self.source_format,
            "block_tokens": self.block_tokens,
            "tenants": self.tenants,
            "users": self.users,
            "routes": self.routes,
            "files": self.files,
            "errors": self.errors,
            "skipped_lines": self.skipped_lines,
            "notes": self.notes,
            "stats": self.stats,
            "trace_fit": self.trace_fit,
        }
        (tmp / "meta.json").write_bytes(orjson.dumps(meta))

    @classmethod
    def load(cls, folder: str | Path) -> BlockStream:
        folder = Path(folder)
        meta = stream_meta(folder)
        req = pq.read_table(folder / "requests.parquet")
        refs = pq.read_table(folder / "refs.parquet")
        seg = pq.read_table(folder / "segments.parquet")
        occ = pq.read_table(folder / "occurrences.parquet")

        def col(table: pa.Table, name: str, dtype: str) -> np.ndarray:
            return table.column(name).to_numpy().astype(dtype, copy=False)

        blocks = col(req, "blocks", "int64")
        start = np.zeros(blocks.size + 1, dtype=np.int64)
        np.cumsum(blocks, out=start[1:])
        return cls(
            source_format=meta["source_format"],
            block_tokens=meta["block_tokens"],
            req_t_us=col(req, "t_us", "int64"),
            req_tenant=col(req, "tenant", "int32"),
            req_user=col(req, "user", "int32"),
            req_route=col(req, "route", "int32"),
            req_prompt_tokens=col(req, "prompt_tokens", "int64"),
            req_output_tokens=col(req, "output_tokens", "int64"),
            req_line=col(req, "line", "int64"),
            req_file=col(req, "file", "int16"),
            req_ref_start=start,
            tenants=meta["tenants"],
            users=meta["users"],
            routes=meta["routes"],
            files=meta["files"],
            ref_key=col(refs, "key", "uint64"),
            ref_tokens=col(refs, "tokens", "int32"),
            seg_id=col(seg, "id", "uint64"),
            seg_role_class=col(seg, "role_class", "int8"),
            seg_tokens=col(seg, "tokens", "int32"),
            seg_label=seg.column("label").to_pylist(),
            seg_preview=seg.column("preview").to_pylist()
            if "preview" in seg.column_names
            else None,
            occ_req=col(occ, "req", "int32"),
            occ_seg=col(occ, "seg", "int32"),
            occ_offset=col(occ, "offset", "int64"),
            errors=meta["errors"],
            skipped_lines=meta["skipped_lines"],
            notes=meta["notes"],
            stats=meta["stats"],
            trace_fit=meta.get("trace_fit"),  # (streams stored before it have none)
        )


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
