"""SGLang HiCache (sgl-project/sglang docs/advanced_features/server_arguments.md and
hicache_best_practices.md): `python -m sglang.launch_server --enable-hierarchical-cache
--hicache-size <GB per rank> --hicache-write-policy write_through`, --hicache-size
overriding --hicache-ratio (host/device, > 1: the host pool must be the larger). A disk
tier is --hicache-storage-backend file under SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR
(python/sglang/srt/mem_cache/hicache_storage.py); with none, no storage backend.
--kv-cache-dtype auto|fp8_e4m3|bfloat16 holds what vLLM's auto|fp8|bfloat16 holds, so the
per-rank sizes are vLLM's.
"""

from __future__ import annotations

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
from console.policies.exports.gaps import SGLANG, gap_lines
from console.policies.serving import Served

SGLANG_KV_DTYPE = {"fp8": "fp8_e4m3", "bf16": "bfloat16"}


def sglang_kv_dtype(s: Served) -> str:
    if s.kv_dtype == s.model_dtype:
        return "auto"
    return SGLANG_KV_DTYPE.get(s.kv_dtype, "auto")


def sglang_hicache(body: dict, meta: dict) -> str:
    """`sglang.launch_server` with HiCache for every governed route (per replica)."""
    opening = header(meta, body) + salt_lines(body) + gap_lines(body, SGLANG)
    lines = [f"# {line}" for line in opening]
    lines += ["# --hicache-size is GB per TP rank and overrides --hicache-ratio; the host "
              "pool must be larger than the GPU KV pool"]  # fmt: skip
    disk_path = body["tiers"]["local_disk"]["path"]
    fleet, count = replicas(body)
    for s, ram, disk in sizes(body):
        lines += [f"# {line}" for line in notes(s, ram, disk)]
        lines += [f"# route {s.route}: SGLang --kv-cache-dtype {sglang_kv_dtype(s)}"]
        env = [env_word("SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR", disk_path)] if disk else []
        command = ["python", "-m", "sglang.launch_server", "--model-path", s.model,
                   "--tp-size", str(s.tp), "--kv-cache-dtype", sglang_kv_dtype(s)]  # fmt: skip
        if s.model != s.route:
            command += ["--served-model-name", s.route]
        if ram:
            command += ["--enable-hierarchical-cache", "--hicache-size", num(ram.per_rank),
                        "--hicache-write-policy", "write_through"]  # fmt: skip
        else:
            lines += [f"# route {s.route}: the policy keeps no host RAM tier: no HiCache"]
        if ram and disk:
            command += ["--hicache-storage-backend", "file"]
        line = " ".join([*env, shlex.join(command)])
        if fleet:
            lines += [f"# one command per replica ({count}):"]
        lines += per_replica([line] * count, fleet)
    return "\n".join(lines) + "\n"
