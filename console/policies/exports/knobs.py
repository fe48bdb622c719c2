"""Every key and flag an export may write, per engine, with the document that defines it.

A plain table (no logic beyond a look-up), so a test can check each export against it and
a drift checker can read a deployed configuration's keys against the same list. Each value
is where the key is documented: the repository and the path in it (shared/docs/engines.md
sections 2-5 and 9 cite the same files), or a pull request where a feature has not reached
the documentation yet. The exporters write no key that is not here.
"""

from __future__ import annotations

LMCACHE_CONFIG = "LMCache/LMCache docs/source/api_reference/configurations.rst"
LMCACHE_MP = "LMCache/LMCache docs/source/mp/configuration.rst"
LMCACHE_QUOTA = "LMCache/LMCache docs/source/cli/quota.rst"
LMCACHE_FS = "LMCache/LMCache docs/source/mp/l2_storage/fs.rst"
LMCACHE_SERDE = "LMCache/LMCache docs/source/mp/serde.rst"
LMCACHE_AESGCM = "LMCache/LMCache PR #4235 (the aesgcm serde of docs/source/mp/serde.rst)"
VLLM_CACHE = "vllm-project/vllm vllm/config/cache.py"
VLLM_ARGS = "vllm-project/vllm vllm/engine/arg_utils.py"
VLLM_KV_TRANSFER = "vllm-project/vllm vllm/config/kv_transfer.py"
VLLM_OFFLOADING = "vllm-project/vllm docs/features/kv_offloading_usage.md"
VLLM_PREFIX = "vllm-project/vllm docs/design/prefix_caching.md"
SGLANG_ARGS = "sgl-project/sglang docs/advanced_features/server_arguments.md"
SGLANG_HICACHE = "sgl-project/sglang docs/advanced_features/hicache_best_practices.md"
SGLANG_FILE = "sgl-project/sglang python/sglang/srt/mem_cache/hicache_storage.py"
DYNAMO_KVBM = "ai-dynamo/dynamo docs/kvbm"
HELM_VALUES = "vllm-project/production-stack helm/values.yaml"
HELM_DEPLOYMENT = "vllm-project/production-stack helm/templates/deployment-vllm-multi.yaml"

KNOBS: dict[str, dict[str, str]] = {
    # LMCache in-process, the YAML LMCACHE_CONFIG_FILE names
    "lmcache_yaml": {
        "chunk_size": LMCACHE_CONFIG,
        "local_cpu": LMCACHE_CONFIG,
        "max_local_cpu_size": LMCACHE_CONFIG,  # GB per tensor-parallel worker
        "local_disk": LMCACHE_CONFIG,
        "max_local_disk_size": LMCACHE_CONFIG,  # GB per worker
        "remote_url": LMCACHE_CONFIG,
        "cache_policy": LMCACHE_CONFIG,
        "save_unfull_chunk": LMCACHE_CONFIG,
    },
    "lmcache_env": {  # set in front of vllm serve: the YAML above
        "LMCACHE_CONFIG_FILE": LMCACHE_CONFIG,
    },
    # the LMCache multiprocess server: `lmcache server …`
    "lmcache_server": {
        "--chunk-size": LMCACHE_MP,
        "--l1-size-gb": LMCACHE_MP,  # GB for the whole server
        "--eviction-policy": LMCACHE_MP,  # LRU | ARC | IsolatedLRU | noop
        "--l2-adapter": LMCACHE_MP,
    },
    "lmcache_quota": {  # `lmcache quota set <salt> --limit-gb <GB>`
        "--limit-gb": LMCACHE_QUOTA,
    },
    "lmcache_l2_fs": {  # the --l2-adapter JSON of a file-system L2
        "type": LMCACHE_FS,
        "base_path": LMCACHE_FS,
        "serde": LMCACHE_SERDE,
    },
    "lmcache_serde_aesgcm": {  # its "serde": per-cache_salt keys from one master key
        "type": LMCACHE_AESGCM,
        "master_key_path": LMCACHE_AESGCM,
    },
    "lmcache_mp_connector": {  # vLLM's kv_connector_extra_config for LMCacheMPConnector
        "lmcache.mp.host": LMCACHE_MP,
        "lmcache.mp.port": LMCACHE_MP,
    },
    # vLLM
    "vllm_serve": {
        "--tensor-parallel-size": VLLM_ARGS,
        "--served-model-name": VLLM_ARGS,
        "--kv-cache-dtype": VLLM_CACHE,
        "--kv-offloading-size": VLLM_CACHE,  # GiB, the total over TP ranks
        "--kv-offloading-backend": VLLM_CACHE,
        "--prefix-caching-hash-algo": VLLM_CACHE,
        "--kv-transfer-config": VLLM_KV_TRANSFER,
    },
    "vllm_kv_transfer_config": {
        "kv_connector": VLLM_KV_TRANSFER,
        "kv_role": VLLM_KV_TRANSFER,
        "kv_connector_module_path": VLLM_KV_TRANSFER,
        "kv_connector_extra_config": VLLM_KV_TRANSFER,
    },
    "vllm_offloading_connector": {  # OffloadingConnector's kv_connector_extra_config
        "cpu_bytes_to_use": VLLM_OFFLOADING,  # bytes, the total over TP ranks
        "eviction_policy": VLLM_OFFLOADING,
        "store_threshold": VLLM_OFFLOADING,
        "spec_name": VLLM_OFFLOADING,
        "secondary_tiers": VLLM_OFFLOADING,
    },
    "vllm_offloading_fs_tier": {  # one of its secondary_tiers
        "type": VLLM_OFFLOADING,
        "root_dir": VLLM_OFFLOADING,
    },
    "vllm_request": {  # the request body field a tenant or user scope needs
        "cache_salt": VLLM_PREFIX,
    },
    # SGLang: `python -m sglang.launch_server …`
    "sglang_launch_server": {
        "--model-path": SGLANG_ARGS,
        "--tp-size": SGLANG_ARGS,
        "--served-model-name": SGLANG_ARGS,
        "--kv-cache-dtype": SGLANG_ARGS,
        "--enable-hierarchical-cache": SGLANG_ARGS,
        "--hicache-size": SGLANG_ARGS,  # GB per rank, overrides --hicache-ratio
        "--hicache-write-policy": SGLANG_HICACHE,
        "--hicache-storage-backend": SGLANG_HICACHE,
    },
    "sglang_env": {
        "SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR": SGLANG_FILE,
    },
    # NVIDIA Dynamo KVBM, through vLLM's DynamoConnector
    "dynamo_env": {
        "DYN_KVBM_CPU_CACHE_GB": DYNAMO_KVBM,  # GB per TP worker
        "DYN_KVBM_DISK_CACHE_GB": DYNAMO_KVBM,
        "DYN_KVBM_DISK_CACHE_DIR": DYNAMO_KVBM,
    },
    # production-stack Helm values
    "helm_values": {
        "servingEngineSpec": HELM_VALUES,
        "routerSpec": HELM_VALUES,
    },
    "helm_serving_engine_spec": {"modelSpec": HELM_VALUES},
    "helm_router_spec": {"routingLogic": HELM_VALUES},
    "helm_model_spec": {
        "name": HELM_VALUES,
        "modelURL": HELM_VALUES,
        "requestGPU": HELM_VALUES,
        "replicaCount": HELM_VALUES,
        "vllmConfig": HELM_VALUES,
        "lmcacheConfig": HELM_DEPLOYMENT,
        "env": HELM_DEPLOYMENT,
    },
    "helm_vllm_config": {
        "enablePrefixCaching": HELM_VALUES,
        "tensorParallelSize": HELM_VALUES,
        "extraArgs": HELM_VALUES,
    },
    "helm_lmcache_config": {
        "enabled": HELM_DEPLOYMENT,
        "cpuOffloadingBufferSize": HELM_DEPLOYMENT,  # GB per worker
        "diskOffloadingBufferSize": HELM_DEPLOYMENT,
    },
    "helm_env": {"LMCACHE_LOCAL_DISK": HELM_DEPLOYMENT},
}

# the values of kv_connector an export names, each where it is documented
KV_CONNECTORS = {
    "LMCacheConnectorV1": "LMCache/LMCache docs/source/mp/quickstart.rst",
    "LMCacheMPConnector": LMCACHE_MP,
    "OffloadingConnector": VLLM_OFFLOADING,
    "DynamoConnector": DYNAMO_KVBM,
}


def cited(table: str, key: str) -> str:
    """Where a key is documented (KeyError: an export may not write it)."""
    return KNOBS[table][key]
