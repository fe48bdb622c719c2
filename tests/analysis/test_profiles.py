"""KV bytes per token (metrics.md section 5): presets against the published configs, MLA,
FP8, and profile_from_config's fallbacks."""

from __future__ import annotations

import json

import pytest

from analysis import PRESETS, AnalysisParams, analyze, preset, profile_from_config
from analysis.profiles import ProfileError, profile_from_file

# From each model's published config.json: (num_hidden_layers, num_key_value_heads,
# head_dim). KV bytes per token = layers * kv_heads * head_dim * 2 (K and V) * 2 (BF16).
GQA_MODELS = {
    "llama-3.1-8b": (32, 8, 128),
    "llama-3.1-70b": (80, 8, 128),
    "llama-3.2-3b": (28, 8, 128),
    "mistral-7b-v0.3": (32, 8, 128),
    "qwen2.5-7b": (28, 4, 128),
    "qwen2.5-72b": (80, 8, 128),
    "qwen3-8b": (36, 8, 128),
    "gemma-2-9b": (42, 8, 256),
}
# DeepSeek-V3 (MLA): 61 layers, one latent of kv_lora_rank 512 + qk_rope_head_dim 64
DEEPSEEK_V3 = 61 * (512 + 64) * 2  # = 70,272 bytes in BF16


def test_every_preset_is_checked_here():
    assert set(PRESETS) == set(GQA_MODELS) | {"deepseek-v3"}


@pytest.mark.parametrize("name", sorted(GQA_MODELS))
def test_gqa_presets(name):
    layers, kv_heads, head_dim = GQA_MODELS[name]
    profile = preset(name)
    assert profile.kv_bytes_per_token() == layers * kv_heads * head_dim * 2 * 2
    assert profile.kv_bytes_per_token("bf16") == layers * kv_heads * head_dim * 2 * 2
    assert profile.kv_bytes_per_token("fp16") == layers * kv_heads * head_dim * 2 * 2
    assert profile.kv_bytes_per_token("fp8") == layers * kv_heads * head_dim * 2 * 1


def test_known_values():
    # metrics.md's example: 32 layers, 8 KV heads, head_dim 128, FP16 -> 128 KiB per token
    assert preset("llama-3.1-8b").kv_bytes_per_token("fp16") == 131_072
    # 32,768 tokens -> 4 GiB per sequence
    assert preset("llama-3.1-8b").kv_bytes_per_token() * 32_768 == 4 * 2**30
    assert preset("qwen2.5-7b").kv_bytes_per_token() == 28 * 4 * 128 * 2 * 2  # 57,344
    assert preset("gemma-2-9b").kv_bytes_per_token() == 42 * 8 * 256 * 2 * 2  # 344,064


def test_mla_preset():
    profile = preset("deepseek-v3")
    assert profile.kv_bytes_per_token() == DEEPSEEK_V3
    assert profile.kv_bytes_per_token("fp8") == 61 * (512 + 64) * 1  # = 35,136


def test_preset_names_are_case_insensitive_and_unknown_ones_fail():
    assert preset("Llama-3.1-8B") is PRESETS["llama-3.1-8b"]
    with pytest.raises(ProfileError):
        preset("no-such-model")


def test_unknown_kv_dtype_is_refused():
    with pytest.raises(ValueError):
        preset("llama-3.1-8b").kv_bytes_per_token("int3")


def test_report_uses_profile_and_fp8(ingest_rows, trace):
    stream = ingest_rows([trace(0, [1], 16), trace(1000, [1], 16)], block_tokens=16)
    fp8 = analyze(
        stream, AnalysisParams(windows_s=(60,), profile=preset("qwen3-8b"), kv_dtype="fp8")
    )
    assert fp8.kv_bytes_per_token == 36 * 8 * 128 * 2 * 1  # 73,728
    assert fp8.slot_bytes == 16 * 36 * 8 * 128 * 2 * 1
    assert fp8.kv_dtype == "fp8"
    mla = analyze(stream, AnalysisParams(windows_s=(60,), profile=preset("deepseek-v3")))
    assert mla.slot_bytes == 16 * DEEPSEEK_V3
    # the default profile is Llama-3.1-8B in BF16
    default = analyze(stream, AnalysisParams(windows_s=(60,)))
    assert default.kv_bytes_per_token == 32 * 8 * 128 * 2 * 2


# --- config.json -------------------------------------------------------------------------
def test_config_gqa_with_explicit_head_dim():
    # Gemma-2-9B: hidden_size 3584 / 16 heads = 224, but head_dim says 256
    config = {
        "num_hidden_layers": 42,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "hidden_size": 3584,
        "head_dim": 256,
        "torch_dtype": "bfloat16",
    }
    profile = profile_from_config(config)
    assert (profile.layers, profile.kv_heads, profile.head_dim) == (42, 8, 256)
    assert profile.kv_bytes_per_token() == 42 * 8 * 256 * 2 * 2


def test_config_without_kv_heads_is_mha():
    # no num_key_value_heads: every attention head has its own K and V;
    # no head_dim: hidden_size / num_attention_heads = 4096 / 32 = 128
    config = {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "hidden_size": 4096,
        "torch_dtype": "float16",
    }
    profile = profile_from_config(config)
    assert (profile.kv_heads, profile.head_dim, profile.dtype) == (32, 128, "fp16")
    assert profile.kv_bytes_per_token() == 32 * 32 * 128 * 2 * 2  # 524,288


def test_config_null_fields_fall_back():
    config = {
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": None,
        "hidden_size": 2048,
        "head_dim": None,
    }
    profile = profile_from_config(config)
    assert (profile.kv_heads, profile.head_dim) == (16, 2048 // 16)
    assert profile.kv_bytes_per_token() == 28 * 16 * 128 * 2 * 2  # BF16 when unsaid


def test_config_mla():
    config = {
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "torch_dtype": "bfloat16",
    }
    profile = profile_from_config(config)
    assert profile.mla_latent == 512 + 64
    # one latent per layer, not 2 * 128 heads * head_dim
    assert profile.kv_bytes_per_token() == DEEPSEEK_V3
    assert profile.kv_bytes_per_token("fp8") == 61 * 576


def test_config_fp32_and_multimodal_text_config():
    config = {
        "model_type": "llava",
        "torch_dtype": "float32",
        "text_config": {
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
        },
    }
    profile = profile_from_config(config)
    assert profile.dtype == "fp32"
    assert profile.kv_bytes_per_token() == 32 * 8 * (4096 // 32) * 2 * 4


def test_config_missing_layers(tmp_path):
    with pytest.raises(ProfileError, match="num_hidden_layers"):
        profile_from_config({"num_attention_heads": 8, "hidden_size": 512})
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256})
    )
    assert profile_from_file(path).kv_bytes_per_token() == 2 * 4 * (256 // 4) * 2 * 2
    path.write_text("[1, 2]")
    with pytest.raises(ProfileError):
        profile_from_file(path)


# metrics.md section 8: per rank layers * max(1, kv_heads // tp) * head_dim * 2 * bytes
# (MLA: layers * latent * bytes); a replica holds tp times that
@pytest.mark.parametrize(
    ("name", "tp", "per_rank", "replica"),
    [
        ("llama-3.1-8b", 1, 32 * 8 * 128 * 2 * 2, 131_072),
        ("llama-3.1-8b", 2, 32 * 4 * 128 * 2 * 2, 131_072),  # 65,536 per rank
        ("llama-3.1-8b", 8, 32 * 1 * 128 * 2 * 2, 131_072),  # 16,384 per rank
        ("llama-3.1-8b", 16, 32 * 1 * 128 * 2 * 2, 16 * 16_384),  # heads replicated: 2x
        ("qwen2.5-7b", 8, 28 * 1 * 128 * 2 * 2, 8 * 14_336),  # 4 heads on 8 ranks: 2x
        ("deepseek-v3", 1, DEEPSEEK_V3, DEEPSEEK_V3),
        ("deepseek-v3", 8, DEEPSEEK_V3, 8 * DEEPSEEK_V3),  # the latent is on every rank
    ],
)
def test_bytes_per_token_per_rank(name, tp, per_rank, replica):
    profile = preset(name)
    assert profile.kv_bytes_per_token_per_rank(tp) == per_rank
    assert profile.replica_kv_bytes_per_token(tp) == replica
    # FP8 halves both
    assert profile.kv_bytes_per_token_per_rank(tp, "fp8") == per_rank // 2


def test_mla_from_a_config_json_per_rank():
    config = {"num_hidden_layers": 27, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
              "num_attention_heads": 16, "torch_dtype": "bfloat16"}  # fmt: skip
    profile = profile_from_config(config)
    assert profile.kv_bytes_per_token_per_rank(4) == 27 * 576 * 2 == 31_104
    assert profile.replica_kv_bytes_per_token(4) == 4 * 31_104
    profile.check_tp(3)  # any tp: nothing is split


def test_uneven_tp_is_refused():
    with pytest.raises(ValueError, match="tp must divide 8 or be a multiple of it"):
        preset("llama-3.1-8b").kv_bytes_per_token_per_rank(3)
