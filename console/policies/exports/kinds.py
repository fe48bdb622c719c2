"""The export kinds an approved version offers: the file name in its URL, its content
type, the name export_text knows it by and the label of its link."""

from __future__ import annotations

from collections.abc import Callable

from console.policies.exports.dynamo import dynamo_kvbm
from console.policies.exports.helm import helm_values
from console.policies.exports.lmcache import lmcache_yaml
from console.policies.exports.lmcache_server import lmcache_server
from console.policies.exports.sglang import sglang_hicache
from console.policies.exports.vllm import vllm_flags, vllm_offload

SHELL, YAML = "text/x-shellscript", "application/yaml"
# file name in the URL: (content type, export name, link label), in the page's order
KINDS: dict[str, tuple[str, str, str]] = {
    "lmcache.yaml": (YAML, "lmcache", "LMCache YAML"),
    "lmcache-server.sh": (SHELL, "lmcache-server", "LMCache server"),
    "vllm-serve.sh": (SHELL, "vllm", "vLLM flags"),
    "vllm-offload.sh": (SHELL, "vllm-offload", "vLLM OffloadingConnector"),
    "sglang-hicache.sh": (SHELL, "sglang", "SGLang HiCache"),
    "dynamo-kvbm.sh": (SHELL, "dynamo", "Dynamo KVBM"),
    "helm-values.yaml": (YAML, "helm", "Helm values"),
}
_PLAIN: dict[str, Callable[[dict, dict], str]] = {
    "vllm": vllm_flags,
    "vllm-offload": vllm_offload,
    "sglang": sglang_hicache,
    "dynamo": dynamo_kvbm,
    "helm": helm_values,
}


def render(name: str, body: dict, meta: dict, route: str | None = None) -> str:
    """The text of export `name` (KINDS) for a signed body; LMCache YAML of `route`'s file.
    LMCache's chunk is the analysis's block: what the sizes counted in."""
    chunk_size = (body.get("evidence") or {}).get("block_tokens") or 256
    if name == "lmcache":
        return lmcache_yaml(body, meta, chunk_size=chunk_size, route=route)
    if name == "lmcache-server":
        return lmcache_server(body, meta, chunk_size=chunk_size)
    return _PLAIN[name](body, meta)
