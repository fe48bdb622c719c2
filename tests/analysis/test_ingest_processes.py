"""Ingest in worker processes (analysis.ingest.processes): a big plain log in parts, any
other input whole, read by spawned workers while the caller goes on; the stream is the
single pass's, errors are ingest()'s, and the parts' folder goes."""

from __future__ import annotations

import contextlib
import gzip
import itertools
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import orjson
import pytest

from analysis import AnalysisParams, IngestOptions, UnusableInput, analyze, ingest
from analysis.errors import WorkerStopped
from analysis.ingest import processes
from analysis.ingest.processes import ingest_in_processes
from analysis.ingest.split import part_ranges, parts_to_read
from bench.generate import chat_requests
from tests.analysis.test_parallel_ingest import ARRAYS, _chat_log
from tests.golden.cases import shared_trace

KEY = b"test-secret-0123456789"
ROOT = Path(__file__).resolve().parents[2]
TRACE = str(shared_trace())  # the shared Mooncake trace (str(None) would fail every test)


def _read(paths, options, ranges):
    with ingest_in_processes(paths, options, ranges) as pending:
        return pending.result()


def _same_stream(a, b) -> None:
    for name in ARRAYS:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.tenants, a.users, a.routes) == (b.tenants, b.users, b.routes)
    assert (a.errors, a.skipped_lines, a.notes) == (b.errors, b.skipped_lines, b.notes)


def test_a_log_over_the_split_size_is_read_in_parts_by_the_workers(tmp_path):
    log = _chat_log(tmp_path / "chat.jsonl")
    options = IngestOptions(hash_key=KEY)
    size = log.stat().st_size
    assert part_ranges([log], options, 2, split_bytes=size + 1) == [None]  # under: whole
    assert part_ranges([log], options, 1, split_bytes=1) == [None]  # one process: whole
    assert len(part_ranges([log], options, 64, split_bytes=size)) == 2  # none under size/2
    ranges = part_ranges([log], options, 3, split_bytes=size // 2)
    assert len(ranges) == 3 and ranges[0].start == 0 and ranges[-1].end == size
    assert all(a.end == b.start for a, b in itertools.pairwise(ranges))
    whole = ingest([log], options)
    merged = _read([log], options, ranges)
    _same_stream(whole, merged)
    assert whole.skipped_lines == 1  # the bad line in the first part, named as one pass does
    # a count of parts: planned while the workers start, as part_ranges plans them
    assert parts_to_read([log], options, 3, split_bytes=size // 2) == 3
    _same_stream(whole, _read([log], options, 3))
    params = AnalysisParams(scope="user", windows_s=(60, 900))
    a, b = analyze(whole, params).to_dict(), analyze(merged, params).to_dict()
    a.pop("ingest_stats"), b.pop("ingest_stats")  # each part tokenized its own texts
    assert a == b


def test_a_trace_gzip_or_several_logs_are_read_whole_by_one_worker(tmp_path):
    options = IngestOptions(hash_key=KEY)
    packed = tmp_path / "chat.jsonl.gz"
    rows = list(chat_requests(40, seed=5, documents=3, doc_words=(40, 80)))
    packed.write_bytes(gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in rows)))
    for paths in ([TRACE], [packed], [TRACE, TRACE]):
        # a trace (read by Arrow's columns, on every core), a gzip or two logs: whole
        assert part_ranges(paths, options, 2, split_bytes=1) == [None]
        assert parts_to_read(paths, options, 2, split_bytes=1) == 1
        ranges = part_ranges(paths, options, 2, split_bytes=1 << 40)
        assert ranges == [None]
        _same_stream(ingest(paths, options), _read(paths, options, ranges))
    report = analyze(_read([TRACE], options, [None]), AnalysisParams())
    assert report.requests == 3993


def test_unusable_input_raises_as_ingest_does_and_the_parts_folder_goes(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"[1, 2]\nnot json\n")
    options = IngestOptions(hash_key=KEY)
    with pytest.raises(UnusableInput) as alone:
        ingest([junk], options)
    for ranges in ([None], part_ranges([junk], options, 2, split_bytes=1), 2):
        with pytest.raises(UnusableInput) as in_workers:
            _read([junk], options, ranges)
        assert str(in_workers.value) == str(alone.value)
        assert in_workers.value.errors == alone.value.errors
        assert in_workers.value.skipped_lines == 2
    assert list((tmp_path / "tmp").iterdir()) == []  # every part folder removed


def test_the_warm_up_loads_the_first_kernel_in_a_fresh_process():
    code = (
        "import sys\n"
        "from analysis.metrics.warm import warm_kernels\n"
        "assert 'numba' not in sys.modules\n"
        "warm_kernels()\n"
        "from analysis.reuse import _factorize\n"
        "print(len(_factorize.signatures))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


def test_an_analysis_reports_every_step_of_its_progress():
    stream = ingest([TRACE], IngestOptions(hash_key=KEY))
    seen = []
    analyze(stream, AnalysisParams(windows_s=(60, 600, 3600, 86400)), progress=seen.append)
    assert [p.done for p in seen] == list(range(1, 4 + 3 + 1))
    assert {p.total for p in seen} == {4 + 3} and {p.stage for p in seen} == {"analyzing"}


def test_a_worker_killed_while_the_parts_are_planned_is_a_worker_stopped(tmp_path, monkeypatch):
    """The workers start before the parts are planned: one killed meanwhile is said as
    any stopped worker is (WorkerStopped, which the command words), not a traceback."""
    log = _chat_log(tmp_path / "chat.jsonl")
    planned = processes.plan_parts
    earlier = set(multiprocessing.active_children())  # (an earlier test's, ending)

    def plan_then_kill(path, count):
        ranges = planned(path, count)
        started = [c for c in multiprocessing.active_children() if c not in earlier]
        assert started  # (the workers were started first)
        for child in started:
            with contextlib.suppress(ProcessLookupError):  # (the pool, broken, ended it)
                os.kill(child.pid, signal.SIGKILL)
            child.join(10)
        return ranges

    monkeypatch.setattr(processes, "plan_parts", plan_then_kill)
    with pytest.raises(WorkerStopped, match="stopped before its part was read"):
        _read([log], IngestOptions(hash_key=KEY), 2)
