"""The hit ratio an engine measured over a run: two Prometheus scrapes of its `/metrics`,
one taken before a replay and one after, and the difference of its token counters.

The text is parsed by `prometheus_client`'s own parser (the exposition format has escapes,
timestamps and `_created` samples a hand-written reader gets wrong). Counters are matched
on their sample names: the parser files the `_total` sample of a counter whose name holds
colons (`vllm:prefix_cache_hits`) as a family of its own. Every label set of a counter
(model, engine index, data-parallel rank) is summed, so a scrape of one replica and of a
fleet's aggregate read alike.

Which counters, per engine (names and meanings read in each engine's own source):
- vLLM (0.34, `vllm/v1/metrics/loggers.py`, `stats.py`, `core/kv_cache_manager.py`;
  engines.md §2): `vllm:prefix_cache_queries` counts every prompt token of each request
  admitted (`request.num_tokens`), `vllm:prefix_cache_hits` those the GPU prefix cache
  held; `vllm:external_prefix_cache_queries` / `_hits` the same for the KV connector
  (CPU offloading, LMCache), asked for the tokens the GPU cache did not hold. A preempted
  request is not counted again. So the run's hit ratio is (GPU hits + connector hits) /
  GPU queries, split into the two tiers.
- SGLang (0.5.9, `python/sglang/srt/metrics/collector.py`; engines.md §5):
  `sglang:prompt_tokens_total` and `sglang:cached_tokens_total`, the latter labelled by
  `cache_source` (`device`, `host`, `storage_<backend>`, or `total` when a request has no
  per-source detail): one tier per source.
- LMCache's multiprocess server (`docs/source/mp/observability/metrics.rst`; engines.md §3):
  `lmcache_mp_lookup_requested_tokens_total` and `lmcache_mp_lookup_hit_tokens_total`
  (chunk-aligned tokens, contiguous prefix hits): the share of the tokens LMCache was asked
  about, not of every prompt token (the GPU cache answers first and is not in them).
Rates the engines compute themselves are gauges (`sglang:cache_hit_rate`, Dynamo KVBM's
`kvbm_host_cache_hit_rate`, `kvbm_disk_cache_hit_rate`, `lib/llm/src/block_manager/
metrics_kvbm.rs`): a gauge has no difference over a run, so it is named and never used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

# A counter's series: its sample name and its labels, as (name, value) pairs in order.
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]
Scrape = dict[SeriesKey, float]


class ScrapeError(ValueError):
    """Two scrapes that give no measured hit ratio (the message says why, in words)."""


@dataclass(frozen=True)
class EngineCounters:
    """An engine's token counters: the denominator, and the hits of each tier. A tier is
    one counter, or one counter's series with a given value of `split_label`."""

    engine: str
    label: str  # for pages: "vLLM", ...
    prompt: str  # the counter of the tokens looked up (sample name, with _total)
    tiers: tuple[tuple[str, str], ...]  # (tier, counter of its hit tokens)
    split_label: str = ""  # one tier per value of this label of the hits counter
    of_what: str = "prompt tokens"  # what the denominator counts, in words
    # counters that are read when present (a tier that is not set up has none)
    optional: tuple[str, ...] = ()


VLLM = EngineCounters(
    engine="vllm",
    label="vLLM",
    prompt="vllm:prefix_cache_queries_total",
    tiers=(
        ("gpu", "vllm:prefix_cache_hits_total"),
        ("connector", "vllm:external_prefix_cache_hits_total"),
    ),
    optional=("vllm:external_prefix_cache_hits_total",),
)
SGLANG = EngineCounters(
    engine="sglang",
    label="SGLang",
    prompt="sglang:prompt_tokens_total",
    tiers=(("", "sglang:cached_tokens_total"),),
    split_label="cache_source",
)
LMCACHE_MP = EngineCounters(
    engine="lmcache",
    label="LMCache server",
    prompt="lmcache_mp_lookup_requested_tokens_total",
    tiers=(("lmcache", "lmcache_mp_lookup_hit_tokens_total"),),
    of_what="tokens looked up in LMCache",
)
ENGINES = (VLLM, SGLANG, LMCACHE_MP)
# what each tier's hits are, in words (SGLang's cache_source values as its collector writes
# them; a source not listed here is shown by its own name)
TIER_LABELS = {
    "gpu": "GPU prefix cache",
    "connector": "KV connector (CPU offload, LMCache)",
    "device": "GPU (radix cache)",
    "host": "host RAM (HiCache)",
    "lmcache": "LMCache",
    "total": "prefix cache (no per-tier detail)",
}
# nearest the GPU first (SGLang's storage_<backend> sources rank as "storage")
TIER_ORDER = ("gpu", "device", "connector", "host", "storage", "lmcache", "total")
# gauges of a hit rate: nothing to take the difference of
RATE_GAUGES = ("kvbm_host_cache_hit_rate", "kvbm_disk_cache_hit_rate", "sglang:cache_hit_rate")


@dataclass(frozen=True)
class MeasuredHits:
    """What the engine counted between the two scrapes."""

    engine: str
    label: str
    of_what: str
    looked_up_tokens: float  # the denominator's increase
    hit_tokens_by_tier: dict[str, float]  # each tier's increase of hit tokens
    notes: tuple[str, ...] = field(default=())  # what was missing or left out, in words

    @property
    def hit_tokens(self) -> float:
        return sum(self.hit_tokens_by_tier.values())

    @property
    def hit_ratio(self) -> float:
        return self.hit_tokens / self.looked_up_tokens

    def tier_ratio(self, tier: str) -> float:
        return self.hit_tokens_by_tier.get(tier, 0.0) / self.looked_up_tokens

    def tiers(self) -> list[str]:
        """The tiers nearest the GPU first (those of unknown name last, by name)."""
        rank = {tier: n for n, tier in enumerate(TIER_ORDER)}

        def place(tier: str) -> tuple[int, str]:
            family = "storage" if tier.startswith("storage_") else tier
            return rank.get(family, len(rank)), tier

        return sorted(self.hit_tokens_by_tier, key=place)

    def to_dict(self) -> dict:
        """As stored and shown: every figure a page needs, ratios computed here."""
        return {
            "engine": self.engine,
            "label": self.label,
            "of_what": self.of_what,
            "looked_up_tokens": self.looked_up_tokens,
            "hit_tokens": self.hit_tokens,
            "hit_ratio": self.hit_ratio,
            "tiers": [
                {
                    "tier": tier,
                    "label": tier_label(tier),
                    "hit_tokens": self.hit_tokens_by_tier[tier],
                    "ratio": self.tier_ratio(tier),
                }
                for tier in self.tiers()
            ],
            "notes": list(self.notes),
        }


def parse_scrape(text: str, what: str = "the scrape") -> Scrape:
    """Every sample of a Prometheus text scrape, by sample name and labels."""
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, IndexError, TypeError) as exc:
        line = _bad_line(text)
        where = f" (line {line})" if line else ""
        raise ScrapeError(f"{what} is not Prometheus text{where}: {exc}") from None
    scrape: Scrape = {}
    for family in families:
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            scrape[key] = float(sample.value)
    if not scrape:
        raise ScrapeError(f"{what} holds no samples: paste the whole text of /metrics.")
    return scrape


def _bad_line(text: str) -> int | None:
    """The first line the parser refuses on its own (to name it), if one does."""
    for number, line in enumerate(text.splitlines(), 1):
        try:
            list(text_string_to_metric_families(line + "\n"))
        except (ValueError, IndexError, TypeError):
            return number
    return None


def measured_hits(before_text: str, after_text: str) -> MeasuredHits:
    """The hit ratio the engine counted between two scrapes of it (before, after)."""
    before = parse_scrape(before_text, "the scrape before the run")
    after = parse_scrape(after_text, "the scrape after the run")
    counters = _engine_of(after)
    if not _series(before, counters.prompt):
        raise ScrapeError(f"{counters.prompt} is in the scrape after the run but not in the "
                          "one before it: scrape the same server just before the run.")  # fmt: skip
    names = [counters.prompt, *(name for _, name in counters.tiers)]
    _refuse_restarts(before, after, names)
    looked_up = _increase(before, after, counters.prompt)
    if looked_up <= 0:
        raise ScrapeError(
            f"{counters.prompt} did not grow between the scrapes: no request reached the "
            "engine in between (scrape before the replay starts and after it ends)."
        )
    notes = []
    tiers: dict[str, float] = {}
    for tier, name in counters.tiers:
        if not _series(after, name):
            if name in counters.optional:
                notes.append(f"{name} is not in the scrape: that tier is not set up, so it "
                             "counts no hits.")  # fmt: skip
                continue
            raise ScrapeError(f"{name} is not in the scrape after the run, though "
                              f"{counters.prompt} is: its hits cannot be read.")  # fmt: skip
        if counters.split_label:
            tiers |= _increase_by_label(before, after, name, counters.split_label)
        else:
            tiers[tier] = _increase(before, after, name)
    notes += [f"{gauge} is a gauge (a rate the engine computes itself), not a counter: "
              "it is not used." for gauge in RATE_GAUGES if _series(after, gauge)]  # fmt: skip
    return MeasuredHits(counters.engine, counters.label, counters.of_what, looked_up, tiers,
                        tuple(notes))  # fmt: skip


def _engine_of(scrape: Scrape) -> EngineCounters:
    """The engine whose denominator counter the scrape carries (vLLM first: a vLLM with
    the LMCache connector also exposes LMCache's counters, and vLLM's cover both tiers)."""
    for counters in ENGINES:
        if _series(scrape, counters.prompt):
            return counters
    gauges = [gauge for gauge in RATE_GAUGES if _series(scrape, gauge)]
    known = ", ".join(counters.prompt for counters in ENGINES)
    found = f" It has {', '.join(gauges)}: a gauge, which has no difference over a run." if (
        gauges) else ""  # fmt: skip
    raise ScrapeError(f"The scrape after the run has none of the token counters kvscope reads "
                      f"({known}).{found}")  # fmt: skip


def _series(scrape: Scrape, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: value for (sample, labels), value in scrape.items() if sample == name}


def _refuse_restarts(before: Scrape, after: Scrape, names: list[str]) -> None:
    """A counter never goes down while its process lives: one that did (or vanished) means
    the engine restarted between the scrapes, and the difference means nothing. A restart
    whose counters grew past their old values since shows in the process's start time, or
    in a counter's `_created` sample (the time prometheus_client made it)."""
    births = ("process_start_time_seconds", *(n.removesuffix("_total") + "_created"
                                              for n in names))  # fmt: skip
    for name in births:
        born_after = _series(after, name)
        for labels, born in _series(before, name).items():
            again = born_after.get(labels)
            if again is not None and again != born:
                raise ScrapeError(f"{name}{_labels_text(labels)} changed between the scrapes "
                                  f"({born:g}, then {again:g}): the engine restarted in "
                                  "between. Scrape again just before and just after one "
                                  "run.")  # fmt: skip
    for name in names:
        now = _series(after, name)
        for labels, then in _series(before, name).items():
            value = now.get(labels)
            where = _labels_text(labels)
            if value is None:
                raise ScrapeError(f"{name}{where} is in the scrape before the run but not "
                                  "after it: the engine restarted in between, or the two "
                                  "scrapes are of different servers.")  # fmt: skip
            if value < then:
                raise ScrapeError(f"{name}{where} went down from {then:g} to {value:g} between "
                                  "the scrapes: the engine restarted in between. Scrape again "
                                  "just before and just after one run.")  # fmt: skip


def _increase(before: Scrape, after: Scrape, name: str) -> float:
    """A counter's growth, summed over its label sets (a series born during the run
    started from zero)."""
    then = _series(before, name)
    return sum(value - then.get(labels, 0.0) for labels, value in _series(after, name).items())


def _increase_by_label(before: Scrape, after: Scrape, name: str, label: str) -> dict[str, float]:
    then = _series(before, name)
    grown: dict[str, float] = {}
    for labels, value in _series(after, name).items():
        key = dict(labels).get(label, "")
        grown[key] = grown.get(key, 0.0) + value - then.get(labels, 0.0)
    return grown


def tier_label(tier: str) -> str:
    """A tier's hits in words (SGLang's `storage_<backend>` sources by their backend)."""
    if tier.startswith("storage_"):
        return f"storage: {tier.removeprefix('storage_')} (HiCache)"
    return TIER_LABELS.get(tier, tier)


def _labels_text(labels: tuple[tuple[str, str], ...]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}" if labels else ""
