"""LMCache in-process: the YAML LMCACHE_CONFIG_FILE names (LMCache
docs/source/api_reference/configurations.rst): chunk_size, local_cpu, max_local_cpu_size
(GB, per tensor-parallel worker: each TP rank allocates its own, LMCache #2901),
local_disk ("file:///path"), max_local_disk_size (GB per worker), remote_url,
cache_policy (LRU | LFU | FIFO), save_unfull_chunk. LMCache reads one mapping from
LMCACHE_CONFIG_FILE: one file per distinct configuration. LMCache stores what the engine
holds, so the YAML has no dtype key; the engine runs with the matching --kv-cache-dtype.
"""

from __future__ import annotations

from urllib.parse import quote

import yaml

from console.policies.exports.common import (
    ExportChoice,
    RouteSize,
    comments,
    header,
    notes,
    salt_lines,
    sizes,
    slug,
)
from console.policies.exports.gaps import LMCACHE, gap_lines
from console.policies.fleet import policy_fleet

# LMCache evicts by cache_policy only: the other choices are gaps (exports.gaps)
CACHE_POLICY = {"evict_lru": "LRU", "evict_lifetime_first": "LRU", "refuse_store": "LRU"}


def lmcache_files(body: dict) -> list[tuple[str, list[str]]]:
    """The LMCache files a version needs, as (file name, its routes): LMCache reads one
    mapping from LMCACHE_CONFIG_FILE, so routes whose sizes differ get a file each
    ("lmcache-<first route>.yaml"); "lmcache.yaml" when every route's are the same."""
    groups: dict[tuple, list[str]] = {}
    for s, ram, disk in sizes(body):
        key = (ram and ram.per_rank, disk and disk.per_rank)
        groups.setdefault(key, []).append(s.route)
    if len(groups) <= 1:
        return [("lmcache.yaml", [r for routes in groups.values() for r in routes])]
    out, taken = [], set()
    for routes in groups.values():
        name, n = f"lmcache-{slug(routes[0])}.yaml", 2
        while name in taken:
            name, n = f"lmcache-{slug(routes[0])}-{n}.yaml", n + 1
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
    return {
        "chunk_size": chunk_size,
        "local_cpu": ram is not None,
        # per TP worker: LMCache allocates this on every rank
        "max_local_cpu_size": ram.per_rank if ram else 0.0,
        "local_disk": f"file://{local_disk['path']}" if disk else None,
        "max_local_disk_size": disk.per_rank if disk else 0.0,
        "remote_url": remote["url"] if remote["enabled"] else None,
        "cache_policy": CACHE_POLICY.get(body["failure"]["ram_full"], "LRU"),
        "save_unfull_chunk": False,  # tails are never cached, as in the analysis
    }


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
    group = [row for row in sizes(body) if row[0].route in routes]
    _, ram, disk = group[0]
    lines = [*header(meta, body), f"save as {name}", f"for routes: {', '.join(routes)}"]
    lines += salt_lines(body) + gap_lines(body, LMCACHE)
    others = [(n, r) for n, r in files if n != name]
    if others:
        lines += [
            f"this version needs {len(files)} LMCache files (the routes' sizes differ); "
            "the others, each from the LMCache YAML export with ?route=<route>:"
        ]
        lines += [f"  {n} for routes: {', '.join(r)} (?route={quote(r[0])})" for n, r in others]
    for s, r, d in group:
        lines += notes(s, r, d)
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
    config = lmcache_config(body, meta, chunk_size=chunk_size, ram=ram, disk=disk)
    return comments(lines) + yaml.safe_dump(config, sort_keys=False)
