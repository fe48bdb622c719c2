"""Does offload pay: the arithmetic, worked out by hand."""

from __future__ import annotations

import pytest

from analysis.offload import PCIE_GB_S, offload_payoff

# Llama-3.1-8B at bf16: 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes
REPORT = {
    "prompt_tokens": 7_200_000,
    "span_s": 7200.0,  # two hours: 3.6 M prompt tokens per hour
    "kv_bytes_per_token": 131_072,
    "recommendation": {"hit_ratio": 0.5},
}


def test_load_against_recompute_by_hand():
    p = offload_payoff(REPORT, bandwidth_gb_s=55.0, prefill_tokens_per_s=30_000)
    assert p.prompt_tokens_per_hour == 3_600_000
    assert p.saved_tokens_per_hour == 1_800_000  # half the prompt tokens are hits
    # 1.8 M tokens x 131,072 B = 235.9296 GB over 55 GB/s = 4.2896 s
    assert p.load_seconds_per_hour == pytest.approx(235.9296 / 55.0)
    assert p.recompute_seconds_per_hour == pytest.approx(60.0)  # 1.8 M / 30 k tokens/s
    # 131,072 B x 30,000 tokens/s = 3.93216 GB/s: slower links recompute faster
    assert p.break_even_gb_s == pytest.approx(3.93216)
    assert p.load_us_per_token == pytest.approx(131_072 / 55e9 * 1e6)  # 2.38 µs
    assert p.recompute_us_per_token == pytest.approx(33.333, abs=1e-3)
    assert p.pays and p.speedup == pytest.approx(60.0 / (235.9296 / 55.0))


def test_a_slow_link_does_not_pay_and_the_hit_ratio_can_be_given():
    p = offload_payoff(REPORT, bandwidth_gb_s=3.0, prefill_tokens_per_s=30_000, hit_ratio=0.2)
    assert p.saved_tokens_per_hour == pytest.approx(720_000)
    assert not p.pays and p.speedup == pytest.approx(3.0 / 3.93216)
    assert p.to_dict()["pays"] is False


def test_pcie_defaults_follow_the_generation():
    assert [PCIE_GB_S[g] for g in "3456"] == sorted(PCIE_GB_S.values())
    assert PCIE_GB_S["5"] == pytest.approx(55, rel=0.05)  # the H200 host's pinned copies


@pytest.mark.parametrize("bad", [{"bandwidth_gb_s": 0}, {"prefill_tokens_per_s": -1},
                                 {"hit_ratio": 1.5}])  # fmt: skip
def test_nonsense_inputs_are_refused(bad):
    args = {"bandwidth_gb_s": 10.0, "prefill_tokens_per_s": 1000.0, **bad}
    with pytest.raises(ValueError):
        offload_payoff(REPORT, **args)
