"""Serving-engine configuration from an approved policy version.

Key and flag names follow the projects' documentation (see shared/docs/engines.md):
- LMCache YAML (LMCACHE_CONFIG_FILE): chunk_size, local_cpu, max_local_cpu_size (GB, per
  tensor-parallel worker: each TP rank allocates its own), local_disk ("file:///path"),
  max_local_disk_size (GB), remote_url, cache_policy — LMCache
  docs/source/api_reference/configurations.rst.
- vLLM serve: --kv-offloading-size (GiB, the total across TP ranks) with
  --kv-offloading-backend native|lmcache — vllm/config/cache.py; the LMCache connector
  alternative --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'.
- production-stack Helm: servingEngineSpec.modelSpec[].lmcacheConfig.{enabled,
  cpuOffloadingBufferSize, diskOffloadingBufferSize} (GB, per worker) and
  vllmConfig.{enablePrefixCaching, tensorParallelSize} — helm/values.yaml and
  helm/templates/deployment-vllm-multi.yaml.
Every export carries the policy's digest in a comment, so a deployed file can be matched
to its sign-off.
"""

from __future__ import annotations

import json
import shlex

import yaml

_CACHE_POLICY = {"evict_lru": "LRU", "evict_lifetime_first": "LRU", "refuse_store": "LRU"}


def _header(meta: dict) -> list[str]:
    return [
        f"kvscope policy {meta['name']!r} version {meta['version']} (approved "
        f"{meta['approved_at']} by {meta['approved_by']})",
        f"policy sha256: {meta['digest']}",
        f"block lifetime {meta['lifetime_s']:g} s, sharing scope {meta['scope']}"
        + (
            " (send a per-tenant cache_salt with every request)"
            if meta["scope"] == "tenant"
            else " (send a per-user cache_salt with every request)"
            if meta["scope"] == "user"
            else ""
        ),
    ]


def _gb(value: float | None) -> float:
    return round(float(value or 0.0), 2)


def lmcache_config(body: dict, meta: dict, *, chunk_size: int, tp: int) -> dict:
    tiers = body["tiers"]
    ram, disk, remote = tiers["cpu_ram"], tiers["local_disk"], tiers["remote"]
    config: dict = {
        "chunk_size": chunk_size,
        "local_cpu": bool(ram["enabled"]),
        # per TP worker: LMCache allocates this on every rank
        "max_local_cpu_size": _gb(ram["size_gib"] / tp) if ram["enabled"] else 0.0,
        "local_disk": f"file://{disk['path']}" if disk["enabled"] else None,
        "max_local_disk_size": _gb(disk["size_gib"] / tp) if disk["enabled"] else 0.0,
        "remote_url": remote["url"] if remote["enabled"] else None,
        "cache_policy": _CACHE_POLICY.get(body["failure"]["ram_full"], "LRU"),
        "save_unfull_chunk": False,  # tails are never cached, as in the analysis
    }
    return config


def lmcache_yaml(body: dict, meta: dict, *, chunk_size: int, tp: int) -> str:
    comments = "".join(f"# {line}\n" for line in _header(meta))
    comments += f"# sizes are per tensor-parallel worker ({tp} ranks)\n"
    return comments + yaml.safe_dump(
        lmcache_config(body, meta, chunk_size=chunk_size, tp=tp), sort_keys=False
    )


def vllm_flags(body: dict, meta: dict, *, model: str, tp: int) -> str:
    """A `vllm serve` command line for native CPU offload, and the LMCache alternative."""
    ram = body["tiers"]["cpu_ram"]
    size = _gb(ram["size_gib"]) if ram["enabled"] else 0.0
    native = ["vllm", "serve", model, "--tensor-parallel-size", str(tp)]
    if size:
        # total across TP ranks (vLLM divides it)
        native += ["--kv-offloading-size", f"{size:g}", "--kv-offloading-backend", "native"]
    if body["scope"] != "global":
        # a cryptographic prefix hash: non-cryptographic ones are a cross-tenant leak risk
        native += ["--prefix-caching-hash-algo", "sha256"]
    connector = json.dumps({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"})
    lmcache = [
        "LMCACHE_CONFIG_FILE=lmcache.yaml",
        "vllm",
        "serve",
        model,
        "--tensor-parallel-size",
        str(tp),
        "--kv-transfer-config",
        connector,
    ]
    lines = [f"# {line}" for line in _header(meta)]
    lines += ["# native CPU KV offload (--kv-offloading-size is GiB, total over TP ranks):"]
    lines += [shlex.join(native)]
    lines += ["# or the LMCache connector, with the LMCache YAML export as lmcache.yaml:"]
    lines += [" ".join(lmcache[:1]) + " " + shlex.join(lmcache[1:])]
    return "\n".join(lines) + "\n"


def helm_values(body: dict, meta: dict, *, model: str, tp: int) -> str:
    tiers = body["tiers"]
    ram, disk = tiers["cpu_ram"], tiers["local_disk"]
    lmcache: dict = {
        "enabled": bool(ram["enabled"]),
        "cpuOffloadingBufferSize": f"{_gb(ram['size_gib'] / tp) if ram['enabled'] else 0:g}",
    }
    if disk["enabled"]:
        lmcache["diskOffloadingBufferSize"] = f"{_gb(disk['size_gib'] / tp):g}"
    spec = {
        "name": model.replace("/", "-").replace(".", "-").lower()[:50],
        "modelURL": model,
        "requestGPU": tp,
        "vllmConfig": {"enablePrefixCaching": True, "tensorParallelSize": tp},
        "lmcacheConfig": lmcache,
    }
    if disk["enabled"]:
        spec["env"] = [{"name": "LMCACHE_LOCAL_DISK", "value": f"file://{disk['path']}"}]
    values = {"servingEngineSpec": {"modelSpec": [spec]}}
    comments = "".join(f"# {line}\n" for line in _header(meta))
    comments += "# buffer sizes are GB per worker (production-stack maps them to LMCACHE_*)\n"
    return comments + yaml.safe_dump(values, sort_keys=False)
