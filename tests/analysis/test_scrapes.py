"""The hit ratio an engine measured over a run, from two Prometheus scrapes (#18): the
documented exposition of vLLM, SGLang and LMCache's server, parsed by prometheus_client,
differenced by hand here; a restart between the scrapes refused with its counter named."""

from __future__ import annotations

import pytest

from analysis.benchmarks.scrapes import ScrapeError, measured_hits, parse_scrape


def vllm_scrape(
    queries: dict[str, float],
    hits: dict[str, float],
    external: dict[str, float] | None = None,
    created: float = 1.7646e9,
) -> str:
    """A vLLM /metrics page as vLLM writes it (prometheus_client's exposition: HELP, TYPE,
    the `_total` and `_created` samples), one series per data-parallel engine."""
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="llama"} 3.0',
    ]
    counters = [("vllm:prefix_cache_queries", queries), ("vllm:prefix_cache_hits", hits)]
    if external is not None:
        counters += [("vllm:external_prefix_cache_queries", {e: 1e9 for e in external}),
                     ("vllm:external_prefix_cache_hits", external)]  # fmt: skip
    for name, values in counters:
        lines += [f"# HELP {name} Prefix cache {name.rsplit('_', 1)[-1]}, in tokens.",
                  f"# TYPE {name} counter"]  # fmt: skip
        for engine, value in values.items():
            labels = f'{{engine="{engine}",model_name="llama"}}'
            lines += [f"{name}_total{labels} {value}", f"{name}_created{labels} {created}"]
    return "\n".join(lines) + "\n"


def test_vllm_gpu_and_connector_hits_are_the_counters_differences():
    before = vllm_scrape({"0": 1000, "1": 500}, {"0": 100, "1": 50}, {"0": 10, "1": 0})
    after = vllm_scrape({"0": 9000, "1": 4500}, {"0": 3300, "1": 1650}, {"0": 1610, "1": 400})
    measured = measured_hits(before, after)
    # looked up: (9000-1000) + (4500-500) = 12000; GPU hits (3300-100)+(1650-50) = 4800;
    # connector hits (1610-10)+(400-0) = 2000
    assert measured.engine == "vllm"
    assert measured.looked_up_tokens == 12000
    assert measured.hit_tokens_by_tier == {"gpu": 4800, "connector": 2000}
    assert measured.hit_ratio == pytest.approx(6800 / 12000)
    assert measured.tier_ratio("gpu") == pytest.approx(0.4)
    assert measured.tier_ratio("connector") == pytest.approx(2000 / 12000)
    assert measured.notes == ()


def test_vllm_without_a_connector_counts_its_gpu_hits_and_says_the_tier_is_absent():
    measured = measured_hits(vllm_scrape({"0": 0}, {"0": 0}), vllm_scrape({"0": 800}, {"0": 200}))
    assert measured.hit_tokens_by_tier == {"gpu": 200}
    assert measured.hit_ratio == 0.25
    assert "vllm:external_prefix_cache_hits_total is not in the scrape" in measured.notes[0]


def test_a_series_born_during_the_run_started_from_zero():
    before = vllm_scrape({"0": 100}, {"0": 40})
    after = vllm_scrape({"0": 300, "1": 200}, {"0": 90, "1": 30})  # engine 1 came up
    measured = measured_hits(before, after)
    assert (measured.looked_up_tokens, measured.hit_tokens) == (400, 80)


SGLANG_BEFORE = """\
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="qwen"} 2000.0
# HELP sglang:cached_tokens_total Number of cached prompt tokens.
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source="device",model_name="qwen"} 300.0
sglang:cached_tokens_total{cache_source="host",model_name="qwen"} 100.0
sglang:cached_tokens_total{cache_source="storage_hf3fs",model_name="qwen"} 0.0
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="qwen"} 0.2
"""


def test_sglang_hits_are_split_by_their_cache_source():
    after = (SGLANG_BEFORE.replace("} 2000.0", "} 12000.0").replace("} 300.0", "} 4300.0")
             .replace('"host",model_name="qwen"} 100.0', '"host",model_name="qwen"} 2100.0')
             .replace("} 0.2", "} 0.53"))  # fmt: skip
    measured = measured_hits(SGLANG_BEFORE, after)
    assert measured.engine == "sglang"
    assert measured.looked_up_tokens == 10000
    assert measured.hit_tokens_by_tier == {"storage_hf3fs": 0, "device": 4000, "host": 2000}
    assert measured.hit_ratio == pytest.approx(0.6)
    stored = measured.to_dict()
    assert [(t["tier"], t["label"], t["ratio"]) for t in stored["tiers"]] == [
        ("device", "GPU (radix cache)", 0.4), ("host", "host RAM (HiCache)", 0.2),
        ("storage_hf3fs", "storage: hf3fs (HiCache)", 0.0)]  # fmt: skip
    assert (stored["hit_tokens"], stored["looked_up_tokens"]) == (6000, 10000)
    assert any("sglang:cache_hit_rate is a gauge" in note for note in measured.notes)


def test_lmcache_servers_ratio_is_over_the_tokens_it_was_asked_about():
    def page(requested: int, hit: int) -> str:
        return ("# TYPE lmcache_mp_lookup_requested_tokens counter\n"
                f'lmcache_mp_lookup_requested_tokens_total{{model_name="m"}} {requested}\n'
                "# TYPE lmcache_mp_lookup_hit_tokens counter\n"
                f'lmcache_mp_lookup_hit_tokens_total{{model_name="m"}} {hit}\n')  # fmt: skip

    measured = measured_hits(page(100, 20), page(612, 276))
    assert measured.engine == "lmcache"
    assert (measured.looked_up_tokens, measured.hit_tokens) == (512, 256)
    assert measured.hit_ratio == 0.5 and measured.of_what == "tokens looked up in LMCache"


def test_a_counter_that_went_down_is_a_restart_and_is_refused_by_name():
    before = vllm_scrape({"0": 9000}, {"0": 3000})
    after = vllm_scrape({"0": 400}, {"0": 100})  # the server started again meanwhile
    with pytest.raises(ScrapeError) as refused:
        measured_hits(before, after)
    message = str(refused.value)
    assert 'vllm:prefix_cache_queries_total{engine="0",model_name="llama"}' in message
    assert "went down from 9000 to 400" in message and "restarted" in message


def test_a_restart_whose_counters_grew_back_is_refused_by_their_creation_time():
    before = vllm_scrape({"0": 1000}, {"0": 100})
    after = vllm_scrape({"0": 5000}, {"0": 900}, created=1.7647e9)  # made again, and grown
    with pytest.raises(ScrapeError) as refused:
        measured_hits(before, after)
    message = str(refused.value)
    assert 'vllm:prefix_cache_queries_created{engine="0",model_name="llama"}' in message
    assert "changed between the scrapes (1.7646e+09, then 1.7647e+09)" in message
    start = "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {}\n"
    with pytest.raises(ScrapeError, match="process_start_time_seconds changed"):
        measured_hits(start.format(100) + before, start.format(200) + vllm_scrape(
            {"0": 5000}, {"0": 900}))  # fmt: skip


def test_a_before_scrape_without_the_engines_counters_is_refused():
    other = "# TYPE up gauge\nup 1\n"
    with pytest.raises(ScrapeError, match="not in the one before it: scrape the same server"):
        measured_hits(other, vllm_scrape({"0": 5000}, {"0": 900}))


def test_a_series_that_vanished_is_refused_too():
    before = vllm_scrape({"0": 100, "1": 100}, {"0": 10, "1": 10})
    after = vllm_scrape({"0": 200}, {"0": 20})
    with pytest.raises(ScrapeError, match=r'engine="1".*not after it'):
        measured_hits(before, after)


def test_no_traffic_between_the_scrapes_is_said():
    same = vllm_scrape({"0": 100}, {"0": 10})
    with pytest.raises(ScrapeError, match="did not grow between the scrapes"):
        measured_hits(same, same)


def test_a_scrape_without_known_counters_names_what_it_looked_for():
    dynamo = "# TYPE kvbm_host_cache_hit_rate gauge\nkvbm_host_cache_hit_rate 0.4\n"
    with pytest.raises(ScrapeError) as refused:
        measured_hits(dynamo, dynamo)
    message = str(refused.value)
    assert "vllm:prefix_cache_queries_total" in message and "sglang:prompt_tokens_total" in message
    assert "kvbm_host_cache_hit_rate: a gauge" in message


def test_text_that_is_not_prometheus_names_its_line():
    text = "# TYPE x counter\nx_total 1\nthis is { not a sample\n"
    refused = r"the scrape before the run is not Prometheus text \(line 3\)"
    with pytest.raises(ScrapeError, match=refused):
        parse_scrape(text, "the scrape before the run")
    with pytest.raises(ScrapeError, match="holds no samples"):
        parse_scrape("# just a comment\n")
