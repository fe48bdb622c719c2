"""Units and number formats the console shows: one definition for pages, charts and CSVs."""

from __future__ import annotations

GIB = 1 << 30
