"""The three memory budgets of a serving node, side by side: model weights and the active
sequences' KV on the GPUs, and the reusable blocks kept in host RAM."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.profiles import DTYPE_BYTES, KVProfile

WEIGHT_DTYPE_BYTES = {**DTYPE_BYTES, "int8": 1, "int4": 0.5}


@dataclass(frozen=True)
class ServingShape:
    """How the model is served: what the GPUs must hold besides reusable blocks."""

    gpu_memory_bytes: int  # per GPU
    gpus: int = 1  # GPUs holding one replica (tensor parallel ranks)
    weight_dtype: str = "bf16"
    params: float | None = None  # parameter count; None: the profile's
    concurrent_sequences: int = 32
    context_tokens: int = 8192  # per active sequence

    def validate(self) -> None:
        if self.weight_dtype not in WEIGHT_DTYPE_BYTES:
            known = ", ".join(WEIGHT_DTYPE_BYTES)
            raise ValueError(f"unknown weight dtype {self.weight_dtype!r} (known: {known})")
        if self.gpu_memory_bytes <= 0 or self.gpus < 1:
            raise ValueError("GPU memory and GPU count must be positive")
        if self.concurrent_sequences < 0 or self.context_tokens < 0:
            raise ValueError("concurrent sequences and context must not be negative")


def memory_budgets(
    shape: ServingShape, profile: KVProfile, kv_bytes_per_token: int, host_reusable_bytes: int
) -> dict:
    """Bytes of each budget, per replica, and what is left on the GPUs."""
    params = shape.params if shape.params is not None else profile.params
    weights = round(params * WEIGHT_DTYPE_BYTES[shape.weight_dtype])
    active_kv = shape.concurrent_sequences * shape.context_tokens * kv_bytes_per_token
    gpu_total = shape.gpu_memory_bytes * shape.gpus
    return {
        "weights_bytes": weights,
        "active_kv_bytes": active_kv,
        "host_reusable_bytes": host_reusable_bytes,
        "gpu_total_bytes": gpu_total,
        "gpu_free_bytes": gpu_total - weights - active_kv,
        "gpu_fits": weights + active_kv <= gpu_total,
        "params": params,
        "weight_dtype": shape.weight_dtype,
        "concurrent_sequences": shape.concurrent_sequences,
        "context_tokens": shape.context_tokens,
        "gpus": shape.gpus,
    }
