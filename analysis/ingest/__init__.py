"""Ingest: log files -> BlockStream. Reading, tokenizing (once per distinct text) and
hashing, streamed line by line, in one pass or in parts merged; progress by callback."""

from typing import TYPE_CHECKING

from analysis.lazy import lazy_exports

if TYPE_CHECKING:
    from analysis.ingest.chain import PrefixChain as PrefixChain
    from analysis.ingest.merge import (
        merge_parts as merge_parts,
        merge_streams as merge_streams,
    )
    from analysis.ingest.options import (
        DEFAULT_BLOCK_TOKENS as DEFAULT_BLOCK_TOKENS,
        FORMATS as FORMATS,
        IngestOptions as IngestOptions,
    )
    from analysis.ingest.parallel import (
        ingest_in_parts as ingest_in_parts,
        ingest_part as ingest_part,
        ingest_part_to_folder as ingest_part_to_folder,
        merge_part_results as merge_part_results,
        merged_by_size as merged_by_size,
    )
    from analysis.ingest.part_files import (
        PART_NOTE as PART_NOTE,
        PartResult as PartResult,
        load_part as load_part,
    )
    from analysis.ingest.run import (
        ingest as ingest,
        ingest_streams as ingest_streams,
        ingest_to_folders as ingest_to_folders,
    )
    from analysis.ingest.split import (
        plan_parts as plan_parts,
        splittable as splittable,
    )
    from analysis.progress import (
        Progress as Progress,
        ProgressFn as ProgressFn,
    )

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "analysis.ingest.chain": ("PrefixChain",),
        "analysis.ingest.merge": (
            "merge_parts",
            "merge_streams",
        ),
        "analysis.ingest.options": (
            "DEFAULT_BLOCK_TOKENS",
            "FORMATS",
            "IngestOptions",
        ),
        "analysis.ingest.part_files": ("PART_NOTE", "PartResult", "load_part"),
        "analysis.ingest.parallel": (
            "ingest_in_parts",
            "ingest_part",
            "ingest_part_to_folder",
            "merge_part_results",
            "merged_by_size",
        ),
        "analysis.ingest.split": ("plan_parts", "splittable"),
        "analysis.ingest.run": (
            "ingest",
            "ingest_streams",
            "ingest_to_folders",
        ),
        "analysis.progress": (
            "Progress",
            "ProgressFn",
        ),
    },
)
