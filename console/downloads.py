"""The bodies of the files every wing offers for download. CSV: a header row, then the
rows, with text cells a spreadsheet would take for a formula (uploaded logs and file names
reach them) quoted. JSON: indented, every integer exact."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable

import orjson

# a spreadsheet runs a cell starting with one of these as a formula (CSV injection)
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A value as its cell: formula-like text prefixed with a single quote, None blank."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return "" if value is None else value


def csv_uncell(text: str) -> str:
    """A cell read back as it was before csv_cell quoted it (files kvscope reads again)."""
    return text[1:] if text.startswith("'") and text[1:].startswith(_FORMULA_STARTS) else text


def csv_text(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    """The whole file as a str."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(list(header))
    for row in rows:
        writer.writerow([csv_cell(v) for v in row])
    return out.getvalue()


def _no_infinities(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no infinity; orjson writes null for it too
    if isinstance(value, dict):
        return {k: _no_infinities(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_infinities(v) for v in value]
    return value


def json_file(data: object) -> bytes:
    """A stored report (or any stored JSON) as an indented JSON file. orjson is fast but
    stops at integers past 64 bits, which a report stored before the form had bounds may
    hold (10^30 reuses): those files are written by the standard library instead, every
    integer exact and non-finite floats as null, as orjson writes them."""
    try:
        return orjson.dumps(data, option=orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError:
        text = json.dumps(_no_infinities(data), indent=2, ensure_ascii=False, allow_nan=False)
        return text.encode()
