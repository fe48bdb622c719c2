"""Columns kept on disk while an ingest runs, so that its memory follows the distinct
content (segments, prefixes) rather than the length of the log: per-reference and
per-occurrence values are appended to raw files in chunks and read back in chunks."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

SPILL_ROWS = 1 << 20  # values buffered in memory per column before they go to disk


class SpillColumns:
    """Named append-only columns of one dtype each, in a private temporary folder."""

    def __init__(self, parent: str | Path) -> None:
        Path(parent).mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix=".spill-", dir=parent))
        self._files: dict[str, BinaryIO] = {}
        self._dtypes: dict[str, np.dtype] = {}

    def append(self, name: str, values: np.ndarray) -> None:
        dtype = self._dtypes.setdefault(name, values.dtype)
        if values.dtype != dtype:
            raise TypeError(f"spill column {name} holds {dtype}, not {values.dtype}")
        handle = self._files.get(name)
        if handle is None:
            handle = self._files[name] = open(self.folder / name, "ab")  # noqa: SIM115
        handle.write(np.ascontiguousarray(values).tobytes())

    def __contains__(self, name: str) -> bool:
        return name in self._dtypes

    def chunks(self, name: str, rows: int | None = None) -> Iterator[np.ndarray]:
        """The column in order, `rows` values at a time (default SPILL_ROWS; read, not
        mapped: pages read once do not stay in this process)."""
        rows = rows or SPILL_ROWS
        if name not in self._dtypes:
            return
        self._files[name].flush()
        dtype = self._dtypes[name]
        with open(self.folder / name, "rb") as fh:
            while True:
                chunk = np.fromfile(fh, dtype=dtype, count=rows)
                if not chunk.size:
                    return
                yield chunk

    def load(self, name: str) -> np.ndarray | None:
        """The whole column in memory (None if nothing was spilled under that name)."""
        if name not in self._dtypes:
            return None
        self._files[name].flush()
        return np.fromfile(self.folder / name, dtype=self._dtypes[name])

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> SpillColumns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
