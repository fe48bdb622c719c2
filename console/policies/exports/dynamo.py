"""NVIDIA Dynamo KVBM behind vLLM (ai-dynamo/dynamo docs/kvbm): the host tier is
DYN_KVBM_CPU_CACHE_GB (GB per TP worker: the leader sizes its blocks from one worker's
layout and every worker allocates them), the disk tier DYN_KVBM_DISK_CACHE_GB in
DYN_KVBM_DISK_CACHE_DIR (needs the host tier; absent: no disk tier), and vLLM loads the
connector with --kv-transfer-config '{"kv_connector":"DynamoConnector",
"kv_connector_module_path":"kvbm.vllm_integration.connector","kv_role":"kv_both"}'. Each
command carries its environment in front, as `NAME=value … vllm serve …`.
"""

from __future__ import annotations

import json
import shlex

from console.policies.exports.common import (
    env_word,
    header,
    notes,
    num,
    per_replica,
    replicas,
    salt_lines,
    sizes,
)
from console.policies.exports.gaps import DYNAMO, gap_lines
from console.policies.exports.vllm import hash_args, vllm_args

DYNAMO_CONNECTOR = {
    "kv_connector": "DynamoConnector",
    "kv_connector_module_path": "kvbm.vllm_integration.connector",
    "kv_role": "kv_both",
}


def kvbm_env(body: dict, ram, disk) -> list[str]:
    """The KVBM variables of a route (no disk variables when the disk tier is off)."""
    env = [env_word("DYN_KVBM_CPU_CACHE_GB", num(ram.per_rank))] if ram else []
    if ram and disk:  # KVBM offloads to disk through host memory
        path = body["tiers"]["local_disk"]["path"]
        env += [
            env_word("DYN_KVBM_DISK_CACHE_GB", num(disk.per_rank)),
            env_word("DYN_KVBM_DISK_CACHE_DIR", path),
        ]
    return env


def dynamo_kvbm(body: dict, meta: dict) -> str:
    """vLLM with KVBM for every governed route (per replica)."""
    opening = header(meta, body) + salt_lines(body) + gap_lines(body, DYNAMO)
    lines = [f"# {line}" for line in opening]
    lines += ["# DYN_KVBM_*_CACHE_GB are GB per TP worker; the tiers mirror the GPU cache "
              "(inclusive), and MLA blocks are kept on every worker"]  # fmt: skip
    fleet, count = replicas(body)
    for s, ram, disk in sizes(body):
        lines += [f"# {line}" for line in notes(s, ram, disk)]
        env = kvbm_env(body, ram, disk)
        if not env:
            lines += [f"# route {s.route}: the policy keeps no host RAM tier: no KVBM"]
            continue
        command = ["vllm", "serve", s.model, *vllm_args(s), *hash_args(body),
                   "--kv-transfer-config", json.dumps(DYNAMO_CONNECTOR)]  # fmt: skip
        if fleet:
            lines += [f"# one command per replica ({count}):"]
        lines += per_replica([" ".join([*env, shlex.join(command)])] * count, fleet)
    return "\n".join(lines) + "\n"
