"""The policy body: what a version says, as plain JSON with one canonical form.

The SHA-256 of the canonical JSON (sorted keys, no whitespace, UTF-8) is the digest an
approver signs; any change to what the policy says changes the digest.
"""

from __future__ import annotations

import hashlib

import orjson

SCOPES = ("global", "tenant", "user")
END_OF_LIFE_EVENTS = {
    "lifetime_expiry": "Lifetime expiry",
    "session_end": "Session end",
    "tenant_offboarding": "Tenant offboarding",
    "data_subject_deletion": "Data-subject deletion request",
    "process_restart": "Worker or process restart",
    "model_or_tokenizer_change": "Model or tokenizer change",
    "manual_purge": "Manual purge",
}
RAM_FULL = {
    "evict_lru": "Evict the least recently used blocks",
    "evict_lifetime_first": "Evict blocks closest to their lifetime end first",
    "refuse_store": "Refuse to store new blocks",
}
WORKER_EXIT = {
    "blocks_lost_recompute": "Blocks are lost; requests recompute their prefixes",
}
LOAD_FAILURE = {
    "recompute": "Recompute the prefix (a cache failure never fails a request)",
}
# the body's "failure" section: each key, what it answers ("what happens …") and its
# choices; the form's labels, the checks and the pages' labels read it from here
FAILURES = {
    "ram_full": ("when the RAM tier is full", RAM_FULL),
    "worker_exit": ("when a worker or cache process exits", WORKER_EXIT),
    "load_failure": ("when a block cannot be loaded", LOAD_FAILURE),
}
# the choice sets' labels, by the names the body templates use
LABELS = {"eol": END_OF_LIFE_EVENTS, **{key: choices for key, (_, choices) in FAILURES.items()}}
REMOTE_KINDS = ("redis", "valkey", "s3", "mooncake_store", "lmcache_server", "other")
CLASSIFICATIONS = ("public", "internal", "confidential", "restricted")


def empty_body() -> dict:
    """A new draft: every key present, nothing decided that a reviewer must decide."""
    return {
        "routes": [],
        # {route: {"tp": n, "kv_dtype": d}} for routes not served as the analysis assumed
        "serving": {},
        "tenants": [],
        "lifetime_s": None,
        "purge_deadline_s": None,
        "scope": "tenant",
        "end_of_life": [{"event": "lifetime_expiry", "deadline_s": None}],
        "tiers": {
            "gpu": True,
            "cpu_ram": {"enabled": True, "size_gib": None},
            "local_disk": {"enabled": False, "size_gib": None, "path": ""},
            "remote": {"enabled": False, "kind": "", "size_gib": None, "url": ""},
            "no_persistent_storage": True,
            # blocks encrypted where they persist (the disk and remote tiers); absent from
            # bodies approved before it existed: read with .get("encrypt_at_rest", False)
            "encrypt_at_rest": False,
        },
        "failure": dict.fromkeys(FAILURES, ""),
        "disk_contract": {
            "allowed_data": "",
            "cold_after_s": None,
            "request_may_wait": False,
            "deleted_by": "",
            "delete_when": "",
            "on_disk_full": "",
            "on_restart": "",
        },
        "access": {"readers": "", "classification": "", "justification": ""},
        "evidence": {},
    }


def normalize(body: dict) -> dict:
    """Apply the switches that force other values, so the stored body says what holds:
    "no persistent storage" turns every disk and remote tier off."""
    tiers = body["tiers"]
    tiers["gpu"] = True  # GPU memory is always a tier
    if tiers.get("no_persistent_storage"):
        for name in ("local_disk", "remote"):
            tiers[name]["enabled"] = False
            tiers[name]["size_gib"] = None
    if not persistent_tier_enabled(body):
        body["disk_contract"] = None
    return body


def persistent_tier_enabled(body: dict) -> bool:
    tiers = body["tiers"]
    return bool(tiers["local_disk"]["enabled"] or tiers["remote"]["enabled"])


def encrypted_at_rest(body: dict) -> bool:
    """Whether the disk and remote tiers store blocks encrypted (False for a body written
    before the key existed: stored bodies are never rewritten, their digests are signed)."""
    return bool(body["tiers"].get("encrypt_at_rest", False))


def canonical_json(body: dict) -> bytes:
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def digest(body: dict) -> str:
    """SHA-256 of the canonical JSON: what an approver signs."""
    return hashlib.sha256(canonical_json(body)).hexdigest()
