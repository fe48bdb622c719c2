"""Drift check: a deployment of an approved version's own exports is compliant; each edit
names exactly its kind of difference, with the values a person computes from the policy;
files kvscope cannot read say where and why; the page stores, audits and lists a check.

The approved version (factories.approved_version over the chat log's analysis): routes
qwen2.5-7b and llama-3.1-8b, TP 1, bf16, RAM 8.0 GiB sized for llama-3.1-8b, tenant
scope, a 1800 s lifetime, no disk or remote tier. Per route (metrics.md section 8): llama
keeps the policy's 8.0 GiB; qwen2.5-7b keeps as many tokens at its own KV bytes per
token, 28 layers x 2 x 4 KV heads x 128 x 2 bytes = 57,344 against llama's 32 x 2 x 8 x
128 x 2 = 131,072: 8.0 x 57,344 / 131,072 = 3.5 GiB.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from console.models import AuditEvent, DriftCheck
from console.policies.deployed import DeployedError
from console.policies.deployed_read import read_deployment
from console.policies.drift import DriftError, compare
from console.policies.views import export_text
from tests.console.factories import approved_version

pytestmark = pytest.mark.django_db(transaction=True)
LLAMA_GIB, QWEN_GIB = 8.0, 8.0 * 57_344 / 131_072  # 3.5, as the module docstring works out
SALT = " (send a per-tenant cache_salt with every request)"


def _check(version, name: str, text: str, route: str | None = None):
    return compare(read_deployment(name, text), version.body, route)


def _kinds(drift) -> list[str]:
    return [d.kind for d in drift.differences]


@pytest.fixture
def version(analysis, analyst, approver):
    return approved_version(analysis, analyst, approver)


def test_every_export_of_the_approved_version_is_compliant(version):
    assert version.body["routes"] == ["qwen2.5-7b", "llama-3.1-8b"]
    vllm = _check(version, "vllm-serve.sh", export_text(version, "vllm"))
    # per route: the native command and the LMCache one, whose sizes are in its LMCache file
    assert vllm.compliant and vllm.routes == ["qwen2.5-7b", "llama-3.1-8b"]
    assert len(read_deployment("v.sh", export_text(version, "vllm")).records) == 4
    assert any("lmcache-qwen2-5-7b.yaml" in note for note in vllm.notes)
    helm = _check(version, "helm-values.yaml", export_text(version, "helm"))
    assert helm.compliant and helm.notes == [] and helm.routes == version.body["routes"]
    for route in version.body["routes"]:
        text = export_text(version, "lmcache", route=route)
        drift = _check(version, "lmcache.yaml", text, route)
        assert drift.compliant and drift.routes == [route]
    # the routes' sizes differ, so an LMCache file without a route cannot be placed
    with pytest.raises(DriftError, match=re.escape("lmcache-qwen2-5-7b.yaml: qwen2.5-7b; ")):
        _check(version, "lmcache.yaml", export_text(version, "lmcache"))


def _edited(text: str, *changes: tuple[str, str]) -> str:
    """The text with each (old, new) changed once; old must be there (an edit that misses
    would test nothing)."""
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def _unsalted(text: str) -> str:
    """The export without its salt declarations: the header's and the "must carry" line
    (the gaps still name cache_salt, which declares nothing)."""
    text = _edited(text, (SALT, ""))
    kept = [line for line in text.splitlines(keepends=True) if '"cache_salt" =' not in line]
    assert len(kept) < len(text.splitlines()), "the export declares no salt to remove"
    assert "cache_salt" in "".join(kept)  # still named, in a gap: not a declaration
    return "".join(kept)


def _edits(version) -> list[tuple[str, str, str | None, list[str], list[tuple]]]:
    """(what, the export edited, route, kinds, (route, expected, found) of each)."""
    vllm, helm = export_text(version, "vllm"), export_text(version, "helm")
    qwen = export_text(version, "lmcache", route="qwen2.5-7b")
    routes = ["qwen2.5-7b", "llama-3.1-8b"]
    served = "--served-model-name qwen2.5-7b"
    return [
        ("RAM smaller", _edited(vllm, ("size 8 ", "size 6 ")),
         None, ["size"], [("llama-3.1-8b", LLAMA_GIB, 6.0)]),
        # 0.01 GB is the exporter's rounding step: within it the size is the same
        ("RAM 0.01 over", _edited(vllm, ("size 8 ", "size 8.01 ")), None, [], []),
        ("RAM 0.02 over", _edited(vllm, ("size 8 ", "size 8.02 ")),
         None, ["size"], [("llama-3.1-8b", LLAMA_GIB, 8.02)]),
        ("RAM off", _edited(vllm, ("--kv-offloading-size 3.5 --kv-offloading-backend native", "")),
         None, ["size"], [("qwen2.5-7b", QWEN_GIB, 0.0)]),
        ("Helm per worker", _edited(helm, ("BufferSize: '3.5'", "BufferSize: '4'")),
         None, ["size"], [("qwen2.5-7b", QWEN_GIB, 4.0)]),
        ("LMCache per rank", _edited(qwen, ("cpu_size: 3.5", "cpu_size: 2.5")),
         "qwen2.5-7b", ["size"], [("qwen2.5-7b", QWEN_GIB, 2.5)]),
        ("fp8 KV", _edited(vllm, ("1 --kv-cache-dtype auto", "1 --kv-cache-dtype fp8")),
         None, ["dtype"], [("qwen2.5-7b", "bf16", "fp8")]),
        ("TP 2", _edited(vllm, ("--tensor-parallel-size 1", "--tensor-parallel-size 2")),
         None, ["tp"], [("qwen2.5-7b", 1, 2)]),
        ("disk on", _edited(qwen, ("local_disk: null", "local_disk: file:///nvme/kv"),
                            ("max_local_disk_size: 0.0", "max_local_disk_size: 40")),
         "qwen2.5-7b", ["disabled tier enabled"], [("qwen2.5-7b", "off", "on")]),
        ("remote on", _edited(qwen, ("remote_url: null", "remote_url: redis://kv:6379")),
         "qwen2.5-7b", ["disabled tier enabled"], [("qwen2.5-7b", "off", "on")]),
        ("no salt", _unsalted(helm), None, ["scope salt missing"] * 2,
         [(route, "per-tenant cache_salt", "none") for route in routes]),
        # the salt is the file's: said once per route, not once per command (4 here)
        ("no salt, vLLM", _unsalted(vllm), None, ["scope salt missing"] * 2,
         [(route, "per-tenant cache_salt", "none") for route in routes]),
        ("no lifetime", _edited(qwen, ("block lifetime 1800 s, ", "")),
         "qwen2.5-7b", ["lifetime absent"], [("qwen2.5-7b", 1800, None)]),
        ("longer lifetime", _edited(qwen, ("lifetime 1800 s", "lifetime 7200 s")),
         "qwen2.5-7b", ["lifetime"], [("qwen2.5-7b", 1800, 7200.0)]),
        ("another model", _edited(helm, ("modelURL: Qwen/Qwen2.5-7B-Instruct",
                                         "modelURL: mistralai/Mistral-7B-Instruct-v0.3")),
         None, ["model"],
         [("qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3")]),
        ("another route", _edited(vllm, (served, "--served-model-name mistral"),
                                  (served, "--served-model-name mistral")),
         None, ["route not governed"] * 2, [("mistral", routes, "mistral")] * 2),
    ]  # fmt: skip


def test_each_edit_names_exactly_its_difference(version):
    for what, text, route, kinds, values in _edits(version):
        drift = _check(version, "deployed", text, route)
        assert _kinds(drift) == kinds, what
        assert [(d.route, d.expected, d.found) for d in drift.differences] == values, what
    # the differences say what differs, in words
    smaller = _edits(version)[0][1]
    ram = _check(version, "v.sh", smaller).differences[0]
    # the line of the llama command: the one that names it and carries the edited size
    line = next(n for n, text in enumerate(smaller.splitlines(), 1)
                if "llama-3.1-8b" in text and "size 6 " in text)  # fmt: skip
    assert ram.tier == "cpu_ram" and ram.message == (
        f"llama-3.1-8b (line {line}): the CPU RAM tier is 6 GiB in total over the route's TP ranks "
        "(--kv-offloading-size); the policy's is 8 GiB."
    )
    unknown = _check(version, "v.sh", _edits(version)[-1][1]).differences[0]
    assert "is not a route this version governs (it governs qwen2.5-7b, llama-3.1-8b)" in (
        unknown.message
    )


def _with_disk(body: dict) -> None:
    """One route, the analysis's own model (its sizes are the policy's), and a 200 GiB
    disk tier: at TP 1, 200 GiB per rank."""
    body["routes"] = ["llama-3.1-8b"]
    body["tiers"]["no_persistent_storage"] = False
    body["tiers"]["local_disk"] = {"enabled": True, "size_gib": 200, "path": "/nvme/kv"}
    body["tiers"]["encrypt_at_rest"] = True  # confidential traffic on disk must be (checks)
    body["disk_contract"] = {"allowed_data": "prefixes >= 4k tokens", "cold_after_s": 600,
                             "request_may_wait": False, "deleted_by": "the engine",
                             "delete_when": "at lifetime end", "on_disk_full": "evict",
                             "on_restart": "wipe"}  # fmt: skip


def test_a_disk_tier_the_policy_sizes(analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver, _with_disk)
    helm, lmcache = export_text(version, "helm"), export_text(version, "lmcache")
    assert _check(version, "values.yaml", helm).compliant
    assert _check(version, "lmcache.yaml", lmcache).compliant  # one route: no route needed
    # kvscope's own vLLM command offloads to RAM only: a disk allowed, not required
    vllm = _check(version, "vllm.sh", export_text(version, "vllm"))
    assert vllm.compliant and any("allows a local disk tier of 200 GiB" in n for n in vllm.notes)
    smaller = _check(version, "v.yaml", _edited(helm, ("BufferSize: '200'", "BufferSize: '150'")))
    assert [(d.kind, d.tier, d.expected, d.found) for d in smaller.differences] == [
        ("size", "local_disk", 200.0, 150.0)
    ]


def test_an_sglang_line_a_vllm_json_config_and_an_lmcache_server_are_read(version):
    sglang = (
        "# block lifetime 1800 s; requests carry a per-tenant cache_salt\n"
        "python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct \\\n"
        "  --served-model-name qwen2.5-7b --tp-size 1 --enable-hierarchical-cache \\\n"
        "  --hicache-size 3.5\n"
    )
    (record,) = read_deployment("sglang.sh", sglang).records
    assert (record.format, record.route, record.tp, record.line) == (
        "sglang_cli",
        "qwen2.5-7b",
        1,
        2,
    )
    assert (record.ram.size_gib, record.ram.basis, record.lifetime_s) == (3.5, "per_rank", 1800)
    assert _check(version, "sglang.sh", sglang).compliant
    fp8_disk = sglang.replace(
        "3.5\n", "3.5 --kv-cache-dtype fp8_e5m2 --hicache-storage-backend file\n"
    )
    assert _kinds(_check(version, "s.sh", fp8_disk)) == ["dtype", "disabled tier enabled"]

    config = {"model": "meta-llama/Llama-3.1-8B-Instruct", "served_model_name": "llama-3.1-8b",
              "tensor-parallel-size": 1,
              "kv_transfer_config": {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
                                     "kv_connector_extra_config": {"cpu_bytes_to_use": 6 << 30}},
              "comment": "cache_salt per tenant; block lifetime 1800 s"}  # fmt: skip
    deployment = read_deployment("vllm.json", json.dumps(config, indent=1))
    assert deployment.format == "vllm_config"
    drift = compare(deployment, version.body)
    # 6 << 30 bytes is 6 GiB in total; the policy's 8
    assert [(d.kind, d.expected, d.found) for d in drift.differences] == [("size", 8.0, 6.0)]

    server = (
        "lmcache server --l1-size-gb 3.5 --eviction-policy IsolatedLRU  # block lifetime 1800 s\n"
    )
    (record,) = read_deployment("server.sh", server).records
    assert record.salt.startswith("LMCache eviction policy IsolatedLRU")
    assert _check(version, "server.sh", server, "qwen2.5-7b").compliant
    assert _kinds(
        _check(version, "server.sh", server.replace("IsolatedLRU", "LRU"), "qwen2.5-7b")
    ) == ["scope salt missing"]


@pytest.mark.parametrize(
    "name, text, where",
    [
        ("lmcache.yaml", "chunk_size: 256\nmax_local_cpu_size: [3.5\nlocal_disk: null\n",
         "lmcache.yaml, line 3: not valid YAML"),
        ("vllm.json", '{"model": "m",\n "kv-offloading-size": 3,}\n',
         "vllm.json, line 2: not valid JSON"),
        ("run.sh", "# comment\nvllm serve m --kv-transfer-config '{\"a\": 1}\n",
         "run.sh, line 2: cannot split the command line: No closing quotation"),
        ("run.sh", "\nvllm serve m \\\n  --kv-offloading-size lots\n",
         "run.sh, line 2: --kv-offloading-size 'lots' is not a number"),
        ("values.yaml", "servingEngineSpec:\n  modelSpec:\n  - name: a\n    modelURL: m\n"
         "    lmcacheConfig:\n      enabled: true\n      cpuOffloadingBufferSize: 'x8'\n",
         "values.yaml, line 7: lmcacheConfig.cpuOffloadingBufferSize 'x8' is not a number"),
        ("notes.txt", "hello: world\n", "notes.txt: not a configuration kvscope reads"),
        ("empty.yaml", "  \n", "empty.yaml: the file is empty"),
    ],
)  # fmt: skip
def test_a_file_kvscope_cannot_read_says_where_and_why(name, text, where):
    with pytest.raises(DeployedError) as raised:
        read_deployment(name, text)
    assert str(raised.value).startswith(where)


def test_the_page_stores_the_check_audits_it_once_and_lists_it(client, version, analyst, auditor):
    url = reverse("policy_drift_new", args=[version.pk])
    page_url = reverse("policy_version", args=[version.pk])
    client.force_login(auditor)  # auditors read checks; they do not run them
    assert "data-drift-form" not in client.get(page_url).content.decode()
    assert client.post(url, {"text": "vllm serve m"}).status_code == 403
    client.force_login(analyst)
    assert "data-drift-form" in client.get(page_url).content.decode()
    text = export_text(version, "vllm").replace(
        "--kv-offloading-size 8 ", "--kv-offloading-size 6 "
    )
    events = AuditEvent.objects.count()
    upload = SimpleUploadedFile("fleet-a.sh", text.encode())
    response = client.post(url, {"file": upload})
    check = DriftCheck.objects.get()
    assert response.status_code == 302 and response.url == reverse(
        "policy_drift_check", args=[check.pk]
    )
    assert (check.version, check.file_name, check.format, check.compliant) == (
        version, "fleet-a.sh", "vllm_cli", False)  # fmt: skip
    assert check.sha256 == hashlib.sha256(text.encode()).hexdigest() and check.kinds == ["size"]
    (event,) = AuditEvent.objects.order_by("pk")[events:]
    assert (event.action, event.object_type, event.object_id) == (
        "policy.drift_check", "DriftCheck", str(check.pk))  # fmt: skip
    assert event.details["compliant"] is False and event.details["kinds"] == ["size"]
    assert event.details["sha256"] == check.sha256 and event.details["format"] == "vllm_cli"
    result = client.get(response.url).content.decode()
    assert "the CPU RAM tier is 6 GiB in total" in result and check.sha256 in result
    # a compliant paste, listed first on the policy's page
    client.post(url, {"text": export_text(version, "helm")})
    assert DriftCheck.objects.count() == 2 and AuditEvent.objects.count() == events + 2
    page = client.get(page_url).content.decode()
    rows = page.split("data-drift-check=")[1:]
    assert "pasted text" in rows[0] and "Compliant" in rows[0]
    assert "fleet-a.sh" in rows[1] and "1 difference" in rows[1] and "size" in rows[1]
    # a file it cannot read: said on the form, nothing stored, nothing audited
    bad = client.post(url, {"file": SimpleUploadedFile("x.yaml", b"a: [1\nb: 2\n")})
    assert bad.status_code == 400 and "x.yaml, line 2: not valid YAML" in bad.content.decode()
    assert DriftCheck.objects.count() == 2 and AuditEvent.objects.count() == events + 2
    # a route no policy governs (the one command that served llama-3.1-8b at 6 GiB): said so
    other = _edited(text, ("--served-model-name llama-3.1-8b", "--served-model-name mistral"))
    client.post(url, {"text": other})
    (difference,) = DriftCheck.objects.first().differences
    assert difference["kind"] == "route not governed"
    assert difference["message"].endswith("No approved policy governs it.")
