"""A policy sized on an analysis with a fleet (metrics.md section 8): its RAM tier is per
replica, checked against one node's host budget, and its exports carry the replica count
and the router (Helm replicaCount and routingLogic, one vLLM command per replica, LMCache
per rank), saying which router and why in a comment."""

from __future__ import annotations

import math
import shlex
from fractions import Fraction

import pytest
import yaml
from django.urls import reverse

from console.models import Analysis, JobStatus
from console.policies.body import empty_body
from console.policies.checks import check_body
from console.policies.services import findings_for, policy_create, version_update
from console.policies.signed_exports import export_text
from console.policies.sources import analysis_evidence
from tests.console.factories import PASSWORD, approved_version, complete, form_post, rerun
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1 << 30
REPLICAS = 3
HF_LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def fleet_analysis(analysis, analyst):
    """The chat log's traffic at TP 2 on 3 replicas, behind round robin or prefix-aware
    routing, each on a node of 16 GiB host RAM with 4 GiB for the OS (12 GiB available)."""
    return rerun(analysis, analyst, tp=2, replicas=REPLICAS, routers=["round_robin", "prefix"],
                 host_ram_gib=16, reserve_os_gib=4)  # fmt: skip


def _routers(analysis: Analysis) -> dict[str, dict]:
    return {r["router"]: r for r in analysis.report["fleet"]["routers"]}


def _ceilings(analysis: Analysis) -> dict[str, float]:
    return {router: r["ceiling"] for router, r in _routers(analysis).items()}


def _best(analysis: Analysis) -> str:
    """The router with the highest fleet ceiling (a tie: round robin, reported first)."""
    ceilings = _ceilings(analysis)
    return "prefix" if ceilings["prefix"] > ceilings["round_robin"] else "round_robin"


def _llama(size_gib: float | None = None, router: str | None = None):
    def mutate(body):
        body["routes"] = ["llama-3.1-8b"]  # the analysis's model: per rank = size / TP
        if size_gib is not None:
            body["tiers"]["cpu_ram"]["size_gib"] = size_gib
        if router is not None:
            body["fleet_router"] = router

    return mutate


def _commands(text: str) -> list[list[str]]:
    return [shlex.split(line) for line in text.splitlines() if line and not line.startswith("#")]


def test_a_draft_starts_from_the_best_routers_ram_per_replica(fleet_analysis, analyst):
    version = policy_create(name="fleet", user=analyst, analysis=fleet_analysis)
    best = _best(fleet_analysis)
    per_replica = _routers(fleet_analysis)[best]["recommendation"]["ram_bytes"]
    assert version.body["tiers"]["cpu_ram"]["size_gib"] == round(per_replica / GIB, 2)
    # not the one cache's recommendation (all of the traffic in one RAM)
    assert per_replica != fleet_analysis.report["recommendation"]["ram_bytes"]
    fleet = version.body["evidence"]["fleet"]
    assert (fleet["replicas"], fleet["router"], fleet["picked"]) == (REPLICAS, best, False)
    assert [r["router"] for r in fleet["routers"]] == ["round_robin", "prefix"]


def test_the_recommendation_per_replica_in_every_export(fleet_analysis, analyst, approver):
    best = _best(fleet_analysis)
    per_replica = _routers(fleet_analysis)[best]["recommendation"]["ram_bytes"]
    size = round(per_replica / GIB, 2)  # the draft's prefilled RAM, in GiB
    version = approved_version(fleet_analysis, analyst, approver, _llama(size))
    # each TP rank keeps half of it at TP 2, up to the next 0.01 GB (LMCache's per-rank
    # value); vLLM's --kv-offloading-size is the total over the replica's 2 ranks
    per_rank = math.ceil(Fraction(repr(size)) * 100 / 2) / 100
    total = float(Fraction(repr(per_rank)) * 2)
    vllm = export_text(version, "vllm")
    commands = _commands(vllm)
    native = [c for c in commands if c[:2] == ["vllm", "serve"]]
    lmcache = [c for c in commands if c[0].startswith("LMCACHE_CONFIG_FILE=")]
    assert len(native) == len(lmcache) == REPLICAS  # one command per replica, both ways
    for command in native:
        assert command[2] == HF_LLAMA
        assert command[command.index("--tensor-parallel-size") + 1] == "2"
        assert float(command[command.index("--kv-offloading-size") + 1]) == total
    # each command under its replica's name: the native ones, then the LMCache ones
    assert [line for line in vllm.splitlines() if line.startswith("# replica ")] == [
        f"# replica {i} of {REPLICAS}" for i in range(1, REPLICAS + 1)
    ] * 2
    assert yaml.safe_load(export_text(version, "lmcache"))["max_local_cpu_size"] == per_rank
    spec = yaml.safe_load(export_text(version, "helm"))["servingEngineSpec"]["modelSpec"][0]
    assert spec["lmcacheConfig"]["cpuOffloadingBufferSize"] == f"{per_rank:.2f}".rstrip("0")


def test_helm_and_comments_carry_replicas_and_the_best_router(fleet_analysis, analyst, approver):
    version = approved_version(fleet_analysis, analyst, approver, _llama(10.5))
    helm = export_text(version, "helm")
    values = yaml.safe_load(helm)
    spec = values["servingEngineSpec"]["modelSpec"][0]
    assert spec["replicaCount"] == REPLICAS
    # 10.5 GiB per replica over its 2 ranks: 5.25 GB per worker
    assert spec["lmcacheConfig"] == {"enabled": True, "cpuOffloadingBufferSize": "5.25"}
    best = _best(fleet_analysis)
    logic = {"prefix": "prefixaware", "round_robin": "roundrobin"}[best]
    assert values["routerSpec"] == {"routingLogic": logic}
    words = {"prefix": "prefix-aware", "round_robin": "round robin"}[best]
    ceiling = _routers(fleet_analysis)[best]["ceiling"]
    for kind in ("helm", "vllm", "lmcache"):
        assert (
            f"# fleet: {REPLICAS} replicas behind the {words} router (the highest fleet "
            f"ceiling of round robin, prefix-aware; fleet ceiling {ceiling:.1%}); every size "
            "is per replica" in export_text(version, kind)
        )
    for command in _commands(export_text(version, "vllm"))[:REPLICAS]:
        assert command[command.index("--kv-offloading-size") + 1] == "10.5"


def test_a_router_picked_for_export_is_the_one_exported(fleet_analysis, analyst, approver):
    version = approved_version(fleet_analysis, analyst, approver, _llama(10.5, "round_robin"))
    fleet = version.body["evidence"]["fleet"]
    assert (fleet["router"], fleet["picked"]) == ("round_robin", True)
    helm = export_text(version, "helm")
    assert yaml.safe_load(helm)["routerSpec"] == {"routingLogic": "roundrobin"}
    assert f"# fleet: {REPLICAS} replicas behind the round robin router (picked for export;" in helm


def test_the_router_is_picked_on_the_form(client, fleet_analysis, analyst):
    version = policy_create(name="fleet", user=analyst, analysis=fleet_analysis)
    assert client.login(username=analyst.username, password=PASSWORD)
    data = form_post(version) | {"fleet_router": "round_robin"}
    response = client.post(reverse("policy_edit", args=[version.pk]), data)
    assert response.status_code == 302
    version.refresh_from_db()
    assert version.body["fleet_router"] == "round_robin"
    assert version.body["evidence"]["fleet"]["router"] == "round_robin"
    page = client.get(reverse("policy_version", args=[version.pk])).content.decode()
    assert f"per replica ({REPLICAS} replicas, round robin router" in page
    assert "data-fleet-evidence" in page
    # the analysis's own row is one cache's figures, beside the per-replica tier: said so
    assert "as analyzed) <small data-one-cache>one cache fed all of the traffic</small>" in page
    assert 'title="Recommended RAM: the smallest capacity' in page  # its term, explained
    assert ">Recommended RAM</a>, one cache</th>" in page


def _body(analysis: Analysis, size_gib: float, router: str | None = None) -> dict:
    body = complete(empty_body())
    body["tiers"]["cpu_ram"]["size_gib"] = size_gib
    if router:
        body["fleet_router"] = router
    body["evidence"] = analysis_evidence(analysis, router)
    return body


def _errors(findings) -> str:
    return " | ".join(f.message for f in findings if f.level == "error")


def test_the_ram_tier_is_checked_per_node_against_the_host_budget(fleet_analysis):
    # 3 replicas x 10.5 GiB = 31.5 GiB in all, but each node holds one: 10.5 <= 12 fits
    assert "host budget" not in _errors(check_body(_body(fleet_analysis, 10.5),
                                                   fleet_analysis.report))  # fmt: skip
    assert (
        "CPU RAM 12.5 GiB per replica is above the host budget per node of the linked "
        "analysis (12.0 GiB after reserves)"
        in _errors(check_body(_body(fleet_analysis, 12.5), fleet_analysis.report))
    )


def test_a_router_the_analysis_did_not_model_is_an_error(fleet_analysis):
    findings = check_body(_body(fleet_analysis, 1.0, "session"), fleet_analysis.report)
    assert "did not model the router “session” (round_robin, prefix)" in _errors(findings)


def test_the_rerun_check_reads_the_same_routers_ram_per_replica(fleet_analysis):
    best = _best(fleet_analysis)
    need = _routers(fleet_analysis)[best]["recommendation"]["ram_bytes"]
    size = round(2 * need / GIB, 2)
    findings = check_body(_body(fleet_analysis, size), fleet_analysis.report, 0,
                          fleet_analysis.report)  # fmt: skip
    warnings = " | ".join(f.message for f in findings if f.level == "warning")
    assert (
        f"CPU RAM {size:g} GiB per replica is {(size * GIB - need) / need:.0%} above the "
        f"{need / GIB:.2f} GiB per replica the re-run" in warnings
    )


@pytest.fixture
def session_or_pooled(analysis, analyst):
    """The chat log's traffic at TP 2 on 2 replicas, by session or with a pooled store."""
    return rerun(analysis, analyst, tp=2, replicas=2, routers=["session", "pooled"])


def test_session_routing_not_the_pooled_store_is_the_default(session_or_pooled, analyst,
                                                             approver):  # fmt: skip
    ceilings = _ceilings(session_or_pooled)
    # the pooled store's host store sees the whole stream: no partition of it reuses more
    assert ceilings["pooled"] >= ceilings["session"]
    # yet the sizes default to session routing: a pooled store is exported only when picked
    # (a local cache per replica of its share would deploy round robin)
    helm = export_text(approved_version(session_or_pooled, analyst, approver, _llama(4.0)), "helm")
    assert yaml.safe_load(helm)["routerSpec"] == {"routingLogic": "session"}
    assert "pooled store:" not in helm


def test_session_routing_picked_names_its_session_key(session_or_pooled, analyst, approver):
    version = approved_version(session_or_pooled, analyst, approver, _llama(4.0, "session"))
    helm = export_text(version, "helm")
    assert yaml.safe_load(helm)["routerSpec"] == {"routingLogic": "session"}
    assert "# session routing: set the router's sessionKey" in helm


def test_the_policys_own_rerun_keeps_the_fleet_and_is_checked_per_replica(fleet_analysis,
                                                                          analyst):  # fmt: skip
    version = policy_create(name="fleet", user=analyst, analysis=fleet_analysis)
    body = complete(version.body)
    body["routes"] = ["llama-3.1-8b"]
    body["tiers"]["cpu_ram"]["size_gib"] = 10.5
    version = version_update(version=version, body=body, user=analyst, analysis=fleet_analysis)
    done = wait_for(lambda: Analysis.objects.filter(pk=version.constrained_analysis_id,
                                                    status=JobStatus.DONE).first())  # fmt: skip
    version.refresh_from_db()
    rerun_report = done.report
    # the re-run is the same fleet with the policy's lifetime (1800 s) and scope (tenant)
    assert rerun_report["params"]["fleet"]["replicas"] == REPLICAS
    assert rerun_report["params"]["lifetime_s"] == 1800 and rerun_report["scope"] == "tenant"
    router = version.body["evidence"]["fleet"]["router"]
    need = next(r for r in rerun_report["fleet"]["routers"] if r["router"] == router)[
        "recommendation"]["ram_bytes"]  # fmt: skip
    assert need < 10.5 * GIB / 1.1  # the policy keeps more than the headroom allows
    warnings = " | ".join(f.message for f in findings_for(version) if f.level == "warning")
    assert (
        f"CPU RAM 10.5 GiB per replica is {(10.5 * GIB - need) / need:.0%} "
        f"above the {need / GIB:.2f} GiB per replica "
        "the re-run with the policy's lifetime (1800 s) and scope (tenant) recommends"
    ) in warnings
