"""What each engine cannot enforce of a policy, said rather than dropped.

An export writes what its engine can express; where the engine has no knob for a field of
the policy (a block lifetime where no retention TTL exists, a per-tenant quota in a cache
with one LRU for all), the field is a gap: each export prints its engine's gaps as
comments and the sign-off page lists them all, so an approver signs knowing which parts
of the policy rest on people rather than on the engine. The reasons cite the engines'
documentation (shared/docs/engines.md sections 2-6 and 9).
"""

from __future__ import annotations

from dataclasses import dataclass

from console.policies.body import END_OF_LIFE_EVENTS, RAM_FULL

LMCACHE = "LMCache"
LMCACHE_SERVER = "LMCache server"
VLLM = "vLLM"
SGLANG = "SGLang HiCache"
DYNAMO = "Dynamo KVBM"
HELM = "production-stack Helm"
ENGINES = (LMCACHE, LMCACHE_SERVER, VLLM, SGLANG, DYNAMO, HELM)


@dataclass(frozen=True)
class Gap:
    engine: str
    field: str  # the policy body's field, as its key path
    why: str


# why each engine keeps a block past the policy's lifetime
_NO_TTL = {
    LMCACHE: "no retention TTL: a block stays until cache_policy evicts it (a per-request "
    "retention TTL is LMCache PR #4456, still open)",
    LMCACHE_SERVER: "no retention TTL: --l1-write-ttl-seconds and --l1-read-ttl-seconds are "
    "lock TTLs, not retention, and a request's lmcache.ttl is metadata only "
    "(docs/source/mp/configuration.rst); retention TTL is LMCache PR #4456, still open",
    VLLM: "no retention TTL: a block stays until the LRU evicts it (--kv-cache-metrics only "
    "measures lifetimes)",
    SGLANG: "no retention TTL: the radix cache and HiCache evict by --radix-eviction-policy "
    "(lru or lfu) only",
    DYNAMO: "no retention TTL in docs/kvbm: blocks stay until KVBM evicts them",
}
# why each engine shares capacity across tenants (None: it can keep them apart)
_NO_QUOTA = {
    LMCACHE: "one cache_policy for every salt, no per-tenant quota; and the in-process "
    "connector does not key blocks by vLLM's cache_salt (LMCache PR #2880, open): its tiers "
    "are shared across tenants (the LMCache server keys and isolates by it)",
    VLLM: "cache_salt keeps tenants from reusing each other's blocks, but one LRU holds "
    "every salt's blocks: no per-tenant quota",
    SGLANG: "no per-tenant quota and no documented cache_salt in the radix cache or "
    "HiCache; through LMCache the salt is dropped (sglang #37160, LMCache #4825): tenants "
    "share prefixes",
    DYNAMO: "no per-tenant quota, and docs/kvbm does not say its host and disk keys carry "
    "vLLM's cache_salt",
}
_RAM_FULL_POLICY = {
    LMCACHE: "cache_policy offers LRU, LFU and FIFO",
    LMCACHE_SERVER: "--eviction-policy offers LRU, ARC, IsolatedLRU and noop",
    VLLM: "OffloadingConnector's eviction_policy offers lru and arc",
    SGLANG: "--radix-eviction-policy offers lru and lfu",
    DYNAMO: "docs/kvbm documents no eviction setting",
}
# the disk tier's size, where the export cannot write it
_NO_DISK_SIZE = {
    LMCACHE_SERVER: "the fs l2 adapter has no size field (docs/source/mp/l2_storage/fs.rst): "
    "the disk fills until the file system does",
    VLLM: "--kv-offloading-size sizes host RAM only, and OffloadingConnector's fs secondary "
    "tier has no documented size key: vllm-serve.sh keeps no disk tier",
    SGLANG: "--hicache-storage-backend file has no documented size flag: the disk fills "
    "until the file system does",
}
_ENCRYPTS = {LMCACHE_SERVER}  # the aesgcm serde of its l2 adapters (LMCache PR #4235)
_EXPORTS_REMOTE = {LMCACHE}  # remote_url; the others' remote stores are not exported


def _own(engine: str) -> str:
    """The engine whose cache a Helm deployment runs: production-stack's LMCache."""
    return LMCACHE if engine == HELM else engine


def _lifetime(body: dict, engine: str) -> list[Gap]:
    if body.get("lifetime_s") is None:
        return []
    return [Gap(engine, "lifetime_s", _NO_TTL[_own(engine)])]


def _end_of_life(body: dict, engine: str) -> list[Gap]:
    """Every end-of-life event but a restart (which empties RAM) and lifetime expiry (the
    lifetime's own gap): no engine has an API that purges on it, except the LMCache
    server's quota delete, which evicts one salt's blocks from L1."""
    disk_on = body["tiers"]["local_disk"]["enabled"] or body["tiers"]["remote"]["enabled"]
    by_salt = {"tenant": "tenant_offboarding", "user": "data_subject_deletion"}
    out = []
    for entry in body.get("end_of_life") or []:
        event = entry.get("event")
        label = END_OF_LIFE_EVENTS.get(event, event)
        if event == "lifetime_expiry":
            continue
        if event == "process_restart":
            if disk_on:
                out.append(Gap(engine, f"end_of_life.{event}", "a restart empties RAM, but "
                               "the engine's documentation promises no wipe of the disk or "
                               "remote tier: delete it in the start command"))  # fmt: skip
            continue
        if engine == LMCACHE_SERVER and by_salt.get(body["scope"]) == event:
            if disk_on:
                out.append(Gap(engine, f"end_of_life.{event}", "lmcache quota delete <salt> "
                               "evicts the salt's blocks from L1 (docs/source/cli/quota.rst); "
                               "its l2 adapter's copies are not said to go"))  # fmt: skip
            continue
        out.append(Gap(engine, f"end_of_life.{event}", f"no API purges blocks on “{label}”: "
                       "only a restart (RAM) or deleting the disk directory does"))  # fmt: skip
    return out


def _scope(body: dict, engine: str) -> list[Gap]:
    if body["scope"] == "global":
        return []
    if engine != LMCACHE_SERVER:
        return [Gap(engine, "scope", _NO_QUOTA[_own(engine)])]
    if body["scope"] == "tenant" and body.get("tenants"):
        return []  # IsolatedLRU with one quota per tenant salt
    who = "users" if body["scope"] == "user" else "tenants"
    return [Gap(engine, "scope", f"IsolatedLRU needs a quota per salt and the policy lists no "
                f"{who}: register each with lmcache quota set; a salt without one keeps "
                "nothing (docs/source/mp/configuration.rst)")]  # fmt: skip


def _tiers(body: dict, engine: str) -> list[Gap]:
    tiers, own = body["tiers"], _own(engine)
    out = []
    if tiers["local_disk"]["enabled"] and own in _NO_DISK_SIZE:
        out.append(Gap(engine, "tiers.local_disk.size_gib", _NO_DISK_SIZE[own]))
    if tiers["local_disk"]["enabled"] and own == DYNAMO:
        out.append(Gap(engine, "tiers.local_disk", "KVBM writes a block to disk only once it "
                       "was hit twice, unless DYN_KVBM_DISABLE_DISK_OFFLOAD_FILTER is set "
                       "(docs/kvbm)"))  # fmt: skip
    if tiers["remote"]["enabled"] and (own not in _EXPORTS_REMOTE or engine == HELM):
        out.append(Gap(engine, "tiers.remote", "the remote store is not exported for this "
                       "engine: configure it by hand from its documentation"))  # fmt: skip
    persistent = tiers["local_disk"]["enabled"] or tiers["remote"]["enabled"]
    if persistent and tiers.get("encrypt_at_rest", False) and own not in _ENCRYPTS:
        out.append(Gap(engine, "tiers.encrypt_at_rest", "no encryption at rest for its disk "
                       "or remote tier (the LMCache server's aesgcm serde, LMCache PR #4235, "
                       "is the one engine that offers it)"))  # fmt: skip
    return out


def _ram_full(body: dict, engine: str) -> list[Gap]:
    choice = (body.get("failure") or {}).get("ram_full") or ""
    if choice in ("", "evict_lru"):
        return []
    label = RAM_FULL.get(choice, choice)
    return [Gap(engine, "failure.ram_full", f"“{label}” is not offered: "
                f"{_RAM_FULL_POLICY[_own(engine)]}; the export evicts LRU")]  # fmt: skip


def gaps(body: dict, engines: tuple[str, ...] = ENGINES) -> list[Gap]:
    """What each of the engines cannot enforce of the body, engine by engine."""
    out = []
    for engine in engines:
        for part in (_lifetime, _end_of_life, _scope, _tiers, _ram_full):
            out += part(body, engine)
    return out


def gap_lines(body: dict, *engines: str) -> list[str]:
    """The gaps of the engines an export configures, as its comment lines."""
    found = gaps(body, engines)
    if not found:
        return []
    return ["what the engine cannot enforce (listed on the sign-off page):"] + [
        f"  GAP {g.engine}: {g.field}: {g.why}" for g in found
    ]
