"""The golden cases: which log, which options, which file holds the report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
# a fixed key: block and segment keys in the report depend on it
HASH_KEY = "golden-reports-fixed-key"


def shared_trace() -> Path | None:
    """The shared Mooncake trace, beside the checkout or in /work/shared."""
    for root in (REPO.parent / "shared", REPO.parent.parent / "shared", Path("/work/shared")):
        path = root / "data" / "mooncake_synthetic_trace.jsonl"
        if path.is_file():
            return path
    return None


@dataclass(frozen=True)
class Case:
    name: str
    log: Path | None
    args: tuple[str, ...] = ()

    @property
    def golden(self) -> Path:
        return HERE / f"{self.name}.json"


CASES = (
    Case("sample-default", REPO / "sample" / "chat-sample.jsonl.gz"),
    Case(
        "sample-reanalysis",
        REPO / "sample" / "chat-sample.jsonl.gz",
        (
            "--scope", "tenant",
            "--lifetime", "1800",
            "--tp", "2",
            "--host-ram-gib", "64",
            "--reserve-os-gib", "4",
            "--reserve-serving-process-gib", "6",
        ),
    ),
    Case("mooncake-default", shared_trace()),
    # four replicas behind every router, each with a GPU prefix cache, on two TP ranks
    Case(
        "mooncake-fleet",
        shared_trace(),
        ("--replicas", "4", "--gpu-cache-gib", "8", "--tp", "2"),
    ),
)  # fmt: skip
