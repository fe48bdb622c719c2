"""manage.py analyze: the command and JSON of report-contract.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from analysis import AnalysisParams, IngestOptions, analyze, ingest, preset
from analysis.ingest import processes, split
from analysis.ingest.options import SPLIT_BYTES
from analysis.params import FleetParams
from bench.end_to_end import chat_log as bench_chat_log
from tests.analysis.factories import as_gateway_csv
from tests.golden.cases import shared_trace

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_KEYS = {
    "requests",
    "prompt_tokens",
    "block_refs",
    "distinct_blocks",
    "block_tokens",
    "kv_bytes_per_token",
    "slot_bytes",
    "span_s",
    "infinite_hit_ratio",
    "windows",
    "mrc",
    "mrc_exact",
    "mrc_sampling_rate",
    "recommendation",
    "errors",
    "skipped_lines",
    "warmup_requests",
    "session_share",
    "tools",
    "cache_control_requests",
    "at_budget",
    "knee",
}
WINDOW_KEYS = {
    "window_s",
    "hit_ratio",
    "useful_ws_peak_bytes",
    "useful_ws_p95_bytes",
    "useful_ws_median_bytes",
    "ttl_occupancy_peak_bytes",
    "segments",
    "same_session_hit_ratio",
    "cross_session_hit_ratio",
}


def _run(*args) -> None:
    call_command("analyze", *[str(a) for a in args])


def test_report_has_the_contract_keys_and_matches_the_engine(chat_log, tmp_path, settings):
    # a bad line in the middle: skipped, listed with its line number, the rest kept
    lines = chat_log.read_bytes().splitlines(keepends=True)
    lines.insert(10, b'{"timestamp": "2026-11-02T08:00:00Z", "messages": [\n')
    log = tmp_path / "with-bad-line.jsonl"
    log.write_bytes(b"".join(lines))
    out = tmp_path / "report.json"
    _run(log, "--json", out, "--scope", "tenant", "--tp", "2", "--window", "60", "--window", "600")
    report = json.loads(out.read_text())

    assert report.keys() >= CONTRACT_KEYS
    assert [w["window_s"] for w in report["windows"]] == [60.0, 600.0]
    for window in report["windows"]:
        assert window.keys() >= WINDOW_KEYS
    assert report["requests"] == 120
    assert report["skipped_lines"] == 1
    assert report["errors"][0]["line"] == 11
    assert "JSON" in report["errors"][0]["reason"]
    # the report is the engine's, computed independently here with the same parameters
    stream = ingest([chat_log], IngestOptions(hash_key=settings.KVSCOPE_HASH_KEY))
    direct = analyze(
        stream,
        AnalysisParams(windows_s=(60, 600), scope="tenant", tp=2, profile=preset("llama-3.1-8b")),
    ).to_dict()
    for key in ("prompt_tokens", "block_refs", "distinct_blocks", "infinite_hit_ratio"):
        assert report[key] == direct[key]
    assert report["recommendation"] == direct["recommendation"]
    assert report["recommendation"]["per_rank_bytes"] * 2 >= report["recommendation"]["ram_bytes"]
    # defaults of the contract: 256-token blocks, Llama-3.1-8B at BF16 (32*8*128*2*2 bytes)
    assert report["block_tokens"] == 256
    assert report["kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2
    assert report["slot_bytes"] == 256 * report["kv_bytes_per_token"]


def test_mrc_is_ascending_with_64_points_and_includes_the_recommendation(chat_log, tmp_path):
    out = tmp_path / "report.json"
    _run(chat_log, "--json", out)
    report = json.loads(out.read_text())
    capacities = [p["capacity_bytes"] for p in report["mrc"]]
    assert len(capacities) >= 64
    assert capacities == sorted(capacities) and len(set(capacities)) == len(capacities)
    assert report["recommendation"]["capacity_bytes"] in capacities
    ratios = [p["hit_ratio"] for p in report["mrc"]]
    assert ratios == sorted(ratios)
    assert ratios[-1] == pytest.approx(report["infinite_hit_ratio"])
    assert report["mrc_exact"] is True and report["mrc_sampling_rate"] == 1.0


def test_pre_hashed_trace_defaults_to_512_token_blocks(tmp_path):
    trace = tmp_path / "trace.jsonl"
    rows = [
        {"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]},
        {"timestamp": 1000, "input_length": 600, "output_length": 5, "hash_ids": [1, 9]},
    ]
    trace.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    out = tmp_path / "r.json"
    _run(trace, "--json", out, "--model", "qwen2.5-7b", "--kv-dtype", "fp8")
    report = json.loads(out.read_text())
    assert report["block_tokens"] == 512
    # only block 1 of the second request comes back: 512 of 1100 + 600 tokens
    assert report["infinite_hit_ratio"] == pytest.approx(512 / 1700)
    assert report["kv_bytes_per_token"] == 28 * 4 * 128 * 2 * 1
    assert all("segments" not in w for w in report["windows"])


def test_a_bailian_trace_has_16_token_blocks_and_seconds(tmp_path):
    trace = tmp_path / "bailian.jsonl"
    rows = [
        {"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40,
         "output_length": 5, "type": "text", "turn": 1, "hash_ids": [1, 2, 3]},
        {"chat_id": 2, "parent_chat_id": 1, "timestamp": 2.0, "input_length": 50,
         "output_length": 5, "type": "text", "turn": 2, "hash_ids": [1, 2, 4, 5]},
    ]  # fmt: skip
    trace.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    out = tmp_path / "r.json"
    _run(trace, "--json", out, "--format", "bailian")
    report = json.loads(out.read_text())
    assert report["block_tokens"] == 16
    assert (report["log_format"], report["source_format"]) == ("bailian", "mooncake")
    # the second request's blocks 1 and 2 come back: 16 + 16 of 40 + 50 tokens
    assert report["infinite_hit_ratio"] == pytest.approx(32 / 90)
    assert report["span_s"] == pytest.approx(1.5)  # seconds apart, not milliseconds
    assert all("segments" not in w for w in report["windows"])


def test_unusable_input_fails_with_a_one_line_reason(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(CommandError, match=r"no usable request in empty\.jsonl"):
        _run(empty, "--json", tmp_path / "r.json")
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"[1, 2]\nnot json\n")
    with pytest.raises(CommandError, match=r"line 1: a JSON list, not an object"):
        _run(junk, "--json", tmp_path / "r.json")
    # the details of every skipped line are still written
    details = json.loads((tmp_path / "r.json").read_text())
    assert details["requests"] == 0 and details["skipped_lines"] == 2
    assert [e["line"] for e in details["errors"]] == [1, 2]


def test_unknown_model_config_field_is_reported(tmp_path, chat_log):
    config = tmp_path / "config.json"
    config.write_text('{"num_attention_heads": 8}')
    with pytest.raises(CommandError, match="missing num_hidden_layers"):
        _run(chat_log, "--json", tmp_path / "r.json", "--model-config", config)


def test_warmup_leaves_the_leading_requests_out_of_every_ratio(chat_log, tmp_path):
    whole, warm = tmp_path / "whole.json", tmp_path / "warm.json"
    _run(chat_log, "--json", whole)
    _run(chat_log, "--json", warm, "--warmup", "0.5")
    a, b = json.loads(whole.read_text()), json.loads(warm.read_text())
    assert (a["warmup_requests"], b["warmup_requests"]) == (0, a["requests"] // 2)
    assert b["params"]["warmup"] == 0.5 and b["prompt_tokens"] == a["prompt_tokens"]
    # the same references, fewer of them counted: the ratios move, the working sets do not
    assert b["infinite_hit_ratio"] != a["infinite_hit_ratio"]
    assert [w["useful_ws_peak_bytes"] for w in b["windows"]] == [
        w["useful_ws_peak_bytes"] for w in a["windows"]
    ]
    with pytest.raises(CommandError, match="warm-up"):
        _run(chat_log, "--json", tmp_path / "bad.json", "--warmup", "1")


def test_budgets_and_tools_position_from_the_command_line(chat_log, tmp_path):
    out = tmp_path / "r.json"
    _run(chat_log, "--json", out, "--budget-gib", "1", "--budget-gib", "4", "--headroom", "0",
         "--tools-position", "before_last_user")  # fmt: skip
    report = json.loads(out.read_text())
    # 1 GiB of 256-token blocks of Llama 3.1 8B (131,072 bytes a token): 32 blocks
    assert [(e["ram_bytes"], e["capacity_slots"]) for e in report["at_budget"]] == [
        (1 << 30, 32), (4 << 30, 128)]  # fmt: skip
    curve = {p["capacity_slots"]: p["hit_ratio"] for p in report["mrc"]}
    for entry in report["at_budget"]:
        if entry["capacity_slots"] in curve:  # (the curve's points are log-spaced)
            assert entry["hit_ratio"] == curve[entry["capacity_slots"]]
    assert report["tools"]["position"] == "before_last_user"
    with pytest.raises(CommandError, match="budgets must be positive"):
        _run(chat_log, "--json", tmp_path / "bad.json", "--budget-gib", "-1")


def test_a_gateway_csv_log_gives_the_report_of_the_same_requests_as_jsonl(chat_log, tmp_path):
    """The chat log's requests as a gateway CSV log (metrics.md section 7: read like
    JSONL): the same report, asked for with --format csv or detected."""
    log = as_gateway_csv(chat_log, tmp_path / "gateway.csv")
    reports = {}
    for name, args in (("jsonl", [chat_log]), ("csv", [log, "--format", "csv"]), ("auto", [log])):
        out = tmp_path / f"{name}.json"
        _run(*args, "--json", out)
        reports[name] = json.loads(out.read_text())
    assert reports["jsonl"]["requests"] == 120 and reports["jsonl"]["errors"] == []
    assert reports["csv"] == reports["jsonl"]
    assert reports["auto"] == reports["jsonl"]


FLEET_ROUTER_KEYS = {"router", "ceiling", "mrc", "recommendation", "load"}
FLEET_POINT_KEYS = {"capacity_bytes", "hit_ratio", "gpu_hit_ratio", "ram_hit_ratio"}


def test_fleet_options_add_the_contract_fleet_and_match_the_engine(chat_log, tmp_path, settings):
    plain = tmp_path / "plain.json"
    _run(chat_log, "--json", plain)
    # without a fleet option there is no fleet, only the admission comparison
    assert json.loads(plain.read_text())["fleet"] is None
    out = tmp_path / "fleet.json"
    _run(chat_log, "--json", out, "--replicas", "2", "--router", "round_robin",
         "--router", "prefix", "--gpu-cache-gib", "0.5", "--store-threshold", "2",
         "--prefix-threshold", "0.25", "--tp", "2")  # fmt: skip
    fleet = json.loads(out.read_text())["fleet"]
    assert (fleet["replicas"], fleet["store_threshold"], fleet["prefix_threshold"]) == (2, 2, 0.25)
    assert fleet["gpu_cache_bytes"] == 1 << 29
    assert [r["router"] for r in fleet["routers"]] == ["round_robin", "prefix"]
    for entry in fleet["routers"]:
        assert set(entry) >= FLEET_ROUTER_KEYS
        assert all(set(point) >= FLEET_POINT_KEYS for point in entry["mrc"])
        caps = [p["capacity_bytes"] for p in entry["mrc"]]
        assert caps == sorted(caps) and len(caps) >= 64
        rec = entry["recommendation"]
        assert rec["ram_bytes"] == 2 * rec["per_rank_bytes"]  # two TP ranks of a replica
        assert len(entry["load"]["per_replica"]) == 2
    # the engine, asked the same, gives the same fleet
    stream = ingest([chat_log], IngestOptions(hash_key=settings.KVSCOPE_HASH_KEY))
    engine = analyze(stream, AnalysisParams(tp=2, fleet=FleetParams(
        replicas=2, routers=("round_robin", "prefix"), gpu_cache_bytes=1 << 29,
        store_threshold=2, prefix_threshold=0.25)))  # fmt: skip
    assert json.loads(orjson.dumps(engine.fleet)) == fleet
    # the prefix threshold alone steers no fleet, so it makes none (report-contract.md)
    alone = tmp_path / "alone.json"
    _run(chat_log, "--json", alone, "--prefix-threshold", "0.25")
    assert json.loads(alone.read_text())["fleet"] is None
    # one replica alone: a fleet of one round-robin router
    one = tmp_path / "one.json"
    _run(chat_log, "--json", one, "--store-threshold", "2")
    assert [r["router"] for r in json.loads(one.read_text())["fleet"]["routers"]] == [
        "round_robin"]  # fmt: skip
    with pytest.raises(CommandError, match="replicas must be"):
        _run(chat_log, "--json", tmp_path / "bad.json", "--replicas", "0")


def test_the_knee_gain_from_the_command_line(chat_log, tmp_path):
    out = tmp_path / "knee.json"
    _run(chat_log, "--json", out, "--knee-gain", "0.05")
    report = json.loads(out.read_text())
    assert report["params"]["knee_gain"] == 0.05
    # the knee is one of the curve's points, at or below the ceiling
    point = next(
        p for p in report["mrc"] if p["capacity_slots"] == report["knee"]["capacity_slots"]
    )
    assert point["hit_ratio"] == report["knee"]["hit_ratio"] <= report["recommendation"]["ceiling"]
    with pytest.raises(CommandError, match="knee gain"):
        _run(chat_log, "--json", tmp_path / "bad.json", "--knee-gain", "2")


def _manage(*args, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python manage.py ARGS` in a fresh interpreter, as a user runs it."""
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )


def test_the_command_line_imports_only_what_the_command_needs():
    # --help: the settings and the options, not the app registry, Celery or the kernels
    result = _manage("-X", "importtime", "manage.py", "analyze", "--help")
    assert result.returncode == 0, result.stderr
    assert "--logged-ram-gib" in result.stdout
    lines = result.stderr.splitlines()
    imported = {line.rsplit("|", 1)[1].strip() for line in lines if "|" in line}
    assert "console.engine" in imported  # the scan really read the import list
    heavy = {"numba", "pyarrow", "celery", "console.models", "django.contrib.auth.models"}
    assert sorted(imported & heavy) == []


def test_a_log_read_in_one_pass_imports_no_worker_processes(tmp_path):
    # a small trace is read here, whole: the worker processes' machinery (20 ms of
    # multiprocessing) is imported only for a log split into parts
    trace = shared_trace()
    assert trace is not None
    out = tmp_path / "r.json"
    result = _manage("-X", "importtime", "manage.py", "analyze", str(trace), "--json", str(out))
    assert result.returncode == 0, result.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
                if "|" in line}  # fmt: skip
    assert "numba" in imported and "analysis.ingest.read" in imported  # it did the work
    assert sorted(imported & {"concurrent.futures.process", "analysis.ingest.processes"}) == []


def test_the_command_line_writes_the_report_call_command_does(tmp_path):
    trace = shared_trace()
    assert trace is not None
    result = _manage("manage.py", "analyze", str(trace), "--json", str(tmp_path / "cli.json"))
    assert result.returncode == 0, result.stderr
    assert "3993 requests" in result.stderr
    _run(trace, "--json", tmp_path / "in_process.json")
    cli = json.loads((tmp_path / "cli.json").read_text())
    assert cli == json.loads((tmp_path / "in_process.json").read_text())
    assert cli["requests"] == 3993 and cli["mrc"][-1]["hit_ratio"] > 0.5
    # to a pipe (block-buffered): the process ends without the interpreter's teardown
    # (manage.quick_exit), and every byte of the report is still there
    piped = _manage("manage.py", "analyze", str(trace), "--json", "-")
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout) == cli
    # a bad input: exit status 1 and the one-line reason, as Django words a CommandError
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    result = _manage("manage.py", "analyze", str(empty), "--json", str(tmp_path / "e.json"))
    assert result.returncode == 1
    assert "CommandError: no usable request in empty.jsonl" in result.stderr


def test_processes_one_reads_in_this_process_with_the_same_report(tmp_path):
    trace = shared_trace()
    assert trace is not None
    result = _manage(
        "manage.py", "analyze", str(trace), "--json", str(tmp_path / "one.json"), "--processes", "1"
    )
    assert result.returncode == 0, result.stderr
    _run(trace, "--json", tmp_path / "default.json")
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "default.json").read_bytes()
    with pytest.raises(CommandError, match="--processes must be at least 1"):
        _run(trace, "--json", tmp_path / "none.json", "--processes", "0")


def test_a_big_plain_log_is_read_in_parts_by_worker_processes(chat_log, tmp_path, monkeypatch):
    # the split size lowered to the log's own: two real worker processes read a part each
    monkeypatch.setattr(split, "SPLIT_BYTES", chat_log.stat().st_size)
    options = IngestOptions(hash_key=b"k" * 32)
    assert len(split.part_ranges([chat_log], options, 2)) == 2
    _run(chat_log, "--json", tmp_path / "parts.json", "--processes", "2")
    _run(chat_log, "--json", tmp_path / "one.json", "--processes", "1")
    parts, one = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("parts", "one"))
    # each part tokenizes its own distinct texts: only that count may differ
    assert parts.pop("ingest_stats") != one.pop("ingest_stats")
    assert parts == one
    assert parts["requests"] == 120


def test_a_run_in_worker_processes_ends_clean(tmp_path):
    """The command leaves without the interpreter's teardown (manage.quick_exit); what an
    exit does first is still done: the pool's processes reaped and its named semaphores
    removed (else the resource tracker warns of them as leaked), the report whole."""
    log = bench_chat_log(tmp_path, 12_000)
    assert log.stat().st_size >= SPLIT_BYTES  # (read in two parts)
    out = tmp_path / "r.json"
    result = _manage("manage.py", "analyze", str(log), "--json", str(out), "--processes", "2")
    assert result.returncode == 0, result.stderr
    assert "leaked" not in result.stderr and "Traceback" not in result.stderr
    assert json.loads(out.read_text())["requests"] == 12_000


def stop_worker(*args) -> None:
    """A worker process's part, stopping as a killed worker does (no result, no error)."""
    os._exit(9)


def test_a_worker_that_stops_is_a_one_line_error(chat_log, tmp_path, monkeypatch):
    # spawned workers import this module and run the function by name: it stops them
    monkeypatch.setattr(split, "SPLIT_BYTES", chat_log.stat().st_size)
    monkeypatch.setattr(processes, "_read_part", stop_worker)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with pytest.raises(CommandError, match=r"a worker process reading the log stopped .*"
                                           r"--processes 1 reads it in this process"):  # fmt: skip
        _run(chat_log, "--json", tmp_path / "r.json", "--processes", "2")
    assert not (tmp_path / "r.json").exists()
    assert list((tmp_path / "tmp").iterdir()) == []  # the parts' folder went too
