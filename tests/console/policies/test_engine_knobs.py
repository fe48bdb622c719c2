"""Every engine's export, read back by the engine's own kind of parser (YAML, JSON, shell
words, NAME=value), holds only keys and flags the cited documentation lists
(exports.knobs), sizes in each engine's own units computed here by hand, and the gaps of
what the engine cannot enforce, in its comments and on the sign-off page."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml
from django.urls import reverse
from django.utils.html import escape

from console.models import AuditEvent
from console.policies import exports
from console.policies.body import empty_body
from console.policies.exports.gaps import ENGINES
from console.policies.exports.knobs import KNOBS, KV_CONNECTORS
from tests.console.factories import approved_version, complete

GIB = 1 << 30
META = {"name": "p", "version": 1, "digest": "d" * 64, "approved_at": "2026-12-01T00:00:00",
        "approved_by": "appr", "lifetime_s": 1800, "scope": "tenant"}  # fmt: skip
TENANTS = ["acme", "globex", "initech"]
ROUTES = ["llama-3.1-8b", "qwen2.5-7b"]
# llama-3.1-8b sized at bf16, TP 2: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B over the
# replica = 131,072 B per token; 64 GiB hold 524,288 tokens and 200 GiB 1,638,400.
# llama keeps them on 2 ranks: 32 GiB and 100 GiB each. qwen2.5-7b at TP 2 has 28 layers x
# (4 / 2) KV heads x 128 x 2 x 2 B = 28,672 B per rank: 14 GiB and 43.75 GiB each.
LLAMA_REPLICA, QWEN_RANK = 32 * 8 * 128 * 2 * 2, 28 * 2 * 128 * 2 * 2
RAM_TOKENS, DISK_TOKENS = 64 * GIB // LLAMA_REPLICA, 200 * GIB // LLAMA_REPLICA
PER_RANK = {"llama-3.1-8b": (32.0, 100.0), "qwen2.5-7b": (14.0, 43.75)}  # (RAM, disk) GiB


def test_the_hand_computed_sizes():
    assert (RAM_TOKENS, DISK_TOKENS) == (524_288, 1_638_400)
    assert RAM_TOKENS * LLAMA_REPLICA / 2 == 32 * GIB and RAM_TOKENS * QWEN_RANK == 14 * GIB
    assert DISK_TOKENS * QWEN_RANK == 43.75 * GIB


def _body(scope="tenant", disk=True, encrypt=False, tenants=TENANTS, ram_full="evict_lru"):
    body = complete(empty_body())
    body.update(routes=list(ROUTES), scope=scope, tenants=list(tenants))
    body["tiers"]["cpu_ram"]["size_gib"] = 64.0
    body["tiers"]["encrypt_at_rest"] = encrypt
    if disk:
        body["tiers"]["no_persistent_storage"] = False
        body["tiers"]["local_disk"] = {"enabled": True, "size_gib": 200.0, "path": "/nvme/kv"}
    body["failure"]["ram_full"] = ram_full
    body["evidence"] = {"params": {"model": "llama-3.1-8b", "kv_dtype": "bf16", "tp": 2},
                        "block_tokens": 256}  # fmt: skip
    return body


def _render(kind: str, body: dict, route: str | None = None) -> str:
    return exports.render(exports.KINDS[kind][1], body, dict(META, scope=body["scope"]), route)


# --- the engines' parsers, and the documented keys -----------------------------------------
def _known(table: str, keys, seen: list) -> None:
    """Every key is one the table cites a document for; the keys are counted as seen."""
    for key in keys:
        assert key in KNOBS[table], f"{key!r} is not in knobs {table!r}"
        seen.append((table, key))


def _commands(text: str) -> list[tuple[dict[str, str], list[str]]]:
    """Each command line as (its NAME=value environment, its words), as a shell reads it."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line)
        env = {}
        while "=" in words[0] and not words[0].startswith("-"):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        out.append((env, words))
    return out


def _flags(words: list[str]) -> dict[str, str | None]:
    """--flag value pairs (None for a switch); the positional words are left out."""
    out, i = {}, 0
    while i < len(words):
        if words[i].startswith("--"):
            has_value = i + 1 < len(words) and not words[i + 1].startswith("--")
            out[words[i]] = words[i + 1] if has_value else None
            i += 2 if has_value else 1
        else:
            i += 1
    return out


def _kv_transfer(flags: dict, seen: list) -> dict:
    config = json.loads(flags["--kv-transfer-config"])
    _known("vllm_kv_transfer_config", config, seen)
    assert config["kv_connector"] in KV_CONNECTORS
    extra = config.get("kv_connector_extra_config") or {}
    tables = {"LMCacheMPConnector": "lmcache_mp_connector",
              "OffloadingConnector": "vllm_offloading_connector"}  # fmt: skip
    table = tables.get(config["kv_connector"])
    assert table or not extra
    if table:
        _known(table, extra, seen)
    for tier in extra.get("secondary_tiers") or []:
        _known("vllm_offloading_fs_tier", tier, seen)
    return config


def _check_command(env: dict, words: list[str], seen: list) -> None:
    flags = _flags(words)
    if words[:2] == ["vllm", "serve"]:
        _known("lmcache_env" if "LMCACHE_CONFIG_FILE" in env else "dynamo_env", env, seen)
        _known("vllm_serve", flags, seen)
        if "--kv-transfer-config" in flags:
            _kv_transfer(flags, seen)
    elif words[:2] == ["lmcache", "server"]:
        _known("lmcache_server", flags, seen)
        if "--l2-adapter" in flags:
            adapter = json.loads(flags["--l2-adapter"])
            _known("lmcache_l2_fs", adapter, seen)
            _known("lmcache_serde_aesgcm", adapter.get("serde") or {}, seen)
    elif words[:3] == ["lmcache", "quota", "set"]:
        _known("lmcache_quota", flags, seen)
    else:
        assert words[:3] == ["python", "-m", "sglang.launch_server"], words
        _known("sglang_env", env, seen)
        _known("sglang_launch_server", flags, seen)


def _check_helm(values: dict, seen: list) -> None:
    _known("helm_values", values, seen)
    _known("helm_serving_engine_spec", values["servingEngineSpec"], seen)
    _known("helm_router_spec", values.get("routerSpec") or {}, seen)
    for spec in values["servingEngineSpec"]["modelSpec"]:
        _known("helm_model_spec", spec, seen)
        _known("helm_vllm_config", spec["vllmConfig"], seen)
        _known("vllm_serve", _flags(spec["vllmConfig"]["extraArgs"]), seen)
        _known("helm_lmcache_config", spec["lmcacheConfig"], seen)
        _known("helm_env", [e["name"] for e in spec.get("env") or []], seen)


def knobs_of(kind: str, text: str) -> list[tuple[str, str]]:
    """(table, key) of every key the export writes, each checked against exports.knobs."""
    seen: list = []
    if kind == "lmcache.yaml":
        _known("lmcache_yaml", yaml.safe_load(text), seen)
    elif kind == "helm-values.yaml":
        _check_helm(yaml.safe_load(text), seen)
    else:
        for env, words in _commands(text):
            _check_command(env, words, seen)
    return seen


@pytest.mark.parametrize("kind", sorted(exports.KINDS))
@pytest.mark.parametrize("scope,disk,encrypt", [("tenant", True, True), ("global", False, False),
                                                ("user", True, False)])  # fmt: skip
def test_every_export_writes_only_documented_keys(kind, scope, disk, encrypt):
    body = _body(scope=scope, disk=disk, encrypt=encrypt)
    seen = knobs_of(kind, _render(kind, body))
    assert len(seen) >= 5  # the export was read, not skipped


def test_every_key_cites_a_document_of_its_engine():
    for table, keys in KNOBS.items():
        for key, doc in keys.items():
            repo, _, where = doc.partition(" ")
            assert repo.count("/") == 1 and where, (table, key, doc)
            assert where.startswith(("docs/", "vllm/", "python/", "helm/", "PR #")), doc


# --- sizes, in each engine's own units ---------------------------------------------------------
def _by_route(text: str) -> dict[str, tuple[dict, dict]]:
    """Each route's first engine command (its environment and flags) in a shell export."""
    out = {}
    for env, words in _commands(text):
        flags = _flags(words)
        if route := flags.get("--served-model-name"):
            out.setdefault(route, (env, flags))
    return out


def test_each_export_says_the_hand_computed_sizes_in_its_own_units():
    body = _body()
    for route, (ram, disk) in PER_RANK.items():
        lmcache = yaml.safe_load(_render("lmcache.yaml", body, route))  # GB per TP worker
        assert (lmcache["max_local_cpu_size"], lmcache["max_local_disk_size"]) == (ram, disk)
    native = _by_route(_render("vllm-serve.sh", body))
    offload = _by_route(_render("vllm-offload.sh", body))
    sglang = _by_route(_render("sglang-hicache.sh", body))
    dynamo = _by_route(_render("dynamo-kvbm.sh", body))
    server = _render("lmcache-server.sh", body)
    l1 = [_flags(w)["--l1-size-gb"] for _, w in _commands(server) if w[:2] == ["lmcache", "server"]]
    assert l1 == ["64", "28"]  # GB over the replica's 2 ranks, route by route
    for route, (ram, disk) in PER_RANK.items():
        # vLLM: GiB over the 2 TP ranks, and the same in bytes for OffloadingConnector
        assert float(native[route][1]["--kv-offloading-size"]) == 2 * ram
        extra = json.loads(offload[route][1]["--kv-transfer-config"])["kv_connector_extra_config"]
        assert extra["cpu_bytes_to_use"] == 2 * ram * GIB
        assert float(sglang[route][1]["--hicache-size"]) == ram  # GB per rank
        env = dynamo[route][0]  # GB per TP worker
        assert (float(env["DYN_KVBM_CPU_CACHE_GB"]), float(env["DYN_KVBM_DISK_CACHE_GB"])) == (
            ram, disk)  # fmt: skip
    specs = yaml.safe_load(_render("helm-values.yaml", body))["servingEngineSpec"]["modelSpec"]
    assert [(s["lmcacheConfig"]["cpuOffloadingBufferSize"],
             s["lmcacheConfig"]["diskOffloadingBufferSize"]) for s in specs] == [
        ("32", "100"), ("14", "43.75")]  # fmt: skip


# --- disk off, scopes, encryption --------------------------------------------------------------
def test_with_the_disk_off_no_engine_is_given_a_disk_tier():
    body = _body(disk=False)
    server = [w for _, w in _commands(_render("lmcache-server.sh", body))]
    assert [w for w in server if w[:2] == ["lmcache", "server"]] and not any(
        "--l2-adapter" in w for w in server)  # fmt: skip
    for _, words in _commands(_render("sglang-hicache.sh", body)):
        assert "--enable-hierarchical-cache" in words and "--hicache-storage-backend" not in words
    for env, _ in _commands(_render("dynamo-kvbm.sh", body)):
        assert set(env) == {"DYN_KVBM_CPU_CACHE_GB"}
    for _, words in _commands(_render("vllm-offload.sh", body)):
        extra = json.loads(_flags(words)["--kv-transfer-config"])["kv_connector_extra_config"]
        assert "secondary_tiers" not in extra and "spec_name" not in extra
    assert yaml.safe_load(_render("lmcache.yaml", body))["local_disk"] is None
    for spec in yaml.safe_load(_render("helm-values.yaml", body))["servingEngineSpec"]["modelSpec"]:
        assert "diskOffloadingBufferSize" not in spec["lmcacheConfig"] and "env" not in spec
    # and with it on, each names it
    body = _body(disk=True)
    sglang = _commands(_render("sglang-hicache.sh", body))
    for env, words in sglang:
        assert env == {"SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR": "/nvme/kv"}
        assert _flags(words)["--hicache-storage-backend"] == "file"
    adapter = json.loads(
        _flags(_commands(_render("lmcache-server.sh", body))[0][1])["--l2-adapter"]
    )
    assert adapter == {"type": "fs", "base_path": "/nvme/kv"}  # no serde: not encrypted


def test_a_tenant_scope_isolates_per_salt_with_a_quota_per_tenant_and_names_the_salt():
    text = _render("lmcache-server.sh", _body(scope="tenant"))
    commands = [w for _, w in _commands(text)]
    assert {_flags(w)["--eviction-policy"] for w in commands if w[1] == "server"} == {"IsolatedLRU"}
    quotas = [(w[3], _flags(w)["--limit-gb"]) for w in commands if w[1:3] == ["quota", "set"]]
    # each route's server splits its L1 evenly, down to 0.01 GB: 64 / 3 = 21.33, 28 / 3 = 9.33
    assert quotas == [(t, "21.33") for t in TENANTS] + [(t, "9.33") for t in TENANTS]
    salt = ('# every request must carry "cache_salt" = the id of the request\'s tenant (one '
            "of: acme, globex, initech), set by the gateway")  # fmt: skip
    for kind in ("vllm-serve.sh", "vllm-offload.sh", "lmcache-server.sh", "dynamo-kvbm.sh"):
        assert salt in _render(kind, _body(scope="tenant")), kind
    # a user scope isolates too, but the policy lists no users: no quota, said as a gap
    text = _render("lmcache-server.sh", _body(scope="user"))
    assert "--eviction-policy IsolatedLRU" in text
    assert not [w for _, w in _commands(text) if w[1:3] == ["quota", "set"]]
    assert '"cache_salt" = the id of the request\'s user' in text
    assert "GAP LMCache server: scope: IsolatedLRU needs a quota per salt and the policy " \
        "lists no users" in text  # fmt: skip
    # global: one LRU, no quota, no salt
    for kind in exports.KINDS:
        assert 'cache_salt" =' not in _render(kind, _body(scope="global")), kind
    text = _render("lmcache-server.sh", _body(scope="global"))
    assert "--eviction-policy LRU " in text and "quota set" not in text


def test_encryption_at_rest_is_the_servers_aesgcm_serde_and_a_gap_elsewhere():
    body = _body(encrypt=True)
    text = _render("lmcache-server.sh", body)
    adapter = json.loads(_flags(_commands(text)[0][1])["--l2-adapter"])
    assert adapter["serde"] == {"type": "aesgcm", "master_key_path": "/etc/lmcache/l2-master-key"}
    fields = {(g.engine, g.field) for g in exports.gaps(body)}
    assert {e for e, f in fields if f == "tiers.encrypt_at_rest"} == {
        "LMCache", "vLLM", "SGLang HiCache", "Dynamo KVBM", "production-stack Helm"}  # fmt: skip
    # nothing to encrypt without a persistent tier, and no serde when not asked
    unencrypted = exports.gaps(_body(disk=False, encrypt=True))
    assert not any(g.field == "tiers.encrypt_at_rest" for g in unencrypted)
    assert '"serde"' not in _render("lmcache-server.sh", _body(encrypt=False))


# --- gaps ---------------------------------------------------------------------------------------
EXPORT_ENGINES = {
    "lmcache.yaml": ["LMCache"],
    "lmcache-server.sh": ["LMCache server"],
    "vllm-serve.sh": ["vLLM", "LMCache"],
    "vllm-offload.sh": ["vLLM"],
    "sglang-hicache.sh": ["SGLang HiCache"],
    "dynamo-kvbm.sh": ["Dynamo KVBM"],
    "helm-values.yaml": ["production-stack Helm"],
}


def test_the_gaps_of_a_tenant_policy_with_a_disk_tier():
    body = _body(ram_full="refuse_store")
    found = {(g.engine, g.field) for g in exports.gaps(body)}
    engines = set(ENGINES)
    assert {e for e, f in found if f == "lifetime_s"} == engines  # no engine has a TTL
    assert {e for e, f in found if f == "failure.ram_full"} == engines  # all evict
    # tenant offboarding: only the LMCache server can (quota delete), for L1, and says its
    # disk copies are not said to go
    offboarding = {e for e, f in found if f == "end_of_life.tenant_offboarding"}
    assert offboarding == engines
    server = {g.field: g.why for g in exports.gaps(body) if g.engine == "LMCache server"}
    assert server["end_of_life.tenant_offboarding"].startswith("lmcache quota delete <salt>")
    assert "lock TTLs, not retention" in server["lifetime_s"] and "PR #4456" in server["lifetime_s"]
    # IsolatedLRU with a quota per named tenant: the one engine with no scope gap
    assert {e for e, f in found if f == "scope"} == engines - {"LMCache server"}
    sglang = next(
        g for g in exports.gaps(body) if g.engine == "SGLang HiCache" and g.field == "scope"
    )
    assert "sglang #37160" in sglang.why
    assert ("LMCache server", "tiers.local_disk.size_gib") in found  # fs adapter: no size
    # a global policy with no disk, LRU and no lifetime leaves only the events
    quiet = _body(scope="global", disk=False)
    quiet["lifetime_s"] = None
    assert {f for _, f in ((g.engine, g.field) for g in exports.gaps(quiet))} == {
        "end_of_life.tenant_offboarding"}  # fmt: skip


def test_each_export_prints_its_engines_gaps():
    body = _body(ram_full="evict_lifetime_first", encrypt=True)
    for kind, engines in EXPORT_ENGINES.items():
        text = _render(kind, body)
        mine = [g for g in exports.gaps(body) if g.engine in engines]
        assert mine, kind
        for gap in mine:
            assert f"#   GAP {gap.engine}: {gap.field}: {gap.why}\n" in text, (kind, gap)
        others = [g for g in exports.gaps(body) if g.engine not in engines]
        assert not any(f"GAP {g.engine}:" in text for g in others), kind


@pytest.mark.django_db(transaction=True)
def test_the_new_exports_download_and_the_sign_off_page_lists_the_gaps(client, analysis, analyst,
                                                                         approver):  # fmt: skip
    def tenants(body):
        body["routes"], body["tenants"] = ["llama-3.1-8b"], ["acme", "globex"]

    version = approved_version(analysis, analyst, approver, tenants)
    client.force_login(analyst)
    page = client.get(reverse("policy_version", args=[version.pk])).content.decode()
    for kind, (content_type, _, label) in exports.KINDS.items():
        url = reverse("policy_export", args=[version.pk, kind])
        assert f'href="{url}' in page and f">{label}</a>" in page
        response = client.get(url)
        assert response.status_code == 200 and response["Content-Type"].startswith(content_type)
        assert response["Content-Disposition"] == f'attachment; filename="exported-v1-{kind}"'
        assert version.digest in response.content.decode()
        knobs_of(kind, response.content.decode())
        assert AuditEvent.objects.latest("pk").details["kind"] == kind
    signoff = client.get(reverse("policy_signoff", args=[version.pk])).content.decode()
    assert "What the engines cannot enforce" in signoff
    gaps = exports.gaps(version.body)
    assert len(gaps) == signoff.count("<tr data-gap>") > 0
    for gap in gaps:
        assert f"<td>{gap.engine}</td><td><code>{gap.field}</code></td><td>{escape(gap.why)}</td>" \
            in signoff  # fmt: skip


def test_with_a_fleet_every_new_export_gives_each_replica_its_engine():
    body = _body()
    routers = [{"router": "round_robin", "ceiling": 0.5, "hit_ratio": 0.4, "ram_bytes": 1,
                "per_rank_bytes": 1}]  # fmt: skip
    body["evidence"]["fleet"] = {"replicas": 3, "router": "round_robin", "picked": True,
                                 "routers": routers}  # fmt: skip
    for kind, first in [("lmcache-server.sh", ["lmcache", "server"]),
                        ("vllm-offload.sh", ["vllm", "serve"]),
                        ("sglang-hicache.sh", ["python", "-m"]),
                        ("dynamo-kvbm.sh", ["vllm", "serve"])]:  # fmt: skip
        text = _render(kind, body)
        engines = [w for _, w in _commands(text) if w[:2] == first]
        assert len(engines) == 3 * len(ROUTES), kind  # each route on each of 3 replicas
        assert text.count("# replica 3 of 3\n") == len(ROUTES), kind
        assert "every size is per replica" in text, kind
    # the quotas are set on every replica's server
    quotas = [
        w for _, w in _commands(_render("lmcache-server.sh", body)) if w[1:3] == ["quota", "set"]
    ]
    assert len(quotas) == 3 * len(ROUTES) * len(TENANTS)
