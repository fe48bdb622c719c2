"""How every CSV download is written: a header row, then the rows, with text cells a
spreadsheet would take for a formula (uploaded logs and file names reach them) quoted."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

# a spreadsheet runs a cell starting with one of these as a formula (CSV injection)
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A value as its cell: formula-like text prefixed with a single quote, None blank."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return "" if value is None else value


def csv_text(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    """The whole file as a str."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(list(header))
    for row in rows:
        writer.writerow([csv_cell(v) for v in row])
    return out.getvalue()
