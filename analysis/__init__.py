"""kvscope's analysis engine: request logs -> block stream -> working-set report.

Pure Python + numpy/pyarrow/numba (+ tiktoken). Imports nothing from Django or Celery, so it is
usable on its own:

    from analysis import IngestOptions, AnalysisParams, ingest, analyze
    stream = ingest(["day.jsonl.gz"], IngestOptions(hash_key=b"a per-installation secret"))
    report = analyze(stream, AnalysisParams(scope="tenant"))
    print(report.recommendation.ram_bytes)
"""

from typing import TYPE_CHECKING

from analysis.lazy import lazy_exports

if TYPE_CHECKING:
    from analysis.errors import UnusableInput as UnusableInput
    from analysis.ingest import (
        IngestOptions as IngestOptions,
        Progress as Progress,
        ingest as ingest,
        ingest_streams as ingest_streams,
        ingest_to_folders as ingest_to_folders,
    )
    from analysis.metrics import analyze as analyze
    from analysis.params import (
        AnalysisParams as AnalysisParams,
        HostBudget as HostBudget,
    )
    from analysis.profiles import (
        PRESETS as PRESETS,
        KVProfile as KVProfile,
        preset as preset,
        profile_from_config as profile_from_config,
        profile_from_file as profile_from_file,
    )
    from analysis.report import Report as Report
    from analysis.stream import BlockStream as BlockStream

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "analysis.errors": ("UnusableInput",),
        "analysis.ingest": (
            "IngestOptions",
            "Progress",
            "ingest",
            "ingest_streams",
            "ingest_to_folders",
        ),
        "analysis.metrics": ("analyze",),
        "analysis.params": (
            "AnalysisParams",
            "HostBudget",
        ),
        "analysis.profiles": (
            "PRESETS",
            "KVProfile",
            "preset",
            "profile_from_config",
            "profile_from_file",
        ),
        "analysis.report": ("Report",),
        "analysis.stream": ("BlockStream",),
    },
    over_submodules=("ingest",),
)
