"""Deployments given as command lines: `vllm serve`, SGLang's launch_server and LMCache's
`lmcache server` (flag names and units: shared/docs/engines.md sections 2, 3, 5 and 9).

A file may hold several commands (one per route or replica, as kvscope's vLLM export
does); each is a record. Lines ending in a backslash continue; comment lines and `export
NAME=value` lines (kept as the environment of the commands after them) are not commands.
"""

from __future__ import annotations

import json
import re
import shlex

from console.policies.deployed import (
    Deployed,
    DeployedError,
    Tier,
    count,
    lmcache_tiers,
    number,
)

GIB = 1 << 30
# options that take several values (vLLM: a model may be served under several names)
_MANY = {"served-model-name"}
_SGLANG_MODULES = ("sglang.launch_server",)
_LMCACHE_SERVER_MODULES = ("lmcache.v1.multiprocess.server",)
# the lines worth splitting as commands (a YAML line is not shell: its quotes need not pair)
_HINT = re.compile(
    r"\bvllm\s+serve\b|vllm\.entrypoints|sglang\.launch_server|\blmcache\s+server\b"
    r"|lmcache\.v1\.multiprocess|^--|^export\s"
)


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each line once backslash continuations are joined,
    comment and blank lines left out."""
    out, start, parts = [], 0, []
    for number_, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not parts and (not line or line.startswith("#")):
            continue
        if not parts:
            start = number_
        parts.append(line[:-1] if line.endswith("\\") else line)
        if not line.endswith("\\"):
            out.append((start, " ".join(parts)))
            parts = []
    if parts:
        out.append((start, " ".join(parts)))
    return out


def split(line: str, file_name: str, number_: int) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise DeployedError(file_name, number_, f"cannot split the command line: {exc}") from None


def command_kind(tokens: list[str]) -> tuple[str, int] | None:
    """Which engine a command starts (and where its arguments begin), after any NAME=value
    assignments; None for a line that starts none."""
    i = 0
    while i < len(tokens) and "=" in tokens[i] and not tokens[i].startswith("-"):
        i += 1
    rest = tokens[i:]
    if rest[:2] == ["vllm", "serve"]:
        return "vllm_cli", i + 2
    if rest[:1] == ["lmcache"] and rest[1:2] == ["server"]:
        return "lmcache_server", i + 2
    if len(rest) >= 3 and rest[0].split("/")[-1].startswith("python") and rest[1] == "-m":
        if rest[2] in _SGLANG_MODULES:
            return "sglang_cli", i + 3
        if rest[2] in _LMCACHE_SERVER_MODULES:
            return "lmcache_server", i + 3
        if rest[2] == "vllm.entrypoints.openai.api_server":
            return "vllm_cli", i + 3
    if rest[:1] and rest[0].startswith("--") and "--model-path" in rest:
        return "sglang_cli", i  # SGLang's arguments on their own
    return None


def environment(tokens: list[str]) -> dict[str, str]:
    """The NAME=value assignments before a command (or on an `export` line)."""
    env = {}
    for token in tokens[1:] if tokens[:1] == ["export"] else tokens:
        if "=" not in token or token.startswith("-"):
            break
        name, _, value = token.partition("=")
        env[name] = value
    return env


def options(args: list[str]) -> tuple[list[str], dict[str, object]]:
    """Positional arguments, and options by their name without dashes, underscores read
    as dashes (vLLM and SGLang accept both); a flag without a value is True."""
    positional, opts, i = [], {}, 0
    while i < len(args):
        token = args[i]
        if not token.startswith("-") or token == "-":
            positional.append(token)
            i += 1
            continue
        name, eq, value = token.lstrip("-").partition("=")
        name = name.replace("_", "-")
        i += 1
        if eq:
            opts[name] = value
            continue
        values = []
        while i < len(args) and not args[i].startswith("-"):
            values.append(args[i])
            i += 1
            if name not in _MANY:
                break
        opts[name] = (values if name in _MANY else values[0]) if values else True
    return positional, opts


def _json_option(value: object, file_name: str, line: int, flag: str) -> dict:
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(str(value))
    except json.JSONDecodeError as exc:
        raise DeployedError(file_name, line, f"{flag} is not JSON: {exc.msg}") from None
    if not isinstance(parsed, dict):
        raise DeployedError(file_name, line, f"{flag} is not a JSON object")
    return parsed


def _names(opts: dict, model: str | None) -> list[str]:
    served = opts.get("served-model-name")
    if isinstance(served, str):
        served = [served]
    return [str(n) for n in served] if served else ([model] if model else [])


def _connector_tiers(transfer: dict, env: dict, file_name: str, line: int) -> list[Tier]:
    """RAM, disk and remote tiers a vLLM KV connector sets (when no size flag does)."""
    connector = str(transfer.get("kv_connector") or "")
    extra = transfer.get("kv_connector_extra_config") or {}
    if connector in ("OffloadingConnector", "SimpleCPUOffloadConnector"):
        ram = Tier(enabled=True, basis="total", setting="cpu_bytes_to_use")
        if "cpu_bytes_to_use" in extra:
            nbytes = number(extra["cpu_bytes_to_use"], file_name, line, "cpu_bytes_to_use")
            ram.size_gib = nbytes / GIB
        tiers = extra.get("secondary_tiers") or []
        kinds = {str(t.get("type")) for t in tiers if isinstance(t, dict)}
        return [
            ram,
            Tier(enabled="fs" in kinds, setting="secondary_tiers"),
            Tier(enabled="obj" in kinds, setting="secondary_tiers"),
        ]
    if connector == "LMCacheConnectorV1":
        lmcache_env = {k[8:].lower(): v for k, v in env.items() if k.startswith("LMCACHE_")}
        config_file = lmcache_env.pop("config_file", "")
        if config_file or not lmcache_env:
            where = f"in {config_file}" if config_file else "in LMCache's own configuration"
            return [Tier(enabled=None, elsewhere=where) for _ in range(3)]
        return list(lmcache_tiers(lmcache_env, file_name, lambda key: line))
    if connector:  # LMCacheMPConnector, DynamoConnector, …: the store is configured apart
        where = f"in the store {connector} connects to"
        return [Tier(enabled=None, elsewhere=where) for _ in range(3)]
    return [Tier(), Tier(), Tier()]


def vllm_record(
    opts: dict,
    model: str | None,
    env: dict,
    file_name: str,
    line: int,
    fmt: str = "vllm_cli",
    line_for=None,
) -> Deployed:
    """A vLLM engine from its options (a command line's or a config file's keys; for a
    file, line_for(key) is where a key is, for the errors)."""
    at = line_for or (lambda key: line)
    model = model or (str(opts["model"]) if opts.get("model") else None)
    record = Deployed(format=fmt, line=line, model=model, names=_names(opts, model))
    tp = opts.get("tensor-parallel-size", opts.get("tp", 1))
    record.tp = count(tp, file_name, at("tensor-parallel-size"), "--tensor-parallel-size")
    record.kv_dtype = str(opts.get("kv-cache-dtype") or "auto")
    transfer = opts.get("kv-transfer-config")
    where = at("kv-transfer-config")
    tiers = _connector_tiers(
        _json_option(transfer, file_name, where, "--kv-transfer-config") if transfer else {},
        env,
        file_name,
        where,
    )
    record.ram, record.disk, record.remote = tiers
    if opts.get("kv-offloading-size") not in (None, True):
        size = number(
            opts["kv-offloading-size"], file_name, at("kv-offloading-size"), "--kv-offloading-size"
        )
        record.ram = Tier(
            enabled=size > 0, size_gib=size, basis="total", setting="--kv-offloading-size"
        )
    return record


def sglang_record(opts: dict, file_name: str, line: int) -> Deployed:
    """An SGLang server: HiCache is its host-RAM tier (--hicache-size GB per rank; 0 or
    absent: --hicache-ratio times the GPU pool, a size the file cannot give), and
    --hicache-storage-backend its storage tier (`file` a local disk; the others remote)."""
    model = str(opts.get("model-path") or opts.get("model") or "") or None
    record = Deployed(format="sglang_cli", line=line, model=model, names=_names(opts, model))
    tp = opts.get("tp-size", opts.get("tp", opts.get("tensor-parallel-size", 1)))
    record.tp = count(tp, file_name, line, "--tp-size")
    record.kv_dtype = str(opts.get("kv-cache-dtype") or "auto")
    if opts.get("enable-hierarchical-cache"):
        record.ram = Tier(enabled=True, basis="per_rank", setting="--hicache-size")
        size = number(opts.get("hicache-size", 0), file_name, line, "--hicache-size")
        record.ram.size_gib = size or None
        if not size:
            record.ram.elsewhere = "--hicache-ratio times the GPU pool (not a size in the file)"
    elif opts.get("enable-lmcache"):
        record.ram = Tier(enabled=None, elsewhere="in the LMCache server it connects to")
    backend = str(opts.get("hicache-storage-backend") or "")
    record.disk = Tier(enabled=backend == "file", setting="--hicache-storage-backend")
    record.remote = Tier(
        enabled=bool(backend) and backend != "file", setting="--hicache-storage-backend"
    )
    return record


def lmcache_server_record(opts: dict, file_name: str, line: int) -> Deployed:
    """An LMCache MP server: --l1-size-gb is one store the engines connecting to it share;
    each --l2-adapter (JSON with a "type") a disk (fs) or remote tier behind it."""
    record = Deployed(format="lmcache_server", line=line)
    size = number(opts.get("l1-size-gb", 0), file_name, line, "--l1-size-gb")
    record.ram = Tier(enabled=size > 0, size_gib=size, basis="server", setting="--l1-size-gb")
    adapter = opts.get("l2-adapter")
    l2 = _json_option(adapter, file_name, line, "--l2-adapter") if adapter else {}
    kind = str(l2.get("type") or "")
    record.disk = Tier(enabled=kind == "fs", setting="--l2-adapter")
    record.remote = Tier(enabled=bool(kind) and kind != "fs", setting="--l2-adapter")
    return record


def read_commands(text: str, file_name: str) -> tuple[str, list[Deployed]] | None:
    """The engines a file's command lines start (None: it has no command kvscope knows).
    A file mixing engines is refused: one check compares one kind of deployment."""
    records, kinds, env = [], set(), {}
    for line, joined in logical_lines(text):
        if not _HINT.search(joined):
            continue
        tokens = split(joined, file_name, line)
        found = command_kind(tokens)
        if found is None:
            env |= environment(tokens) if tokens[:1] == ["export"] else {}
            continue
        kind, at = found
        kinds.add(kind)
        positional, opts = options(tokens[at:])
        here = env | environment(tokens)
        if kind == "vllm_cli":
            model = positional[0] if positional else None
            records.append(vllm_record(opts, model, here, file_name, line))
        elif kind == "sglang_cli":
            records.append(sglang_record(opts, file_name, line))
        else:
            records.append(lmcache_server_record(opts, file_name, line))
    if not records:
        return None
    if len(kinds) > 1:
        raise DeployedError(
            file_name,
            None,
            "it starts more than one kind of engine; check each kind's commands on their own",
        )
    return kinds.pop(), records
