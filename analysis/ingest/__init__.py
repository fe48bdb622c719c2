"""Ingest: log files -> BlockStream. Reading, tokenizing (once per distinct text) and
hashing, streamed line by line, in one pass or in parts merged; progress by callback."""

from analysis.ingest.chain import PrefixChain
from analysis.ingest.merge import merge_parts, merge_streams
from analysis.ingest.options import DEFAULT_BLOCK_TOKENS, FORMATS, IngestOptions
from analysis.ingest.parallel import (
    PART_NOTE,
    PartResult,
    ingest_in_parts,
    ingest_part,
    ingest_part_to_folder,
    load_part,
    merge_part_results,
    merged_by_size,
    plan_parts,
    splittable,
)
from analysis.ingest.run import ingest, ingest_streams, ingest_to_folders
from analysis.progress import Progress, ProgressFn

__all__ = [
    "DEFAULT_BLOCK_TOKENS",
    "FORMATS",
    "PART_NOTE",
    "IngestOptions",
    "PartResult",
    "PrefixChain",
    "Progress",
    "ProgressFn",
    "ingest",
    "ingest_in_parts",
    "ingest_part",
    "ingest_part_to_folder",
    "ingest_streams",
    "ingest_to_folders",
    "load_part",
    "merge_part_results",
    "merge_parts",
    "merge_streams",
    "merged_by_size",
    "plan_parts",
    "splittable",
]
