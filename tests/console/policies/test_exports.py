"""Retention policies: the exports (LMCache, vLLM flags, Helm) of every governed route, at
its own per-route sizes."""

from __future__ import annotations

import json
import re
import shlex

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.urls import reverse

from console.models import (
    Analysis,
    AuditEvent,
    JobStatus,
    PolicyVersion,
)
from console.policies.checks import check_body
from console.policies.services import (
    policy_create,
)
from console.policies.signed_exports import export_text
from console.uploads.analyses import analysis_create
from tests.console.factories import (
    PASSWORD,
    approved_version,
    check_report,
    complete,
    form_post,
)
from tests.console.waiting import settled, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1 << 30
# the routes of the chat log, and the Hugging Face repositories an engine loads for them
HF = {"llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct", "qwen2.5-7b": "Qwen/Qwen2.5-7B-Instruct"}


# --- exports -------------------------------------------------------------------------------
def test_lmcache_yaml_export(analysis, analyst, approver):
    def tp4_disk(body):
        body["routes"] = ["llama-3.1-8b"]  # the analysis's model: per rank = total / tp
        body["evidence"] = {}
        body["tiers"]["no_persistent_storage"] = False
        body["tiers"]["local_disk"] = {"enabled": True, "size_gib": 200, "path": "/nvme/kv"}
        # unencrypted blocks on disk: a warning for internal traffic (confidential: an error)
        body["access"]["classification"] = "internal"
        body["disk_contract"] = {"allowed_data": "prefixes >= 4k tokens", "cold_after_s": 600,
                                 "request_may_wait": False, "deleted_by": "the engine",
                                 "delete_when": "at lifetime end", "on_disk_full": "evict",
                                 "on_restart": "wipe"}  # fmt: skip

    version = approved_version(analysis, analyst, approver, tp4_disk)
    text = export_text(version, "lmcache")
    assert f"policy sha256: {version.digest}" in text
    config = yaml.safe_load(text)
    assert config["chunk_size"] == analysis.block_tokens == 256
    assert config["local_cpu"] is True
    tp = analysis.params["tp"]
    assert config["max_local_cpu_size"] == round(8.0 / tp, 2)  # GB per TP worker
    assert config["local_disk"] == "file:///nvme/kv"
    assert config["max_local_disk_size"] == round(200 / tp, 2)
    assert config["remote_url"] is None


def _llama_only(body):
    body["routes"] = ["llama-3.1-8b"]  # the model the analysis sized: sizes as the policy's


def test_vllm_flags_export(analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver, _llama_only)
    lines = [line for line in export_text(version, "vllm").splitlines()
             if not line.startswith("#")]  # fmt: skip
    assert version.digest in export_text(version, "vllm")
    native = shlex.split(lines[0])
    # the first route the policy governs, served by its Hugging Face id under its own name
    route = version.body["routes"][0]
    assert native[:3] == ["vllm", "serve", HF[route]]
    assert native[native.index("--served-model-name") + 1] == route
    size = native[native.index("--kv-offloading-size") + 1]
    assert float(size) == 8.0  # GiB, the total across TP ranks
    assert native[native.index("--kv-offloading-backend") + 1] == "native"
    assert "--prefix-caching-hash-algo" in native  # scope tenant: a cryptographic hash
    lmcache = shlex.split(lines[1])
    assert lmcache[0] == "LMCACHE_CONFIG_FILE=lmcache.yaml"
    connector = json.loads(lmcache[lmcache.index("--kv-transfer-config") + 1])
    assert connector == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


def test_helm_values_export(analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver, _llama_only)
    values = yaml.safe_load(export_text(version, "helm"))
    spec = values["servingEngineSpec"]["modelSpec"][0]
    assert spec["modelURL"] == HF[version.body["routes"][0]]
    assert spec["lmcacheConfig"] == {"enabled": True, "cpuOffloadingBufferSize": "8"}
    assert spec["vllmConfig"]["tensorParallelSize"] == analysis.params["tp"]


def test_exports_need_an_approved_version_and_are_audited(client, analysis, analyst, approver):
    version = policy_create(name="p", user=analyst, analysis=analysis)
    assert client.login(username=analyst.username, password=PASSWORD)
    url = reverse("policy_export", args=[version.pk, "lmcache.yaml"])
    assert client.get(url).status_code == 302  # a draft: refused, back to the page
    approved = approved_version(analysis, analyst, approver, _llama_only)
    wait_for(settled)  # its re-runs' ends are events too (#17): the export's is the newest
    response = client.get(reverse("policy_export", args=[approved.pk, "lmcache.yaml"]))
    assert response.status_code == 200
    assert yaml.safe_load(response.content)["chunk_size"] == 256
    event = AuditEvent.objects.latest("pk")
    assert event.action == "policy.export" and event.details["kind"] == "lmcache.yaml"


# --- exports and checks that match the policy ----------------------------------------------
@pytest.fixture
def fp8_tp2(analysis, analyst):
    """The same traffic sized for an FP8 KV cache at TP 2."""
    params = dict(analysis.params, kv_dtype="fp8", tp=2)
    rerun = analysis_create(upload=analysis.upload, block_tokens=analysis.block_tokens,
                            params=params, user=analyst)  # fmt: skip
    return wait_for(lambda: Analysis.objects.filter(pk=rerun.pk, status=JobStatus.DONE).first())


# Bytes per token by hand (metrics.md sections 5 and 8), for the tests below:
# llama-3.1-8b: 32 layers, 8 KV heads, head_dim 128; qwen2.5-7b: 28 layers, 4 KV heads, 128;
# gemma-2-9b: 42 layers, 8 KV heads, 256; deepseek-v3 (MLA): 61 layers, latent 512 + 64.
LLAMA_FP8_TP2_REPLICA = 32 * (8 // 2) * 128 * 2 * 1 * 2  # 65,536 B per token
QWEN_FP8_TP2_RANK = 28 * (4 // 2) * 128 * 2 * 1  # 14,336
QWEN_BF16_TP4_RANK = 28 * (4 // 4) * 128 * 2 * 2  # 14,336


def test_every_governed_route_is_exported_with_its_model_tp_and_kv_dtype(fp8_tp2, analyst,
                                                                        approver):  # fmt: skip
    def governs_both(body):
        body["routes"] = ["llama-3.1-8b", "qwen2.5-7b"]

    version = approved_version(fp8_tp2, analyst, approver, governs_both)
    assert version.body["evidence"]["params"]["kv_dtype"] == "fp8"
    # 8 GiB for llama at fp8, TP 2 hold 8 GiB / 65,536 B = 131,072 tokens; qwen keeps as
    # many: 131,072 x 14,336 B = 1.75 GiB per rank, 3.5 GiB over its 2 ranks
    tokens = 8 * GIB // LLAMA_FP8_TP2_REPLICA
    assert tokens == 131_072 and tokens * QWEN_FP8_TP2_RANK == 1.75 * GIB
    per_rank = {"llama-3.1-8b": 4.0, "qwen2.5-7b": 1.75}
    commands = [shlex.split(line) for line in export_text(version, "vllm").splitlines()
                if not line.startswith("#")]  # fmt: skip
    assert len(commands) == 4  # native and LMCache, for each route
    pairs = list(zip(commands[::2], commands[1::2], strict=True))
    for route, (native, lmcache) in zip(HF, pairs, strict=True):
        for command in (native, lmcache[1:]):  # lmcache[0] is LMCACHE_CONFIG_FILE=…
            assert command[:3] == ["vllm", "serve", HF[route]]
            assert command[command.index("--served-model-name") + 1] == route
            assert command[command.index("--tensor-parallel-size") + 1] == "2"
            assert command[command.index("--kv-cache-dtype") + 1] == "fp8"
        # replica totals: per rank x 2 ranks
        assert float(native[native.index("--kv-offloading-size") + 1]) == 2 * per_rank[route]
    # the sizes differ, so each route has its own LMCache file (LMCache loads one mapping)
    files = {route: lmcache[0].removeprefix("LMCACHE_CONFIG_FILE=")
             for route, (_, lmcache) in zip(HF, pairs, strict=True)}  # fmt: skip
    assert files == {"llama-3.1-8b": "lmcache-llama-3-1-8b.yaml",
                     "qwen2.5-7b": "lmcache-qwen2-5-7b.yaml"}  # fmt: skip
    for route in HF:
        lmcache_text = export_text(version, "lmcache", route=route)
        (config,) = yaml.safe_load_all(lmcache_text)  # one document
        assert config["max_local_cpu_size"] == per_rank[route]
        assert f"# save as {files[route]}\n# for routes: {route}\n" in lmcache_text
    assert "# route qwen2.5-7b: model Qwen/Qwen2.5-7B-Instruct, TP 2, KV dtype fp8 (vLLM " \
        "--kv-cache-dtype fp8)" in export_text(version, "lmcache", route="qwen2.5-7b")  # fmt: skip
    specs = yaml.safe_load(export_text(version, "helm"))["servingEngineSpec"]["modelSpec"]
    assert [s["modelURL"] for s in specs] == list(HF.values())
    for spec, route in zip(specs, HF, strict=True):
        assert spec["vllmConfig"]["tensorParallelSize"] == spec["requestGPU"] == 2
        assert spec["vllmConfig"]["extraArgs"] == ["--kv-cache-dtype", "fp8",
                                                   "--served-model-name", route]  # fmt: skip
        buffer = f"{per_rank[route]:g}"  # GB per worker: "4", "1.75"
        assert spec["lmcacheConfig"] == {"enabled": True, "cpuOffloadingBufferSize": buffer}


def test_a_route_served_at_its_own_tp_gets_its_own_per_rank_sizes(fp8_tp2, analyst, approver):
    def qwen_at_tp4(body):
        body["routes"] = ["llama-3.1-8b", "qwen2.5-7b"]
        body["serving"] = {"qwen2.5-7b": {"tp": 4, "kv_dtype": "bf16"}}

    version = approved_version(fp8_tp2, analyst, approver, qwen_at_tp4)
    # 131,072 tokens (8 GiB at llama fp8 TP 2) x 14,336 B per qwen bf16 rank at TP 4 (one
    # of its 4 KV heads each) = 1.75 GiB per rank (not 8 / 4 = 2), 7 GiB over 4 ranks
    assert 8 * GIB // LLAMA_FP8_TP2_REPLICA * QWEN_BF16_TP4_RANK == 1.75 * GIB
    llama = yaml.safe_load(export_text(version, "lmcache", route="llama-3.1-8b"))
    qwen = yaml.safe_load(export_text(version, "lmcache", route="qwen2.5-7b"))
    assert (llama["max_local_cpu_size"], qwen["max_local_cpu_size"]) == (4.0, 1.75)
    native = shlex.split(export_text(version, "vllm").splitlines()[-3])
    assert native[native.index("--tensor-parallel-size") + 1] == "4"
    assert native[native.index("--kv-offloading-size") + 1] == "7"
    specs = yaml.safe_load(export_text(version, "helm"))["servingEngineSpec"]["modelSpec"]
    qwen = specs[1]
    assert qwen["requestGPU"] == 4 and qwen["lmcacheConfig"]["cpuOffloadingBufferSize"] == "1.75"
    assert qwen["vllmConfig"]["extraArgs"][:2] == ["--kv-cache-dtype", "auto"]  # its own bf16


# --- per-route sizes (metrics.md section 8), LMCache files, TP and dtype checks -----------
META = {"name": "p", "version": 1, "digest": "d" * 64, "approved_at": "2026-12-01T00:00:00",
        "approved_by": "appr", "lifetime_s": 1800, "scope": "tenant"}  # fmt: skip


def _sized(params: dict, routes: list[str], ram_gib: float, serving: dict | None = None):
    """A complete body whose sizes came from an analysis with these parameters."""
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["routes"], body["serving"] = routes, serving or {}
    body["tiers"]["cpu_ram"]["size_gib"] = ram_gib
    body["evidence"] = {"params": params}
    return body


def _native(text: str, route: str) -> list[str]:
    for line in text.splitlines():
        words = shlex.split(line) if line.startswith("vllm serve") else []
        if words and words[words.index("--served-model-name") + 1] == route:
            return words
    raise AssertionError(route)


def test_an_mla_route_at_more_ranks_keeps_the_whole_latent_on_each():
    from console.policies import exports

    # DeepSeek-V3 sized at TP 1 with 100 GiB; served at TP 8. Every rank keeps the whole
    # latent: 61 x 576 x 2 B per token on each rank, the same as the TP-1 replica, so the
    # same cached tokens need 100 GiB on every rank, 800 GiB over the 8 (not 100 / 8).
    rank = replica = 61 * (512 + 64) * 2
    per_rank_gib = 100 * rank / replica
    body = _sized({"model": "deepseek-v3", "tp": 1}, ["deepseek-v3"], 100.0,
                  {"deepseek-v3": {"tp": 8}})  # fmt: skip
    text = exports.lmcache_yaml(body, META, chunk_size=256)
    config = yaml.safe_load(text)
    assert config["max_local_cpu_size"] == per_rank_gib == 100.0
    assert "# sizes are per tensor-parallel worker (8 ranks)\n" in text
    native = _native(exports.vllm_flags(body, META), "deepseek-v3")
    assert native[native.index("--kv-offloading-size") + 1] == "800"  # 100 x 8 ranks
    spec = yaml.safe_load(exports.helm_values(body, META))["servingEngineSpec"]["modelSpec"][0]
    assert spec["lmcacheConfig"]["cpuOffloadingBufferSize"] == "100"


def test_route_sizes_round_up_and_an_unknown_model_keeps_total_over_tp_with_a_warning():
    from console.policies import exports

    # llama-3.1-8b bf16 TP 1: 32 x 8 x 128 x 2 x 2 = 131,072 B per token; 1.01 GiB of it
    # for gemma-2-9b (42 x 8 x 256 x 2 x 2 = 344,064 B): 1.01 x 344,064 / 131,072 =
    # 2.65125 GiB, up to 2.66 (to the nearest would be 2.65: a route short of 1.25 MiB)
    assert pytest.approx(2.65125) == 1.01 * 344_064 / 131_072
    params = {"model": "llama-3.1-8b", "kv_dtype": "bf16", "tp": 1}
    config = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "hidden_size": 4096, "torch_dtype": "bfloat16"}  # fmt: skip
    body = _sized(params, ["gemma-2-9b"], 1.01)
    text = exports.lmcache_yaml(body, META, chunk_size=256)
    assert yaml.safe_load(text)["max_local_cpu_size"] == 2.66
    # gemma-2-9b is served at TP 1 here: one rank, said in the singular
    assert "# sizes are per tensor-parallel worker (1 rank)\n" in text
    native = _native(exports.vllm_flags(body, META), "gemma-2-9b")
    assert native[native.index("--kv-offloading-size") + 1] == "2.66"
    # sized from a config.json: a route kvscope does not know is served as named, with no
    # profile: 10 GiB / 3 ranks = 3.333…, up to 3.34, the total as it was, and said so
    params = {"model": "config.json", "model_config": config, "tp": 1}
    body = _sized(params, ["acme/chat-8b"], 10.0, {"acme/chat-8b": {"tp": 3}})
    text = exports.lmcache_yaml(body, META, chunk_size=256)
    assert yaml.safe_load(text)["max_local_cpu_size"] == 3.34
    warning = ("# WARNING: route acme/chat-8b: sizes are the policy's total / TP 3 (kvscope "
               "does not know the KV bytes per token of acme/chat-8b; metrics.md section 8 "
               "not applied: check them by hand)")  # fmt: skip
    assert warning in text
    flags = exports.vllm_flags(body, META)
    assert warning in flags
    native = shlex.split(flags.splitlines()[-3])  # served as named: no --served-model-name
    assert native[native.index("--kv-offloading-size") + 1] == "10"
    assert warning in exports.helm_values(body, META)


def test_routes_with_different_lmcache_sizes_get_a_file_each_and_download_it(
    client, fp8_tp2, analyst, approver
):
    def qwen_at_tp4(body):
        body["routes"] = ["llama-3.1-8b", "qwen2.5-7b"]
        body["serving"] = {"qwen2.5-7b": {"tp": 4, "kv_dtype": "bf16"}}

    version = approved_version(fp8_tp2, analyst, approver, qwen_at_tp4)
    wait_for(settled)  # its re-runs' ends are events too (#17): each export's is the newest
    flags = export_text(version, "vllm")
    named = [shlex.split(line)[0] for line in flags.splitlines() if line.startswith("LMCACHE_")]
    assert named == ["LMCACHE_CONFIG_FILE=lmcache-llama-3-1-8b.yaml",
                     "LMCACHE_CONFIG_FILE=lmcache-qwen2-5-7b.yaml"]  # fmt: skip
    client.force_login(analyst)
    page = client.get(reverse("policy_version", args=[version.pk])).content.decode()
    url = reverse("policy_export", args=[version.pk, "lmcache.yaml"])
    assert f'href="{url}?route=llama-3.1-8b"' in page and f'href="{url}?route=qwen2.5-7b"' in page
    assert "LMCache YAML: lmcache-qwen2-5-7b.yaml" in page
    for route, name, size in [("llama-3.1-8b", "lmcache-llama-3-1-8b.yaml", 4.0),
                              ("qwen2.5-7b", "lmcache-qwen2-5-7b.yaml", 1.75)]:  # fmt: skip
        response = client.get(url, {"route": route})
        assert response.status_code == 200
        assert response["Content-Disposition"] == f'attachment; filename="exported-v1-{name}"'
        text = response.content.decode()
        (config,) = yaml.safe_load_all(text)  # one mapping: what LMCache loads
        assert config["max_local_cpu_size"] == size
        assert f"# save as {name}\n" in text
        event = AuditEvent.objects.latest("pk")
        assert event.action == "policy.export" and event.details["kind"] == name
    # the URL as it was: the first route's file, naming the other
    response = client.get(url)
    assert response["Content-Disposition"] == 'attachment; filename="exported-v1-lmcache-' \
        'llama-3-1-8b.yaml"'  # fmt: skip
    text = response.content.decode()
    assert yaml.safe_load(text)["max_local_cpu_size"] == 4.0
    assert "#   lmcache-qwen2-5-7b.yaml for routes: qwen2.5-7b (?route=qwen2.5-7b)" in text
    assert client.get(url, {"route": "nope"}).status_code == 302  # not a governed route


def test_a_tp_that_splits_kv_heads_unevenly_is_an_error_at_the_serving_field(client, analysis,
                                                                              analyst):  # fmt: skip
    version = policy_create(name="p", user=analyst, analysis=analysis)
    before = PolicyVersion.objects.get(pk=version.pk).body
    client.force_login(analyst)
    data = form_post(version) | {"routes": "llama-3.1-8b, qwen2.5-7b",
                                  "serving": "qwen2.5-7b tp=3"}  # fmt: skip
    page = client.post(reverse("policy_edit", args=[version.pk]), data).content.decode()
    found = re.search(r'id="id_serving_error">(.*?)</div>', page, re.S)
    assert found and "Line 1: qwen2.5-7b at tp=3: 3 tensor-parallel ranks cannot share 4 KV " \
        "heads" in found.group(1)  # fmt: skip
    assert PolicyVersion.objects.get(pk=version.pk).body == before
    # the parser on its own, with a route's profile (an unknown route: the analysis's model)
    from console.policies.forms import parse_serving
    from console.policies.serving import route_profile, sizing

    size = sizing({"model": "llama-3.1-8b", "tp": 1})
    profile_of = lambda route: route_profile(route, size)  # noqa: E731
    # 8 KV heads: tp 1, 2, 4, 8 split them, 16 replicates them; 3 and 6 cannot
    assert parse_serving("llama-3.1-8b tp=16\nqwen2.5-7b tp=8", profile_of) == {
        "llama-3.1-8b": {"tp": 16}, "qwen2.5-7b": {"tp": 8}}  # fmt: skip
    message = ("Line 2: chat-prod at tp=6: 6 tensor-parallel ranks cannot share 8 KV heads: "
               "tp must divide 8 or be a multiple of it.")  # fmt: skip
    with pytest.raises(ValidationError, match=re.escape(message)):
        parse_serving("llama-3.1-8b tp=2\nchat-prod tp=6", profile_of)  # served as llama
    assert parse_serving("deepseek-v3 tp=3", profile_of) == {"deepseek-v3": {"tp": 3}}  # MLA
    # a body that says so anyway (not through the form) cannot be submitted
    body = complete(before)
    body["routes"], body["serving"] = ["qwen2.5-7b"], {"qwen2.5-7b": {"tp": 3}}
    errors = [f for f in check_body(body, check_report()) if f.level == "error"]
    assert [(f.field, f.message) for f in errors] == [("serving", "Route “qwen2.5-7b” at TP 3: "
        "3 tensor-parallel ranks cannot share 4 KV heads: tp must divide 4 or be a multiple "
        "of it.")]  # fmt: skip


def test_an_fp32_sizing_that_vllm_serves_as_auto_is_said_and_sized_for_what_it_holds():
    from console.policies import exports

    # sized for an fp32 KV cache: 32 x 8 x 128 x 2 x 4 = 262,144 B per token; vLLM has no
    # fp32 KV cache, "auto" holds the model's bf16 (131,072 B): the 100 GiB of tokens
    # planned fit in 100 x 131,072 / 262,144 = 50 GiB on the engine
    params = {"model": "llama-3.1-8b", "kv_dtype": "fp32", "tp": 1}
    body = _sized(params, ["llama-3.1-8b"], 100.0)
    message = ("Route “llama-3.1-8b” stores KV as fp32, but vLLM has no fp32 KV cache: "
               "--kv-cache-dtype auto holds the model's own bf16 (2 bytes per element, not "
               "4); the exports size it for bf16.")  # fmt: skip
    report = dict(check_report(), params=params)
    assert [(f.level, f.message) for f in check_body(body, report) if f.field == "serving"] \
        == [("warning", message)]  # fmt: skip
    plain = "# WARNING: " + message.replace("“", "").replace("”", "")
    flags = exports.vllm_flags(body, META)
    native = _native(flags, "llama-3.1-8b")
    assert native[native.index("--kv-cache-dtype") + 1] == "auto"
    assert native[native.index("--kv-offloading-size") + 1] == "50"
    for text in (flags, exports.lmcache_yaml(body, META, chunk_size=256),
                 exports.helm_values(body, META)):  # fmt: skip
        assert plain in text
    assert yaml.safe_load(exports.lmcache_yaml(body, META, chunk_size=256))[
        "max_local_cpu_size"] == 50.0  # fmt: skip
