"""A pooled store in a policy (metrics.md section 8): never the sizes' default router, since
its per-replica size is a share of one shared store and, exported as a local cache per
replica, deploys a round-robin fleet; when picked, every export says so first. And the
check against the policy's own re-run says when that re-run lacks the sizes' router."""

from __future__ import annotations

import shlex

import pytest
import yaml

from analysis.params import ROUTERS
from console.models import Analysis
from console.policies.body import empty_body
from console.policies.checks import check_body
from console.policies.fleet import fleet_lines, pooled_warning
from console.policies.services import policy_create
from console.policies.signed_exports import export_text
from console.policies.sources import analysis_evidence
from tests.console.factories import approved_version, complete, rerun

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1 << 30
REPLICAS = 3


@pytest.fixture
def every_router(analysis, analyst):
    """The chat log's traffic at TP 2 on 3 replicas, behind every router, the pooled store
    reported first: on a tie of ceilings it would be "the first reported"."""
    routers = ["pooled", *(r for r in ROUTERS if r != "pooled")]
    return rerun(analysis, analyst, tp=2, replicas=REPLICAS, routers=routers)


def _routers(analysis: Analysis) -> dict[str, dict]:
    return {r["router"]: r for r in analysis.report["fleet"]["routers"]}


def _llama(router: str | None = None):
    def mutate(body):
        body["routes"] = ["llama-3.1-8b"]
        body["tiers"]["cpu_ram"]["size_gib"] = 2.0
        if router is not None:
            body["fleet_router"] = router

    return mutate


def test_with_every_router_the_default_is_the_best_local_router(every_router, analyst):
    routers = _routers(every_router)
    ceilings = {name: r["ceiling"] for name, r in routers.items()}
    # the premise: the pooled store's host store sees the whole stream, so its ceiling is the
    # single cache's, at or above every partition of the stream
    assert ceilings["pooled"] == every_router.report["recommendation"]["ceiling"]
    assert ceilings["pooled"] >= max(ceilings["round_robin"], ceilings["session"],
                                     ceilings["prefix"])  # fmt: skip
    assert every_router.report["fleet"]["routers"][0]["router"] == "pooled"
    # by hand: the highest ceiling of the three a local cache per replica deploys, the first
    # reported on a tie
    best = "round_robin"
    for router in ("session", "prefix"):
        if ceilings[router] > ceilings[best]:
            best = router
    version = policy_create(name="fleet", user=analyst, analysis=every_router)
    fleet = version.body["evidence"]["fleet"]
    assert (fleet["router"], fleet["picked"]) == (best, False)
    # the draft's RAM is that router's per-replica recommendation, not the pooled store's
    per_replica = routers[best]["recommendation"]["ram_bytes"]
    assert version.body["tiers"]["cpu_ram"]["size_gib"] == round(per_replica / GIB, 2)


def test_the_default_exports_deploy_that_local_router(every_router, analyst, approver):
    ceilings = {name: r["ceiling"] for name, r in _routers(every_router).items()}
    best = max(("round_robin", "session", "prefix"), key=lambda r: ceilings[r])
    version = approved_version(every_router, analyst, approver, _llama())
    helm = export_text(version, "helm")
    logic = {"round_robin": "roundrobin", "session": "session", "prefix": "prefixaware"}[best]
    assert yaml.safe_load(helm)["routerSpec"] == {"routingLogic": logic}
    words = {"round_robin": "round robin", "session": "session", "prefix": "prefix-aware"}[best]
    for kind in ("helm", "vllm", "lmcache"):
        text = export_text(version, kind)
        assert "WARNING: pooled store" not in text
        assert (
            f"# fleet: {REPLICAS} replicas behind the {words} router (the highest fleet "
            "ceiling of round robin, session, prefix-aware; a pooled store only when picked; "
            f"fleet ceiling {ceilings[best]:.1%}); every size is per replica" in text
        )


def test_a_pooled_store_picked_is_said_first_in_every_export(every_router, analyst, approver):
    ceilings = {name: r["ceiling"] for name, r in _routers(every_router).items()}
    version = approved_version(every_router, analyst, approver, _llama("pooled"))
    warning = [
        "# WARNING: pooled store: every RAM size in this file is ONE replica's share of a "
        "single host store shared by all 3 replicas (3 x that size in all)",
        "# WARNING: deploy that shared store (Mooncake Store, LMCache remote or P2P, Dynamo "
        "KVBM); set as a local cache on each replica, these sizes give a round-robin fleet",
        f"# WARNING: that round-robin fleet's ceiling is {ceilings['round_robin']:.1%}, not "
        f"the pooled store's {ceilings['pooled']:.1%}",
    ]
    for kind in ("helm", "vllm", "lmcache"):
        assert export_text(version, kind).splitlines()[:3] == warning, kind
    vllm = export_text(version, "vllm")
    # 2 GiB per replica, its share of the 6 GiB store, over its 2 ranks: 1 GiB each
    assert (
        "# native CPU KV offload (--kv-offloading-size is GiB, total over TP ranks, per "
        "replica: its share of the pooled store), one command per replica (3):" in vllm
    )
    native = [shlex.split(line) for line in vllm.splitlines() if line.startswith("vllm serve")]
    assert [c[c.index("--kv-offloading-size") + 1] for c in native] == ["2"] * REPLICAS
    helm = export_text(version, "helm")
    assert yaml.safe_load(helm)["routerSpec"] == {"routingLogic": "roundrobin"}
    spec = yaml.safe_load(helm)["servingEngineSpec"]["modelSpec"][0]
    assert spec["lmcacheConfig"]["cpuOffloadingBufferSize"] == "1"
    assert "of each replica: its share of the pooled store" in helm


def test_evidence_signed_with_a_pooled_default_still_warns_first(every_router):
    # a version signed before this change: its evidence names the pooled store unpicked
    fleet = analysis_evidence(every_router)["fleet"] | {"router": "pooled", "picked": False}
    assert pooled_warning(fleet)[0].startswith("WARNING: pooled store: every RAM size")
    ceiling = _routers(every_router)["pooled"]["ceiling"]
    assert fleet_lines(fleet) == [
        f"fleet: {REPLICAS} replicas behind the pooled store router (signed as the highest "
        f"fleet ceiling: pick a router for export now; fleet ceiling {ceiling:.1%}); every "
        "size is per replica"
    ]


@pytest.fixture
def pooled_only(analysis, analyst):
    """The chat log's traffic at TP 2 on 2 replicas sharing one pooled store, nothing else."""
    return rerun(analysis, analyst, tp=2, replicas=2, routers=["pooled"])


def test_a_pooled_store_alone_is_no_default(pooled_only, analyst):
    version = policy_create(name="fleet", user=analyst, analysis=pooled_only)
    assert version.body["evidence"]["fleet"]["router"] is None
    # the sizes are one cache's: the draft starts from the one cache's recommendation
    single = pooled_only.report["recommendation"]["ram_bytes"]
    assert version.body["tiers"]["cpu_ram"]["size_gib"] == round(single / GIB, 2)
    warnings = [
        f.message
        for f in check_body(complete(version.body), pooled_only.report)
        if f.level == "warning"
    ]
    assert (
        "The linked analysis modelled only a pooled store, which is never the default: the "
        "sizes are for one cache unless you pick the pooled store router (then each "
        "replica's RAM is its share of one shared store)." in warnings
    )


@pytest.fixture
def round_robin_or_prefix(analysis, analyst):
    return rerun(analysis, analyst, tp=2, replicas=REPLICAS, routers=["round_robin", "prefix"])


def _rerun_warnings(body: dict, evidence: dict, rerun_report: dict) -> list[str]:
    findings = check_body(body, evidence, 0, rerun_report)
    return [f.message for f in findings if f.level == "warning"]


def test_a_rerun_without_the_sizes_router_is_said(round_robin_or_prefix, pooled_only,
                                                  analysis):  # fmt: skip
    body = complete(empty_body())
    body["fleet_router"] = "prefix"
    body["evidence"] = analysis_evidence(round_robin_or_prefix, "prefix")
    evidence = round_robin_or_prefix.report
    # a re-run that modelled only the pooled store has no prefix-aware entry to compare with
    assert (
        "The RAM per replica is for the prefix-aware router, but the re-run with the "
        "policy's lifetime and scope did not model the prefix-aware router (pooled store): "
        "the size is not checked against what the policy needs."
        in _rerun_warnings(body, evidence, pooled_only.report)
    )
    # a re-run with no fleet at all
    assert analysis.report["fleet"] is None
    assert (
        "The RAM per replica is for the prefix-aware router, but the re-run with the "
        "policy's lifetime and scope has no fleet: the size is not checked against what the "
        "policy needs." in _rerun_warnings(body, evidence, analysis.report)
    )
