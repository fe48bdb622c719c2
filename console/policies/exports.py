"""Serving-engine configuration from an approved policy version.

Key and flag names follow the projects' documentation (see shared/docs/engines.md):
- LMCache YAML (LMCACHE_CONFIG_FILE): chunk_size, local_cpu, max_local_cpu_size (GB, per
  tensor-parallel worker: each TP rank allocates its own), local_disk ("file:///path"),
  max_local_disk_size (GB), remote_url, cache_policy — LMCache
  docs/source/api_reference/configurations.rst.
- vLLM serve: --kv-offloading-size (GiB, the total across TP ranks) with
  --kv-offloading-backend native|lmcache, --kv-cache-dtype auto|fp8|bfloat16 (what the
  sizes assumed), --served-model-name — vllm/config/cache.py; the LMCache connector
  alternative --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'.
- production-stack Helm: servingEngineSpec.modelSpec[].lmcacheConfig.{enabled,
  cpuOffloadingBufferSize, diskOffloadingBufferSize} (GB, per worker) and
  vllmConfig.{enablePrefixCaching, tensorParallelSize, extraArgs} — helm/values.yaml and
  helm/templates/deployment-vllm-multi.yaml.
Every governed route is exported (serving.served_routes: the model by its Hugging Face
id, its TP and KV dtype). Every export carries the policy's digest in a comment, so a
deployed file can be matched to its sign-off.
"""

from __future__ import annotations

import json
import shlex

import yaml

from console.policies.serving import Served, served_routes

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


def _per_rank(size_gib: float | None, tp: int) -> float:
    """A replica's total (what the body holds) per TP rank, for engines that size per rank.
    The total is per-rank bytes x tp (metrics.md section 8), so dividing is exact."""
    return _gb((size_gib or 0.0) / tp)


def _dtype_note(served: list[Served]) -> list[str]:
    """The KV dtype the sizes assumed: LMCache stores what the engine holds, so its YAML
    has no dtype key; the engine must run with the matching --kv-cache-dtype."""
    return [
        f"route {s.route}: model {s.model}, TP {s.tp}, KV dtype {s.kv_dtype} "
        f"(vLLM --kv-cache-dtype {s.vllm_kv_dtype})"
        for s in served
    ]


def lmcache_config(body: dict, meta: dict, *, chunk_size: int, tp: int) -> dict:
    tiers = body["tiers"]
    ram, disk, remote = tiers["cpu_ram"], tiers["local_disk"], tiers["remote"]
    config: dict = {
        "chunk_size": chunk_size,
        "local_cpu": bool(ram["enabled"]),
        # per TP worker: LMCache allocates this on every rank
        "max_local_cpu_size": _per_rank(ram["size_gib"], tp) if ram["enabled"] else 0.0,
        "local_disk": f"file://{disk['path']}" if disk["enabled"] else None,
        "max_local_disk_size": _per_rank(disk["size_gib"], tp) if disk["enabled"] else 0.0,
        "remote_url": remote["url"] if remote["enabled"] else None,
        "cache_policy": _CACHE_POLICY.get(body["failure"]["ram_full"], "LRU"),
        "save_unfull_chunk": False,  # tails are never cached, as in the analysis
    }
    return config


def lmcache_yaml(body: dict, meta: dict, *, chunk_size: int) -> str:
    """One LMCache configuration per TP degree among the routes (a route's per-rank size
    depends only on it): one YAML document when every route runs at the same TP."""
    served = served_routes(body)
    by_tp: dict[int, list[Served]] = {}
    for s in served:
        by_tp.setdefault(s.tp, []).append(s)
    documents = []
    for tp, group in sorted(by_tp.items()):
        lines = _header(meta) if not documents else []
        lines += [f"for routes: {', '.join(s.route for s in group)}"]
        lines += _dtype_note(group)
        lines += [f"sizes are per tensor-parallel worker ({tp} ranks)"]
        comments = "".join(f"# {line}\n" for line in lines)
        documents.append(
            comments
            + yaml.safe_dump(
                lmcache_config(body, meta, chunk_size=chunk_size, tp=tp), sort_keys=False
            )
        )
    return "---\n".join(documents)


def _vllm_common(s: Served) -> list[str]:
    args = ["--tensor-parallel-size", str(s.tp), "--kv-cache-dtype", s.vllm_kv_dtype]
    if s.model != s.route:  # clients keep asking for the route's name
        args += ["--served-model-name", s.route]
    return args


def vllm_flags(body: dict, meta: dict) -> str:
    """`vllm serve` command lines for every governed route: native CPU offload, and the
    LMCache alternative."""
    ram = body["tiers"]["cpu_ram"]
    size = _gb(ram["size_gib"]) if ram["enabled"] else 0.0
    connector = json.dumps({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"})
    lines = [f"# {line}" for line in _header(meta)]
    for s in served_routes(body):
        native = ["vllm", "serve", s.model, *_vllm_common(s)]
        if size:
            # total across TP ranks (vLLM divides it)
            native += ["--kv-offloading-size", f"{size:g}", "--kv-offloading-backend", "native"]
        if body["scope"] != "global":
            # a cryptographic prefix hash: non-cryptographic ones are a cross-tenant leak risk
            native += ["--prefix-caching-hash-algo", "sha256"]
        lmcache = ["vllm", "serve", s.model, *_vllm_common(s), "--kv-transfer-config", connector]
        lines += [f"# {_dtype_note([s])[0]}"]
        lines += ["# native CPU KV offload (--kv-offloading-size is GiB, total over TP ranks):"]
        lines += [shlex.join(native)]
        lines += ["# or the LMCache connector, with the LMCache YAML export as lmcache.yaml:"]
        lines += ["LMCACHE_CONFIG_FILE=lmcache.yaml " + shlex.join(lmcache)]
    return "\n".join(lines) + "\n"


def helm_values(body: dict, meta: dict) -> str:
    """production-stack values: one modelSpec per governed route."""
    tiers = body["tiers"]
    ram, disk = tiers["cpu_ram"], tiers["local_disk"]
    specs = []
    for s in served_routes(body):
        cpu = _per_rank(ram["size_gib"], s.tp) if ram["enabled"] else 0
        lmcache: dict = {"enabled": bool(ram["enabled"]), "cpuOffloadingBufferSize": f"{cpu:g}"}
        if disk["enabled"]:
            lmcache["diskOffloadingBufferSize"] = f"{_per_rank(disk['size_gib'], s.tp):g}"
        spec = {
            "name": s.route.replace("/", "-").replace(".", "-").lower()[:50],
            "modelURL": s.model,
            "requestGPU": s.tp,
            "vllmConfig": {
                "enablePrefixCaching": True,
                "tensorParallelSize": s.tp,
                # vllmConfig.dtype is the weights' dtype; the KV cache's goes as an argument
                "extraArgs": _vllm_common(s)[2:],
            },
            "lmcacheConfig": lmcache,
        }
        if disk["enabled"]:
            spec["env"] = [{"name": "LMCACHE_LOCAL_DISK", "value": f"file://{disk['path']}"}]
        specs.append(spec)
    values = {"servingEngineSpec": {"modelSpec": specs}}
    comments = "".join(f"# {line}\n" for line in _header(meta) + _dtype_note(served_routes(body)))
    comments += "# buffer sizes are GB per worker (production-stack maps them to LMCACHE_*)\n"
    return comments + yaml.safe_dump(values, sort_keys=False)
