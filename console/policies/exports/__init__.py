"""Serving-engine configuration from an approved policy version: one module per engine
(LMCache in-process and its server, vLLM, SGLang HiCache, Dynamo KVBM, production-stack
Helm), the sizes and header they share (common), the documented keys they may write
(knobs), and what each engine cannot enforce (gaps). Every export carries the policy's
digest in a comment, so a deployed file can be matched to its sign-off.
"""

from console.policies.exports.common import ExportChoice, RouteSize, route_size
from console.policies.exports.dynamo import dynamo_kvbm
from console.policies.exports.gaps import Gap, gaps
from console.policies.exports.helm import helm_values
from console.policies.exports.kinds import KINDS, render
from console.policies.exports.knobs import KNOBS
from console.policies.exports.lmcache import (
    lmcache_config,
    lmcache_file_of,
    lmcache_files,
    lmcache_yaml,
)
from console.policies.exports.lmcache_server import lmcache_server
from console.policies.exports.sglang import sglang_hicache
from console.policies.exports.vllm import vllm_flags, vllm_offload

__all__ = [
    "KINDS",
    "KNOBS",
    "ExportChoice",
    "Gap",
    "RouteSize",
    "dynamo_kvbm",
    "gaps",
    "helm_values",
    "lmcache_config",
    "lmcache_file_of",
    "lmcache_files",
    "lmcache_server",
    "lmcache_yaml",
    "render",
    "route_size",
    "sglang_hicache",
    "vllm_flags",
    "vllm_offload",
]
