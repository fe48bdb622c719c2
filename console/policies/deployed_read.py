"""Read an uploaded deployment: find its format and turn it into records
(console.policies.deployed). Command lines first (a `vllm serve` line is also a YAML
string), then JSON (text opening with "{"), then YAML; a mapping is production-stack Helm
values when it has servingEngineSpec, an LMCache file when it has LMCache's keys, a vLLM
config file (`vllm serve --config`: the CLI's long options as keys) when it has vLLM's.
"""

from __future__ import annotations

import json

import yaml

from console.policies.deployed import (
    Deployed,
    DeployedError,
    Deployment,
    Tier,
    count,
    declarations,
    line_of,
    lmcache_tiers,
    number,
)
from console.policies.deployed_cli import options, read_commands, vllm_record

_LMCACHE_KEYS = {
    "local_cpu",
    "max_local_cpu_size",
    "local_disk",
    "max_local_disk_size",
    "remote_url",
    "chunk_size",
}
_VLLM_KEYS = {
    "model",
    "served-model-name",
    "tensor-parallel-size",
    "kv-offloading-size",
    "kv-cache-dtype",
    "kv-transfer-config",
}
_KNOWN = (
    "a vllm serve or SGLang launch_server command line, an lmcache server command, a vLLM "
    "config file, an LMCache YAML file or production-stack Helm values"
)


def read_deployment(file_name: str, text: str) -> Deployment:
    """The records of an uploaded file, with its salt and lifetime declarations; a
    DeployedError naming the file and line when it cannot be read."""
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise DeployedError(file_name, None, "the file is empty")
    commands = read_commands(text, file_name)
    if commands is not None:
        fmt, records = commands
    else:
        fmt, records = _read_mapping(file_name, text, _parse(file_name, text))
    return Deployment(file_name, fmt, declarations(text, records))


def _parse(file_name: str, text: str) -> object:
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise DeployedError(file_name, exc.lineno, f"not valid JSON: {exc.msg}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line = mark.line + 1 if mark is not None else None
        raise DeployedError(file_name, line, f"not valid YAML: {problem}") from None


def _read_mapping(file_name: str, text: str, config: object) -> tuple[str, list[Deployed]]:
    if not isinstance(config, dict):
        raise DeployedError(file_name, None, f"not a configuration kvscope reads ({_KNOWN})")
    keys = {str(k).replace("_", "-") for k in config}

    def at(key: str) -> int | None:
        return line_of(text, key) or line_of(text, key.replace("-", "_"))

    if "servingEngineSpec" in config:
        return "helm_values", _helm(file_name, text, config)
    if _LMCACHE_KEYS & set(map(str, config)):
        ram, disk, remote = lmcache_tiers(config, file_name, at)
        return "lmcache_yaml", [Deployed("lmcache_yaml", 1, ram=ram, disk=disk, remote=remote)]
    if _VLLM_KEYS & keys:
        opts = {str(k).lstrip("-").replace("_", "-"): v for k, v in config.items()}
        return "vllm_config", [vllm_record(opts, None, {}, file_name, 1, "vllm_config", at)]
    raise DeployedError(
        file_name,
        None,
        f"not a configuration kvscope reads ({_KNOWN}): none of the keys it knows is there",
    )


def _nth_line(text: str, key: str, n: int) -> int | None:
    """The line of a key's n-th occurrence (0 the first): where a modelSpec starts."""
    seen = -1
    for number_, line in enumerate(text.splitlines(), start=1):
        if line.lstrip(" -").startswith(f"{key}:"):
            seen += 1
            if seen == n:
                return number_
    return None


def _helm(file_name: str, text: str, values: dict) -> list[Deployed]:
    """One record per servingEngineSpec.modelSpec: vllmConfig (TP, extraArgs) read as
    vLLM's own options, lmcacheConfig as the LMCache variables it becomes (sizes GB per
    worker), LMCACHE_LOCAL_DISK / LMCACHE_REMOTE_URL in env, and a cacheserverSpec as
    every engine's remote store."""
    specs = (values.get("servingEngineSpec") or {}).get("modelSpec")
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise DeployedError(
            file_name,
            line_of(text, "modelSpec"),
            "servingEngineSpec.modelSpec is not a list of model specs",
        )
    records = []
    for i, spec in enumerate(specs):
        line = _nth_line(text, "modelURL", i) or _nth_line(text, "name", i) or 1
        where = (file_name, text, line)
        records.append(_helm_spec(where, spec, cache_server="cacheserverSpec" in values))
    return records


def _helm_spec(where: tuple[str, str, int], spec: dict, *, cache_server: bool) -> Deployed:
    """One modelSpec; `where` is the file's name, its text and the line the spec starts."""
    file_name, text, line = where
    vllm = spec.get("vllmConfig") or {}
    extra = vllm.get("extraArgs") or []
    args = [str(a) for a in extra] if isinstance(extra, list) else str(extra).split()
    _, opts = options(args)
    model = str(spec["modelURL"]) if spec.get("modelURL") else None
    record = vllm_record(opts, model, {}, file_name, line, "helm_values")
    at = line_of(text, "tensorParallelSize", after=line - 1)
    record.tp = count(vllm.get("tensorParallelSize", 1), file_name, at, "tensorParallelSize")
    env = {str(e.get("name")): e.get("value") for e in spec.get("env") or [] if isinstance(e, dict)}
    lmcache = spec.get("lmcacheConfig") or {}
    if lmcache.get("enabled"):
        record.ram, record.disk, record.remote = _helm_lmcache(where, lmcache, env)
    if cache_server or env.get("LMCACHE_REMOTE_URL"):
        setting = "cacheserverSpec" if cache_server else "LMCACHE_REMOTE_URL"
        record.remote = Tier(enabled=True, setting=setting)
    return record


def _helm_lmcache(where: tuple[str, str, int], lmcache: dict, env: dict) -> list[Tier]:
    file_name, text, line = where

    def size(key: str) -> float:
        at = line_of(text, key, after=line - 1)
        return number(lmcache.get(key) or 0, file_name, at, f"lmcacheConfig.{key}")

    ram_gib, disk_gib = size("cpuOffloadingBufferSize"), size("diskOffloadingBufferSize")
    ram = Tier(
        enabled=ram_gib > 0, size_gib=ram_gib, basis="per_rank", setting="cpuOffloadingBufferSize"
    )
    disk = Tier(
        enabled=disk_gib > 0 or bool(env.get("LMCACHE_LOCAL_DISK")),
        size_gib=disk_gib,
        basis="per_rank",
        setting="diskOffloadingBufferSize",
    )
    return [ram, disk, Tier()]
