"""The evidence pack's ZIP layout: files stored (not compressed) in a fixed order, every
header field fixed or derived from the file itself, so the same files and time always
give the same bytes.

That is what lets `manage.py verify_pack` check every byte of a pack: after checking the
files against the manifest it writes the archive again from them and compares. A
compressed member could not be checked so (zlib builds compress differently, and a
deflate stream's last byte has padding bits nobody reads), nor could an archive written
by a library whose header fields may change between versions.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

_LOCAL = struct.Struct("<IHHHHHIIIHH")  # local file header (APPNOTE 4.3.7)
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")  # central directory header (4.3.12)
_END = struct.Struct("<IHHHHIIH")  # end of central directory record (4.3.16)
_VERSION = 20  # 2.0: stored files, no ZIP64
_MADE_BY = (3 << 8) | _VERSION  # Unix, so the permissions below are read
_UTF8_NAMES = 0x800  # general purpose bit 11: names are UTF-8
_STORED = 0
_FILE_MODE = 0o100644 << 16  # a regular file, rw-r--r--
_LIMIT = 0xFFFFFFFF  # past this a ZIP needs ZIP64, which a pack never does


def dos_stamp(date_time: Sequence[int]) -> tuple[int, int]:
    """(time, date) as ZIP headers hold them, from (year, month, day, hour, minute,
    second) — a datetime's timetuple()[:6] (UTC: ZIP times have no zone) or zipfile's
    ZipInfo.date_time, which it reverses exactly."""
    year, month, day, hour, minute, second = date_time
    return (hour << 11) | (minute << 5) | (second // 2), ((year - 1980) << 9) | (month << 5) | day


def zip_bytes(files: Sequence[tuple[str, bytes]], stamp: tuple[int, int]) -> bytes:
    """The archive of `files` (name, content) in that order, each dated `stamp` (a
    dos_time pair)."""
    time, date = stamp
    out, central = bytearray(), bytearray()
    for name, data in files:
        encoded = name.encode()
        if len(data) > _LIMIT or len(out) > _LIMIT:
            raise ValueError(f"{name}: an evidence pack holds files under 4 GiB")
        crc = zlib.crc32(data)
        fields = (_UTF8_NAMES, _STORED, time, date, crc, len(data), len(data), len(encoded))
        central += _CENTRAL.pack(0x02014B50, _MADE_BY, _VERSION, *fields, 0, 0, 0, 0,
                                 _FILE_MODE, len(out))  # fmt: skip
        central += encoded
        out += _LOCAL.pack(0x04034B50, _VERSION, *fields, 0) + encoded + data
    count = len(files)
    end = _END.pack(0x06054B50, 0, 0, count, count, len(central), len(out), 0)
    return bytes(out + central + end)


def first_difference(left: bytes, right: bytes) -> int:
    """The offset of the first byte where the two differ (the shorter one's length when
    one is the other's start)."""
    step = 1 << 16
    for start in range(0, min(len(left), len(right)), step):
        a, b = left[start : start + step], right[start : start + step]
        if a != b:
            same = min(len(a), len(b))
            return start + next(
                (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), same
            )
    return min(len(left), len(right))


def region_of(files: Sequence[tuple[str, bytes]], offset: int) -> str:
    """What zip_bytes(files) holds at `offset`, in words: a file's header or content, the
    directory entry of a file, the end record, or past the end."""
    at = 0
    for name, data in files:
        header = _LOCAL.size + len(name.encode())
        if offset < at + header:
            return f"the header of {name}"
        if offset < at + header + len(data):
            return f"the content of {name}"
        at += header + len(data)
    for name, _ in files:
        at += _CENTRAL.size + len(name.encode())
        if offset < at:
            return f"the directory entry of {name}"
    return "the end record" if offset < at + _END.size else "past the archive's end"
