"""KV-cache profiles: bytes of KV per token for a model (metrics.md section 5), and what
each tensor-parallel rank keeps of it (section 8, "Per TP rank").

kv_bytes_per_token = layers * kv_heads * head_dim * 2 * bytes_per_element   (GQA/MHA)
kv_bytes_per_token = layers * (kv_lora_rank + qk_rope_head_dim) * bytes      (MLA)
per rank, at tp ranks: layers * max(1, kv_heads // tp) * head_dim * 2 * bytes
                       (MLA: layers * latent * bytes); a replica holds that * tp
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# Bytes per element. FP8 caches (e4m3/e5m2) keep per-tensor scales: a few bytes per layer,
# nothing per token, so they add no per-token metadata.
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
_TORCH_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


@dataclass(frozen=True)
class KVProfile:
    name: str
    layers: int
    kv_heads: int  # key/value heads (GQA), not attention heads; 0 for MLA
    head_dim: int
    dtype: str  # the model's own KV element type
    mla_latent: int = 0  # kv_lora_rank + qk_rope_head_dim for MLA models, else 0
    params: float = 0.0  # parameter count, for the weights budget
    source: str = ""

    @property
    def elements_per_token(self) -> int:
        if self.mla_latent:
            return self.layers * self.mla_latent
        return self.layers * self.kv_heads * self.head_dim * 2

    def element_bytes(self, dtype: str | None = None) -> int:
        kv_dtype = dtype or self.dtype
        if kv_dtype not in DTYPE_BYTES:
            raise ValueError(f"unknown KV dtype {kv_dtype!r} (known: {', '.join(DTYPE_BYTES)})")
        return DTYPE_BYTES[kv_dtype]

    def kv_bytes_per_token(self, dtype: str | None = None) -> int:
        return self.elements_per_token * self.element_bytes(dtype)

    def check_tp(self, tp: int) -> None:
        """vLLM's rule: KV heads are split evenly over the ranks while there are enough
        (kv_heads % tp == 0), replicated past that (tp % kv_heads == 0); any other tp
        leaves ranks with unequal heads, which no engine serves. MLA latents are whole on
        every rank, so any tp is fine."""
        if tp < 1:
            raise ValueError("tp must be at least 1")
        if self.mla_latent or not self.kv_heads:
            return
        if self.kv_heads % tp and tp % self.kv_heads:
            raise ValueError(
                f"{tp} tensor-parallel ranks cannot share {self.kv_heads} KV heads: tp must "
                f"divide {self.kv_heads} or be a multiple of it"
            )

    def kv_bytes_per_token_per_rank(self, tp: int = 1, dtype: str | None = None) -> int:
        """Bytes of KV one tensor-parallel rank keeps per token (metrics.md section 8)."""
        self.check_tp(tp)
        per_element = self.element_bytes(dtype)
        if self.mla_latent:  # every rank keeps the whole latent
            return self.layers * self.mla_latent * per_element
        return self.layers * max(1, self.kv_heads // tp) * self.head_dim * 2 * per_element

    def replica_kv_bytes_per_token(self, tp: int = 1, dtype: str | None = None) -> int:
        """Bytes of KV a replica of tp ranks keeps per token: per rank * tp. More than the
        model's bytes per token for MLA and for kv_heads < tp (metrics.md section 8)."""
        return self.kv_bytes_per_token_per_rank(tp, dtype) * tp

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "layers": self.layers,
            "kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "mla_latent": self.mla_latent,
            "dtype": self.dtype,
            "params": self.params,
            "source": self.source,
        }


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


PRESETS: dict[str, KVProfile] = {
    p.name: p
    for p in (
        KVProfile(
            "llama-3.1-8b", 32, 8, 128, "bf16", params=8.03e9, source=_hf("meta-llama/Llama-3.1-8B")
        ),
        KVProfile(
            "llama-3.1-70b",
            80,
            8,
            128,
            "bf16",
            params=70.6e9,
            source=_hf("meta-llama/Llama-3.1-70B"),
        ),
        KVProfile(
            "llama-3.2-3b", 28, 8, 128, "bf16", params=3.21e9, source=_hf("meta-llama/Llama-3.2-3B")
        ),
        KVProfile(
            "mistral-7b-v0.3",
            32,
            8,
            128,
            "bf16",
            params=7.25e9,
            source=_hf("mistralai/Mistral-7B-v0.3"),
        ),
        KVProfile("qwen2.5-7b", 28, 4, 128, "bf16", params=7.62e9, source=_hf("Qwen/Qwen2.5-7B")),
        KVProfile("qwen2.5-72b", 80, 8, 128, "bf16", params=72.7e9, source=_hf("Qwen/Qwen2.5-72B")),
        KVProfile("qwen3-8b", 36, 8, 128, "bf16", params=8.19e9, source=_hf("Qwen/Qwen3-8B")),
        # Gemma 2 alternates sliding-window (4096) and global layers; engines that keep
        # full-length KV for every layer (prefix caching) store all 42.
        KVProfile("gemma-2-9b", 42, 8, 256, "bf16", params=9.24e9, source=_hf("google/gemma-2-9b")),
        # MLA: one latent of kv_lora_rank (512) + qk_rope_head_dim (64) per layer.
        KVProfile(
            "deepseek-v3",
            61,
            0,
            0,
            "bf16",
            mla_latent=512 + 64,
            params=671e9,
            source=_hf("deepseek-ai/DeepSeek-V3"),
        ),
    )
}

DEFAULT_PROFILE = "llama-3.1-8b"

# The Hugging Face repository a serving engine loads for each preset (the instruct/chat
# release where there is one): what exported engine configurations name.
HF_IDS: dict[str, str] = {
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3.1-70b": "meta-llama/Llama-3.1-70B-Instruct",
    "llama-3.2-3b": "meta-llama/Llama-3.2-3B-Instruct",
    "mistral-7b-v0.3": "mistralai/Mistral-7B-Instruct-v0.3",
    "qwen2.5-7b": "Qwen/Qwen2.5-7B-Instruct",
    "qwen2.5-72b": "Qwen/Qwen2.5-72B-Instruct",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "gemma-2-9b": "google/gemma-2-9b-it",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
}


class ProfileError(ValueError):
    pass


def preset(name: str) -> KVProfile:
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise ProfileError(
            f"unknown model {name!r}; presets: {', '.join(PRESETS)} (or give a config.json)"
        ) from None


def profile_from_config(config: dict, name: str = "config.json") -> KVProfile:
    """A profile from a Hugging Face config.json (text_config for multimodal models)."""
    if not isinstance(config, dict):
        raise ProfileError(f"{name}: not a JSON object")
    if "num_hidden_layers" not in config and isinstance(config.get("text_config"), dict):
        config = {**config, **config["text_config"]}
    try:
        layers = int(config["num_hidden_layers"])
        dtype = _TORCH_DTYPES.get(str(config.get("torch_dtype") or config.get("dtype")), "bf16")
        if config.get("kv_lora_rank"):
            latent = int(config["kv_lora_rank"]) + int(config.get("qk_rope_head_dim") or 0)
            return KVProfile(name, layers, 0, 0, dtype, mla_latent=latent)
        heads = int(config["num_attention_heads"])
        kv_heads = int(
            config.get("num_key_value_heads")
            or config.get("num_kv_heads")  # Falcon
            or config.get("multi_query_group_num")  # ChatGLM
            or (1 if config.get("multi_query") else heads)  # multi-query attention
        )
        head_dim = config.get("head_dim") or int(config["hidden_size"]) // heads
        return KVProfile(name, layers, kv_heads, int(head_dim), dtype)
    except KeyError as exc:
        raise ProfileError(f"{name}: missing {exc.args[0]}") from None
    except (TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
        raise ProfileError(f"{name}: {exc}") from None


def profile_from_file(path: str | Path) -> KVProfile:
    path = Path(path)
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{path.name}: cannot read ({exc})") from None
    if not isinstance(config, dict):
        raise ProfileError(f"{path.name}: not a JSON object")
    return profile_from_config(config, path.name)
