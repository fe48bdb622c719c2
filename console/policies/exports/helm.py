"""production-stack Helm values (helm/values.yaml, helm/templates/deployment-vllm-multi.yaml):
servingEngineSpec.modelSpec[].lmcacheConfig.{enabled, cpuOffloadingBufferSize,
diskOffloadingBufferSize} (GB, per worker: production-stack maps them to LMCACHE_*) and
vllmConfig.{enablePrefixCaching, tensorParallelSize, extraArgs}, with a fleet
modelSpec[].replicaCount and routerSpec.routingLogic. The engines run the in-process
LMCache connector, so its gaps are Helm's.
"""

from __future__ import annotations

import yaml

from console.policies.exports.common import comments, header, notes, num, salt_lines, sizes
from console.policies.exports.gaps import HELM, gap_lines
from console.policies.exports.vllm import vllm_args
from console.policies.fleet import ROUTING_LOGIC, policy_fleet


def helm_values(body: dict, meta: dict) -> str:
    """production-stack values: one modelSpec per governed route."""
    disk_tier = body["tiers"]["local_disk"]
    fleet = policy_fleet(body)
    specs, route_notes = [], []
    for s, ram, disk in sizes(body):
        lmcache: dict = {
            "enabled": ram is not None,
            "cpuOffloadingBufferSize": num(ram.per_rank) if ram else "0",
        }
        if disk:
            lmcache["diskOffloadingBufferSize"] = num(disk.per_rank)
        spec = {
            "name": s.route.replace("/", "-").replace(".", "-").lower()[:50],
            "modelURL": s.model,
            "requestGPU": s.tp,
            "vllmConfig": {
                "enablePrefixCaching": True,
                "tensorParallelSize": s.tp,
                # vllmConfig.dtype is the weights' dtype; the KV cache's goes as an argument
                "extraArgs": vllm_args(s)[2:],
            },
            "lmcacheConfig": lmcache,
        }
        if fleet:  # production-stack: that many identical engine pods of this model
            spec["replicaCount"] = fleet["replicas"]
        if disk:
            spec["env"] = [{"name": "LMCACHE_LOCAL_DISK", "value": f"file://{disk_tier['path']}"}]
        specs.append(spec)
        route_notes += notes(s, ram, disk)
    values: dict = {"servingEngineSpec": {"modelSpec": specs}}
    if fleet:
        values["routerSpec"] = {"routingLogic": ROUTING_LOGIC[fleet["router"]]}
    text = comments(header(meta, body) + salt_lines(body) + gap_lines(body, HELM) + route_notes)
    text += "# buffer sizes are GB per worker (production-stack maps them to LMCACHE_*)"
    text += " of each replica" if fleet else ""
    pooled = fleet is not None and fleet["router"] == "pooled"
    text += ": its share of the pooled store\n" if pooled else "\n"
    return text + yaml.safe_dump(values, sort_keys=False)
