"""vLLM command lines. `vllm serve` (vllm/config/cache.py, vllm/engine/arg_utils.py):
--kv-offloading-size (GiB, "the total buffer size summed across all TP ranks") with
--kv-offloading-backend native|lmcache, --kv-cache-dtype auto|fp8|bfloat16 (what the sizes
assumed), --served-model-name, --prefix-caching-hash-algo sha256 where tenants must not
share; the LMCache connector alternative --kv-transfer-config
'{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}' (LMCache
docs/source/mp/quickstart.rst). The OffloadingConnector export spells out what native
offload sets (docs/features/kv_offloading_usage.md): kv_connector_extra_config
{cpu_bytes_to_use (bytes, total over TP ranks), eviction_policy "lru", store_threshold},
with a TieringOffloadingSpec fs tier when the policy keeps a disk tier. Per replica with
a fleet: one command each.
"""

from __future__ import annotations

import json
import shlex

from console.policies.exports.common import (
    Sized,
    gib_bytes,
    header,
    notes,
    num,
    per_replica,
    replicas,
    salt_lines,
    sizes,
)
from console.policies.exports.gaps import LMCACHE, VLLM, gap_lines
from console.policies.exports.lmcache import lmcache_file_of
from console.policies.serving import Served

LMCACHE_CONNECTOR = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


def vllm_args(s: Served) -> list[str]:
    """The arguments every vLLM command of a route has: TP, KV dtype, the route's name."""
    args = ["--tensor-parallel-size", str(s.tp), "--kv-cache-dtype", s.vllm_kv_dtype]
    if s.model != s.route:  # clients keep asking for the route's name
        args += ["--served-model-name", s.route]
    return args


def hash_args(body: dict) -> list[str]:
    # a cryptographic prefix hash: non-cryptographic ones are a cross-tenant leak risk
    return ["--prefix-caching-hash-algo", "sha256"] if body["scope"] != "global" else []


def _lines(body: dict, meta: dict, *engines: str) -> list[str]:
    """The opening comments: the policy, the salt its scope needs, the engines' gaps."""
    return [
        f"# {line}" for line in header(meta, body) + salt_lines(body) + gap_lines(body, *engines)
    ]


def vllm_flags(body: dict, meta: dict) -> str:
    """`vllm serve` command lines for every governed route: native CPU offload, and the
    LMCache alternative with its own LMCache file."""
    connector = json.dumps(LMCACHE_CONNECTOR)
    lines = _lines(body, meta, VLLM, LMCACHE)
    fleet, count = replicas(body)
    pooled = fleet is not None and fleet["router"] == "pooled"
    for s, ram, disk in sizes(body):
        native = ["vllm", "serve", s.model, *vllm_args(s)]
        if ram and ram.total:
            # total across TP ranks (vLLM divides it)
            native += ["--kv-offloading-size", num(ram.total), "--kv-offloading-backend", "native"]
        native += hash_args(body)
        lmcache = ["vllm", "serve", s.model, *vllm_args(s), "--kv-transfer-config", connector]
        config_file = lmcache_file_of(body, s.route)
        lines += [f"# {line}" for line in notes(s, ram, disk)]
        each = f", one command per replica ({count})" if fleet else ""
        lines += [
            "# native CPU KV offload (--kv-offloading-size is GiB, total over TP ranks"
            + (", per replica" if fleet else "")
            + (": its share of the pooled store" if pooled else "")
            + f"){each}:"
        ]
        lines += per_replica([shlex.join(native)] * count, fleet)
        lines += [
            f"# or the LMCache connector, with this route's LMCache YAML as {config_file}{each}:"
        ]
        lmcache_line = f"LMCACHE_CONFIG_FILE={config_file} " + shlex.join(lmcache)
        lines += per_replica([lmcache_line] * count, fleet)
    return "\n".join(lines) + "\n"


def store_threshold(body: dict) -> int:
    """vLLM's store_threshold for the analysis's admission: a block enters host RAM at its
    k-th use; vLLM stores at first sight below 2 (its default, 0)."""
    k = int(((body.get("evidence") or {}).get("params") or {}).get("store_threshold") or 1)
    return k if k >= 2 else 0


def offloading_config(body: dict, row: Sized) -> dict:
    """The --kv-transfer-config of OffloadingConnector for a route."""
    _, ram, disk = row
    extra: dict = {
        "cpu_bytes_to_use": gib_bytes(ram.total) if ram else 0,
        "eviction_policy": "lru",
        "store_threshold": store_threshold(body),
    }
    if disk:
        extra["spec_name"] = "TieringOffloadingSpec"
        root = body["tiers"]["local_disk"]["path"]
        extra["secondary_tiers"] = [{"type": "fs", "root_dir": root}]
    return {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": extra}  # fmt: skip


def vllm_offload(body: dict, meta: dict) -> str:
    """`vllm serve` with OffloadingConnector's JSON for every governed route: the same
    host RAM as --kv-offloading-size, in bytes, with the analysis's store threshold."""
    lines = _lines(body, meta, VLLM)
    fleet, count = replicas(body)
    for row in sizes(body):
        s, ram, disk = row
        lines += [f"# {line}" for line in notes(s, ram, disk)]
        if ram is None:
            lines += [f"# route {s.route}: the policy keeps no host RAM tier: no offload"]
            continue
        config = offloading_config(body, row)
        k = config["kv_connector_extra_config"]["store_threshold"]
        lines += [
            f"# OffloadingConnector: cpu_bytes_to_use = {num(ram.total)} GiB, the total over "
            f"{s.tp} TP rank{'s' * (s.tp != 1)}" + (", per replica" if fleet else "")
            + f"; store_threshold {k} (" + (f"stored once seen {k} times" if k else "stored "
            "at first use") + ", as the analysis assumed)"
            + (f", one command per replica ({count})" if fleet else "") + ":"
        ]  # fmt: skip
        command = ["vllm", "serve", s.model, *vllm_args(s), *hash_args(body)]
        command += ["--kv-transfer-config", json.dumps(config)]
        lines += per_replica([shlex.join(command)] * count, fleet)
    return "\n".join(lines) + "\n"
