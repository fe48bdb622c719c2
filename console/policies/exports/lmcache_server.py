"""The LMCache multiprocess server (LMCache docs/source/mp/configuration.rst): one
`lmcache server` per node holds the KV of every TP rank of the engine beside it, so its
--l1-size-gb (GB, required) is the replica's total over its ranks. --eviction-policy
IsolatedLRU keeps one LRU per cache_salt, each bounded by a quota set at run time with
`lmcache quota set <salt> --limit-gb <GB>` (docs/source/cli/quota.rst; a salt without a
quota keeps nothing), used when the scope is tenant or user; LRU otherwise. A disk tier is
an fs --l2-adapter (docs/source/mp/l2_storage/fs.rst: {"type": "fs", "base_path"}), with
the per-salt AES-GCM serde (LMCache PR #4235, docs/source/mp/serde.rst) when the policy
encrypts at rest; with no disk or remote tier, no --l2-adapter at all. vLLM connects with
LMCacheMPConnector (kv_connector_extra_config lmcache.mp.host/port, default 5555).
"""

from __future__ import annotations

import json
import math
import shlex

from console.policies.exports.common import (
    Sized,
    exact,
    header,
    notes,
    num,
    replicas,
    salt_lines,
    sizes,
)
from console.policies.exports.gaps import LMCACHE_SERVER, gap_lines
from console.policies.exports.vllm import hash_args, vllm_args

# where the aesgcm serde reads its master key: mount it there (e.g. a Kubernetes Secret)
MASTER_KEY_PATH = "/etc/lmcache/l2-master-key"
MP_CONNECTOR = {
    "kv_connector": "LMCacheMPConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"lmcache.mp.host": "tcp://localhost", "lmcache.mp.port": 5555},
}


def eviction_policy(body: dict) -> str:
    return "IsolatedLRU" if body["scope"] in ("tenant", "user") else "LRU"


def l2_adapter(body: dict) -> dict | None:
    """The fs adapter of the disk tier (None: no disk tier, no --l2-adapter)."""
    tiers = body["tiers"]
    if not tiers["local_disk"]["enabled"]:
        return None
    adapter: dict = {"type": "fs", "base_path": tiers["local_disk"]["path"]}
    if tiers.get("encrypt_at_rest", False):
        adapter["serde"] = {"type": "aesgcm", "master_key_path": MASTER_KEY_PATH}
    return adapter


def quota_gb(body: dict, l1_total: float) -> float:
    """Each tenant's quota: an even split of L1, down to 0.01 GB so the quotas fit in it
    (the policy gives tenants no shares of their own)."""
    return math.floor(exact(l1_total) * 100 / len(body["tenants"])) / 100


def _route(body: dict, chunk_size: int, row: Sized, fleet: dict | None, count: int) -> list[str]:
    s, ram, disk = row
    lines = [f"# {line}" for line in notes(s, ram, disk)]
    if ram is None:
        return [*lines, f"# route {s.route}: the policy keeps no host RAM tier: no server"]
    server = ["lmcache", "server", "--chunk-size", str(chunk_size), "--l1-size-gb",
              num(ram.total), "--eviction-policy", eviction_policy(body)]  # fmt: skip
    if adapter := l2_adapter(body):
        server += ["--l2-adapter", json.dumps(adapter)]
    each = f", one per replica ({count})" if fleet else ""
    lines += [f"# the server beside route {s.route}'s engine: --l1-size-gb is GB over its "
              f"{s.tp} TP rank{'s' * (s.tp != 1)} ({num(ram.per_rank)} each){each}:"]  # fmt: skip
    quotas = []
    if body["scope"] == "tenant" and body.get("tenants"):
        limit = num(quota_gb(body, ram.total))
        quotas = [shlex.join(["lmcache", "quota", "set", t, "--limit-gb", limit])
                  for t in body["tenants"]]  # fmt: skip
    engine = ["vllm", "serve", s.model, *vllm_args(s), *hash_args(body),
              "--kv-transfer-config", json.dumps(MP_CONNECTOR)]  # fmt: skip
    for i in range(count):
        if fleet:
            lines += [f"# replica {i + 1} of {count}"]
        lines += [shlex.join(server)]
        if quotas:
            lines += [f"# then one quota per tenant salt: an even split of {num(ram.total)} GB"]
            lines += quotas
        lines += ["# and its engine:", shlex.join(engine)]
    return lines


def lmcache_server(body: dict, meta: dict, *, chunk_size: int) -> str:
    """`lmcache server` (with its quotas) and the vLLM engine beside it, per route and,
    with a fleet, per replica."""
    opening = header(meta, body) + salt_lines(body) + gap_lines(body, LMCACHE_SERVER)
    lines = [f"# {line}" for line in opening]
    lines += ["# one LMCache server per node; two engines on one node need their own --port"]
    if eviction_policy(body) == "IsolatedLRU":
        who = "tenant" if body["scope"] == "tenant" else "user"
        lines += [f"# IsolatedLRU: one LRU per cache_salt; offboarding a {who}: lmcache quota "
                  f"delete <salt> evicts its blocks from L1 on the next cycle"]  # fmt: skip
    if (adapter := l2_adapter(body)) and "serde" in adapter:
        lines += [f"# encryption at rest: the aesgcm serde derives one key per cache_salt "
                  f"from the master key at {MASTER_KEY_PATH}: mount it there"]  # fmt: skip
    fleet, count = replicas(body)
    for row in sizes(body):
        lines += _route(body, chunk_size, row, fleet, count)
    return "\n".join(lines) + "\n"
