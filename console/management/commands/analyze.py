"""python manage.py analyze LOG [LOG ...] --json OUT.json [options]

The report of report-contract.md, from the command line. Bad lines are skipped and listed
in the report's `errors`; input with no usable line exits non-zero with a one-line reason.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from analysis import AnalysisParams, IngestOptions, UnusableInput
from analysis.errors import WorkerStopped
from analysis.ingest import DEFAULT_BLOCK_TOKENS, FORMATS
from analysis.ingest.options import SPLIT_BYTES
from analysis.params import DEFAULTS, HOST_RESERVES, ROUTERS, SCOPES, FleetParams
from analysis.profiles import DEFAULT_PROFILE, DTYPE_BYTES, PRESETS, ProfileError
from analysis.readers import TOOLS_POSITIONS
from analysis.tokens import EncodingUnavailable
from console.engine import analysis_params, ingest_options

if TYPE_CHECKING:
    from analysis.stream import BlockStream  # pyarrow: not for --help


def params_from_options(opts: dict[str, Any]) -> AnalysisParams:
    """The analysis parameters of the command's parsed options (not yet validated)."""
    return analysis_params(
        windows=opts["window"],
        model=opts["model"],
        model_config=opts["model_config"],
        kv_dtype=opts["kv_dtype"],
        scope=opts["scope"],
        lifetime=opts["lifetime"],
        warmup=opts["warmup"],
        target=opts["target"],
        headroom=opts["headroom"],
        tp=opts["tp"],
        min_reuses=opts["min_reuses"],
        doc_min_tokens=opts["doc_min_tokens"],
        host_ram_gib=opts["host_ram_gib"],
        budgets_gib=opts["budget_gib"],
        knee_gain=opts["knee_gain"],
        replicas=opts["replicas"],
        routers=opts["router"],
        prefix_threshold=opts["prefix_threshold"],
        gpu_cache_gib=opts["gpu_cache_gib"],
        store_threshold=opts["store_threshold"],
        logged_ram_gib=opts["logged_ram_gib"],
        **{f"reserve_{name}_gib": opts[f"reserve_{name}"] for name in HOST_RESERVES},
    )


# The command's options by group; add_arguments adds them (and --save-stream last) in the
# order --help lists them.


def add_input_arguments(parser: CommandParser) -> None:
    """What to read and where to write the report."""
    parser.add_argument("logs", nargs="+", metavar="LOG", help="log files (plain or .gz)")
    parser.add_argument(
        "--json",
        required=True,
        metavar="OUT.json",
        help="where to write the report ('-' for stdout)",
    )
    parser.add_argument("--format", choices=FORMATS, default="auto")
    parser.add_argument(
        "--block-tokens",
        type=int,
        default=None,
        metavar="B",
        help=f"tokens per block (default {DEFAULT_BLOCK_TOKENS['chat']} for chat bodies, "
        f"{DEFAULT_BLOCK_TOKENS['mooncake']} for Mooncake traces, "
        f"{DEFAULT_BLOCK_TOKENS['bailian']} for Bailian traces)",
    )
    parser.add_argument(
        "--tools-position",
        choices=TOOLS_POSITIONS,
        default=IngestOptions.tools_position,
        help="where tool definitions sit in the prompt (auto: by model route)",
    )


def add_analysis_arguments(parser: CommandParser) -> None:
    """The parameters of the analysis: windows, the model's KV profile, the recommendation."""
    parser.add_argument(
        "--window",
        type=float,
        action="append",
        metavar="SECONDS",
        help=f"reuse window, repeatable (default {' '.join(f'{w:g}' for w in DEFAULTS.windows_s)})",
    )
    model = parser.add_mutually_exclusive_group()
    model.add_argument(
        "--model",
        default=DEFAULT_PROFILE,
        choices=sorted(PRESETS),
        metavar="NAME",
        help=f"KV profile preset: {', '.join(PRESETS)}",
    )
    model.add_argument(
        "--model-config",
        metavar="config.json",
        help="a Hugging Face config.json instead of a preset",
    )
    parser.add_argument(
        "--kv-dtype",
        choices=sorted(DTYPE_BYTES),
        default=None,
        help="KV element type (default: the model's)",
    )
    parser.add_argument("--scope", choices=SCOPES, default=DEFAULTS.scope)
    parser.add_argument("--lifetime", type=float, default=None, metavar="SECONDS")
    parser.add_argument(
        "--warmup",
        type=float,
        default=DEFAULTS.warmup,
        metavar="F",
        help="leading share of requests that fills the caches but is left out of every "
        "hit ratio (0.5: kvcache-simulator's steady state)",
    )
    parser.add_argument("--target", type=float, default=DEFAULTS.target)
    parser.add_argument("--headroom", type=float, default=DEFAULTS.headroom)
    parser.add_argument("--tp", type=int, default=DEFAULTS.tp)
    parser.add_argument("--min-reuses", type=int, default=DEFAULTS.min_reuses)
    parser.add_argument("--doc-min-tokens", type=int, default=DEFAULTS.doc_min_tokens)


def add_reading_arguments(parser: CommandParser) -> None:
    """How lines are read: the tokenizer, a trace's last block, segment previews."""
    tokenizer = parser.add_mutually_exclusive_group()
    tokenizer.add_argument("--encoding", default=IngestOptions.encoding, help="tiktoken encoding")
    tokenizer.add_argument(
        "--tokenizer",
        default=None,
        metavar="tokenizer.json",
        help="the model's own Hugging Face tokenizer.json instead of a tiktoken encoding",
    )
    parser.add_argument(
        "--tiktoken-dir",
        default=None,
        help="folder with <encoding>.tiktoken files (no download)",
    )
    parser.add_argument(
        "--trace-tails",
        choices=("cached", "uncached"),
        default="cached",
        help="pre-hashed traces: a partial last block is cached (Mooncake's convention) "
        "or an uncached tail (vLLM's; use it for kvscope's own replay exports)",
    )
    parser.add_argument(
        "--previews",
        action="store_true",
        help="keep the first characters of each segment in the report",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        metavar="N",
        help="worker processes that read a plain log of "
        f"{SPLIT_BYTES >> 20} MiB or more, each a line-aligned part (default: the usable "
        "cores; 1 reads it here, in one pass)",
    )


def add_host_arguments(parser: CommandParser) -> None:
    """The host RAM to check the recommendation against, and what it keeps for other uses."""
    parser.add_argument(
        "--host-ram-gib",
        type=float,
        default=None,
        help="host RAM, to check the recommendation against",
    )
    parser.add_argument(
        "--budget-gib",
        type=float,
        action="append",
        default=None,
        metavar="X",
        help="what X GiB of host RAM per replica buys (repeatable; headroom set aside)",
    )
    parser.add_argument(
        "--knee-gain",
        type=float,
        default=DEFAULTS.knee_gain,
        metavar="F",
        help="past the knee, doubling the cache gains less than F of hit ratio "
        f"(default {DEFAULTS.knee_gain:g})",
    )
    for name in HOST_RESERVES:
        parser.add_argument(
            f"--reserve-{name.replace('_', '-')}-gib",
            type=float,
            default=0.0,
            dest=f"reserve_{name}",
            help=f"host RAM reserved for {name.replace('_', ' ')}",
        )


def add_fleet_arguments(parser: CommandParser) -> None:
    """The fleet (metrics.md section 8); giving any of these adds the report's `fleet`."""
    fleet = FleetParams()
    parser.add_argument(
        "--replicas",
        type=int,
        default=None,
        metavar="N",
        help=f"serving instances of the route (default {fleet.replicas})",
    )
    parser.add_argument(
        "--router",
        choices=ROUTERS,
        action="append",
        default=None,
        help="how requests reach replicas, repeatable (default: every router when N > 1)",
    )
    parser.add_argument(
        "--prefix-threshold",
        type=float,
        default=None,
        metavar="F",
        help="share of a prompt a prefix match must cover to steer the prefix router "
        f"(default {fleet.prefix_threshold:g})",
    )
    parser.add_argument(
        "--gpu-cache-gib",
        type=float,
        default=None,
        metavar="X",
        help="GPU prefix cache per replica, total across its TP ranks (default 0)",
    )
    parser.add_argument(
        "--store-threshold",
        type=int,
        default=None,
        metavar="K",
        help=f"a block enters host RAM at its K-th reference (default {fleet.store_threshold})",
    )
    parser.add_argument(
        "--logged-ram-gib",
        type=float,
        default=None,
        metavar="X",
        help="host RAM per replica the engine that wrote the log had: kvscope's prediction "
        "beside the cached tokens its responses report (report.logged_cache)",
    )


def read_logs(logs: list[str], processes: int | None, options: IngestOptions) -> BlockStream:
    """The logs' block stream: a big plain log read in parts by worker processes (one per
    usable core, or `processes`) while this one loads the analysis kernels (numba's start-up,
    ~0.4 s); anything else read here, whole, while a thread loads them (Arrow's reader and
    the file's reading release the GIL for part of it: ~5 % of a small trace's run)."""
    from analysis.cores import usable_cores
    from analysis.ingest.split import parts_to_read
    from analysis.metrics.warm import warm_kernels

    parts = parts_to_read(logs, options, processes or usable_cores())

    if parts == 1:
        from analysis import ingest  # the reading half: the workers import their own

        warming = threading.Thread(target=warm_kernels, daemon=True)
        warming.start()
        try:
            return ingest(logs, options)
        finally:
            warming.join()

    from analysis.ingest.processes import ingest_in_processes  # (worker processes' machinery)

    with ingest_in_processes(logs, options, parts) as pending:  # (planned as they start)
        warm_kernels()
        return pending.result()


class Command(BaseCommand):
    help = "Analyze request logs and write the working-set report as JSON."
    requires_system_checks: list = []  # pure computation: no need to check URLs or models

    def add_arguments(self, parser: CommandParser) -> None:
        add_input_arguments(parser)
        add_analysis_arguments(parser)
        add_reading_arguments(parser)
        add_host_arguments(parser)
        add_fleet_arguments(parser)
        parser.add_argument(
            "--save-stream",
            metavar="DIR",
            default=None,
            help="also keep the block stream (Parquet) in DIR",
        )

    def handle(self, *args, **opts) -> None:
        for path in opts["logs"]:
            if not Path(path).is_file():
                raise CommandError(f"{path}: no such file")
        if opts["processes"] is not None and opts["processes"] < 1:
            raise CommandError("--processes must be at least 1")
        try:
            params = params_from_options(opts)
            params.validate()
            stream = read_logs(
                opts["logs"],
                opts["processes"],
                ingest_options(
                    format=opts["format"],
                    block_tokens=opts["block_tokens"],
                    encoding=opts["encoding"],
                    previews=opts["previews"],
                    tiktoken_dir=opts["tiktoken_dir"],
                    tokenizer_file=opts["tokenizer"],
                    trace_partial_cached=opts["trace_tails"] == "cached",
                    tools_position=opts["tools_position"],
                ),
            )
            if opts["save_stream"]:
                stream.save(opts["save_stream"])
            # the engine's kernels (numba, pyarrow): imported once the reading is under way
            # (read_logs loads them meanwhile), not before the worker processes start
            from analysis import analyze

            report = analyze(stream, params, consume=True)  # (saved already, if asked)
        except UnusableInput as exc:
            # still write what was skipped and why: the one-line reason is only the first
            self._write(
                opts["json"],
                orjson.dumps(
                    {"requests": 0, "errors": exc.errors, "skipped_lines": exc.skipped_lines},
                    option=orjson.OPT_INDENT_2,
                ),
            )
            raise CommandError(str(exc)) from None
        except (ProfileError, EncodingUnavailable, ValueError) as exc:
            raise CommandError(str(exc)) from None
        except WorkerStopped as exc:
            raise CommandError(f"{exc}; --processes 1 reads it in this process") from None
        out = self._write(opts["json"], report.to_json())
        if out is not None:
            rec = report.recommendation
            self.stderr.write(
                f"{report.requests} requests, {report.skipped_lines} lines skipped; "
                f"infinite-cache hit ratio {report.infinite_hit_ratio:.1%}; "
                f"recommended RAM {rec.ram_bytes / (1 << 30):.2f} GiB "
                f"({rec.per_rank_bytes / (1 << 30):.2f} GiB per rank) -> {out}"
            )

    def _write(self, target: str, data: bytes) -> Path | None:
        """Write the JSON to a file (atomically: temporary name, then rename) or stdout."""
        if target == "-":
            sys.stdout.buffer.write(data + b"\n")
            return None
        out = Path(target)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_bytes(data)
        tmp.replace(out)
        return out
