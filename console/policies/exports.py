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

Sizes (metrics.md section 8): a policy's RAM and disk sizes are replica totals for the
analysis's (model, KV dtype, TP), i.e. size / its replica bytes per token cached tokens.
A route keeps as many tokens: per rank = tokens x the route's per-rank bytes per token (at
the KV dtype its engine holds), total = per rank x the route's TP; rounded up to 0.01 GB.
A route kvscope has no profile for keeps the policy's total / TP, said in a comment.
LMCache reads one mapping from LMCACHE_CONFIG_FILE: one file per distinct configuration.

With a fleet in the evidence (console.policies.fleet), those sizes are each replica's: the
vLLM export gives one command per replica, Helm sets modelSpec[].replicaCount and
routerSpec.routingLogic, LMCache (which has no replica count) says it in a comment, and
every export names the router the sizes are for and why. A pooled store (only when the
author picks it: console.policies.fleet) is said first, in WARNING lines: its sizes are
each replica's share of one store of N x that size, not a local cache per replica.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from fractions import Fraction
from urllib.parse import quote

import yaml

from console.policies.fleet import ROUTING_LOGIC, fleet_lines, policy_fleet, pooled_warning
from console.policies.serving import Served, Sizing, served_routes, sizing

_CACHE_POLICY = {"evict_lru": "LRU", "evict_lifetime_first": "LRU", "refuse_store": "LRU"}


def _header(meta: dict, body: dict | None = None) -> list[str]:
    fleet = policy_fleet(body) if body is not None else None
    return [
        *(pooled_warning(fleet) if fleet else []),  # first: the sizes are not local caches
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
        *(fleet_lines(fleet) if fleet else []),
    ]


class ExportChoice(ValueError):
    """An export that needs to know which of several files is wanted."""


@dataclass(frozen=True)
class RouteSize:
    """A tier's size for one route, in the engines' units (GiB; LMCache and Helm say GB
    and mean the same number)."""

    per_rank: float  # what each TP rank allocates (LMCache, Helm)
    total: float  # over the route's TP ranks (vLLM --kv-offloading-size)
    note: str  # "" when sized by metrics.md section 8; else why not, for a comment


def _exact(value: float | None) -> Fraction:
    # the decimal a person typed (8.3, not the binary 8.300000000000000710…)
    return Fraction(repr(float(value or 0.0)))


def _up(value: Fraction) -> float:
    """Up to the next 0.01: an export never gives a route less than it needs."""
    return float(Fraction(math.ceil(value * 100), 100))


def _num(value: float) -> str:
    """A size as the engines read it: 0.01 steps, no trailing zeros ("12.5", "800")."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def route_size(size_gib: float | None, s: Served, size: Sizing | None) -> RouteSize:
    """A tier's size for route s. The policy's size is a replica total for the analysis's
    (model, KV dtype, TP); it holds size / (the analysis's replica bytes per token) cached
    tokens, and the route keeps as many: per rank = tokens x the route's own per-rank bytes
    per token (metrics.md section 8, at the KV dtype the engine holds), total = per rank x
    its TP. Without a profile for both sides, the policy's total / the route's TP, as
    said in the note."""
    total = _exact(size_gib)
    why = ""
    if size is None or size.profile is None:
        why = "no analysis with a model kvscope can read is behind the sizes"
    elif s.profile is None:
        why = f"kvscope does not know the KV bytes per token of {s.model}"
    elif s.tp_problem():
        why = f"TP {s.tp} cannot share its KV heads evenly"
    else:
        try:
            planned = size.profile.replica_kv_bytes_per_token(size.tp, size.kv_dtype)
        except ValueError:  # an analysis stored before its TP was checked
            why = f"the analysis's TP {size.tp} cannot share its model's KV heads evenly"
    if why:
        return RouteSize(
            per_rank=_up(total / s.tp),
            total=_up(total),
            note=f"route {s.route}: sizes are the policy's total / TP {s.tp} ({why}; "
            "metrics.md section 8 not applied: check them by hand)",
        )
    own = s.profile.kv_bytes_per_token_per_rank(s.tp, s.engine_kv_dtype)
    per_rank = _up(total * Fraction(own, planned))
    return RouteSize(per_rank=per_rank, total=_up(Fraction(repr(per_rank)) * s.tp), note="")


def _sizes(body: dict) -> list[tuple[Served, RouteSize | None, RouteSize | None]]:
    """Every governed route with its RAM and disk sizes (None for a tier that is off)."""
    size = sizing((body.get("evidence") or {}).get("params"))
    tiers = body["tiers"]
    ram, disk = tiers["cpu_ram"], tiers["local_disk"]
    return [
        (
            s,
            route_size(ram["size_gib"], s, size) if ram["enabled"] else None,
            route_size(disk["size_gib"], s, size) if disk["enabled"] else None,
        )
        for s in served_routes(body, size)
    ]


def _notes(s: Served, ram: RouteSize | None, disk: RouteSize | None) -> list[str]:
    """What the sizes assumed for a route: LMCache stores what the engine holds, so its
    YAML has no dtype key; the engine must run with the matching --kv-cache-dtype."""
    lines = [
        f"route {s.route}: model {s.model}, TP {s.tp}, KV dtype {s.kv_dtype} "
        f"(vLLM --kv-cache-dtype {s.vllm_kv_dtype})"
    ]
    if mismatch := s.dtype_mismatch():
        lines.append("WARNING: " + mismatch.replace("“", "").replace("”", ""))
    note = (ram or disk).note if (ram or disk) else ""
    if note:
        lines.append("WARNING: " + note)
    return lines


def _slug(route: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in route.lower()).split()) or "route"


def lmcache_files(body: dict) -> list[tuple[str, list[str]]]:
    """The LMCache files a version needs, as (file name, its routes): LMCache reads one
    mapping from LMCACHE_CONFIG_FILE, so routes whose sizes differ get a file each
    ("lmcache-<first route>.yaml"); "lmcache.yaml" when every route's are the same."""
    groups: dict[tuple, list[str]] = {}
    for s, ram, disk in _sizes(body):
        key = (ram and ram.per_rank, disk and disk.per_rank)
        groups.setdefault(key, []).append(s.route)
    if len(groups) <= 1:
        return [("lmcache.yaml", [r for routes in groups.values() for r in routes])]
    out, taken = [], set()
    for routes in groups.values():
        name, n = f"lmcache-{_slug(routes[0])}.yaml", 2
        while name in taken:
            name, n = f"lmcache-{_slug(routes[0])}-{n}.yaml", n + 1
        taken.add(name)
        out.append((name, routes))
    return out


def lmcache_file_of(body: dict, route: str) -> str | None:
    """The LMCache file a governed route's engine reads (None for another route)."""
    for name, routes in lmcache_files(body):
        if route in routes:
            return name
    return None


def lmcache_config(
    body: dict, meta: dict, *, chunk_size: int, ram: RouteSize | None, disk: RouteSize | None
) -> dict:
    tiers = body["tiers"]
    local_disk, remote = tiers["local_disk"], tiers["remote"]
    config: dict = {
        "chunk_size": chunk_size,
        "local_cpu": ram is not None,
        # per TP worker: LMCache allocates this on every rank
        "max_local_cpu_size": ram.per_rank if ram else 0.0,
        "local_disk": f"file://{local_disk['path']}" if disk else None,
        "max_local_disk_size": disk.per_rank if disk else 0.0,
        "remote_url": remote["url"] if remote["enabled"] else None,
        "cache_policy": _CACHE_POLICY.get(body["failure"]["ram_full"], "LRU"),
        "save_unfull_chunk": False,  # tails are never cached, as in the analysis
    }
    return config


def lmcache_yaml(body: dict, meta: dict, *, chunk_size: int, route: str | None = None) -> str:
    """The LMCache file of a route (`lmcache_files`), by default of the first governed
    route: one YAML mapping, what LMCACHE_CONFIG_FILE loads. Its comments name the files
    the other routes need."""
    files = lmcache_files(body)
    if route is None:
        name, routes = files[0]
    else:
        name, routes = next(((n, r) for n, r in files if route in r), (None, None))
        if name is None:
            raise ExportChoice(f"{route} is not a route this version governs.")
    group = [row for row in _sizes(body) if row[0].route in routes]
    _, ram, disk = group[0]
    lines = [*_header(meta, body), f"save as {name}", f"for routes: {', '.join(routes)}"]
    others = [(n, r) for n, r in files if n != name]
    if others:
        lines += [
            f"this version needs {len(files)} LMCache files (the routes' sizes differ); "
            "the others, each from the LMCache YAML export with ?route=<route>:"
        ]
        lines += [f"  {n} for routes: {', '.join(r)} (?route={quote(r[0])})" for n, r in others]
    for s, r, d in group:
        lines += _notes(s, r, d)
    tps = sorted({s.tp for s, _, _ in group})
    lines += [
        "sizes are per tensor-parallel worker "
        + (
            f"({tps[0]} rank{'s' * (tps[0] != 1)})"
            if len(tps) == 1
            else f"(ranks: {', '.join(map(str, tps))})"
        )
    ]
    if fleet := policy_fleet(body):
        lines += [f"every one of the {fleet['replicas']} replicas reads this file"]
    comments = "".join(f"# {line}\n" for line in lines)
    config = lmcache_config(body, meta, chunk_size=chunk_size, ram=ram, disk=disk)
    return comments + yaml.safe_dump(config, sort_keys=False)


def _vllm_common(s: Served) -> list[str]:
    args = ["--tensor-parallel-size", str(s.tp), "--kv-cache-dtype", s.vllm_kv_dtype]
    if s.model != s.route:  # clients keep asking for the route's name
        args += ["--served-model-name", s.route]
    return args


def vllm_flags(body: dict, meta: dict) -> str:
    """`vllm serve` command lines for every governed route: native CPU offload, and the
    LMCache alternative with its own LMCache file."""
    connector = json.dumps({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"})
    lines = [f"# {line}" for line in _header(meta, body)]
    fleet = policy_fleet(body)
    replicas = fleet["replicas"] if fleet else 1
    pooled = fleet is not None and fleet["router"] == "pooled"
    for s, ram, disk in _sizes(body):
        native = ["vllm", "serve", s.model, *_vllm_common(s)]
        if ram and ram.total:
            # total across TP ranks (vLLM divides it)
            native += ["--kv-offloading-size", _num(ram.total), "--kv-offloading-backend", "native"]
        if body["scope"] != "global":
            # a cryptographic prefix hash: non-cryptographic ones are a cross-tenant leak risk
            native += ["--prefix-caching-hash-algo", "sha256"]
        lmcache = ["vllm", "serve", s.model, *_vllm_common(s), "--kv-transfer-config", connector]
        config_file = lmcache_file_of(body, s.route)
        lines += [f"# {line}" for line in _notes(s, ram, disk)]
        each = f", one command per replica ({replicas})" if fleet else ""
        lines += [
            "# native CPU KV offload (--kv-offloading-size is GiB, total over TP ranks"
            + (", per replica" if fleet else "")
            + (": its share of the pooled store" if pooled else "")
            + f"){each}:"
        ]
        lines += _per_replica([shlex.join(native)] * replicas, fleet)
        lines += [
            f"# or the LMCache connector, with this route's LMCache YAML as {config_file}{each}:"
        ]
        lmcache_line = f"LMCACHE_CONFIG_FILE={config_file} " + shlex.join(lmcache)
        lines += _per_replica([lmcache_line] * replicas, fleet)
    return "\n".join(lines) + "\n"


def _per_replica(commands: list[str], fleet: dict | None) -> list[str]:
    """The commands as they are without a fleet; with one, each under its replica's name."""
    if fleet is None:
        return commands
    out = []
    for i, command in enumerate(commands, start=1):
        out += [f"# replica {i} of {len(commands)}", command]
    return out


def helm_values(body: dict, meta: dict) -> str:
    """production-stack values: one modelSpec per governed route."""
    disk_tier = body["tiers"]["local_disk"]
    fleet = policy_fleet(body)
    specs, notes = [], []
    for s, ram, disk in _sizes(body):
        lmcache: dict = {
            "enabled": ram is not None,
            "cpuOffloadingBufferSize": _num(ram.per_rank) if ram else "0",
        }
        if disk:
            lmcache["diskOffloadingBufferSize"] = _num(disk.per_rank)
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
        if fleet:  # production-stack: that many identical engine pods of this model
            spec["replicaCount"] = fleet["replicas"]
        if disk:
            spec["env"] = [{"name": "LMCACHE_LOCAL_DISK", "value": f"file://{disk_tier['path']}"}]
        specs.append(spec)
        notes += _notes(s, ram, disk)
    values: dict = {"servingEngineSpec": {"modelSpec": specs}}
    if fleet:
        values["routerSpec"] = {"routingLogic": ROUTING_LOGIC[fleet["router"]]}
    comments = "".join(f"# {line}\n" for line in _header(meta, body) + notes)
    comments += "# buffer sizes are GB per worker (production-stack maps them to LMCACHE_*)"
    comments += " of each replica" if fleet else ""
    pooled = fleet is not None and fleet["router"] == "pooled"
    comments += ": its share of the pooled store\n" if pooled else "\n"
    return comments + yaml.safe_dump(values, sort_keys=False)
