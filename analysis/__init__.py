"""kvscope's analysis engine: request logs -> block stream -> working-set report.

Pure Python + numpy/pyarrow/numba (+ tiktoken). Imports nothing from Django or Celery, so it is
usable on its own:

    from analysis import IngestOptions, AnalysisParams, ingest, analyze
    stream = ingest(["day.jsonl.gz"], IngestOptions(hash_key=b"a per-installation secret"))
    report = analyze(stream, AnalysisParams(scope="tenant"))
    print(report.recommendation.ram_bytes)
"""

from analysis.errors import UnusableInput
from analysis.ingest import IngestOptions, Progress, ingest, ingest_streams, ingest_to_folders
from analysis.metrics import analyze
from analysis.params import AnalysisParams, HostBudget
from analysis.profiles import PRESETS, KVProfile, preset, profile_from_config, profile_from_file
from analysis.report import Report
from analysis.stream import BlockStream

__all__ = [
    "PRESETS",
    "AnalysisParams",
    "BlockStream",
    "HostBudget",
    "IngestOptions",
    "KVProfile",
    "Progress",
    "Report",
    "UnusableInput",
    "analyze",
    "ingest",
    "ingest_streams",
    "ingest_to_folders",
    "preset",
    "profile_from_config",
    "profile_from_file",
]
