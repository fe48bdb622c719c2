"""The analysis form: the parameters of an analysis, validated and kept as plain JSON so an
analysis can be re-run and compared later."""

from __future__ import annotations

import json
import math

from django import forms

from analysis.budgets import WEIGHT_DTYPE_BYTES, ServingShape
from analysis.params import (
    DEFAULTS,
    MAX_REPLICAS,
    MAX_STORE_THRESHOLD,
    ROUTERS,
    SCOPES,
    FleetParams,
)
from analysis.profiles import (
    DEFAULT_PROFILE,
    DTYPE_BYTES,
    PRESETS,
    ProfileError,
    preset,
    profile_from_config as parse_model_config,
)
from console.format import gib
from console.percent_fields import PercentField, percentage, share
from console.uploads.fleet_words import ROUTER_NAMES, ROUTER_WHAT

# one field per host reserve of analysis.params.HOST_RESERVES
RESERVE_LABELS = {
    "os": "Operating system",
    "page_cache": "Page cache",
    "tokenizers": "Tokenizers",
    "request_buffers": "Request buffers",
    "serving_process": "Serving process",
    "cache_process": "Separate cache process (e.g. LMCache server)",
}


# Upper bounds of the analysis form. Past them a number means nothing for a serving node and
# could overflow what the engine stores (64-bit integers of bytes, microseconds); within
# them every product the engine forms stays below 2**63 (e.g. 65,536 sequences * 10 M
# tokens * 64 ranks of DeepSeek-V3's 70,272 bytes per token is ~3e18).
MAX_SECONDS = 1e9  # ~31 years, for windows and lifetimes
MAX_HOST_GIB = 1024**2  # 1 PiB of host RAM or of any reserve
MAX_GPU_GIB = 4096  # per GPU
MAX_PARAMS_B = 100_000  # 100 T parameters
MAX_SEQUENCES = 65_536
MAX_CONTEXT_TOKENS = 10 * 1024**2
MAX_COUNT = 1_000_000_000  # reuses, tokens of a document
# a fleet (metrics.md section 8): its replicas and store threshold are bounded as
# FleetParams.validate bounds them (analysis.params' MAX_REPLICAS, MAX_STORE_THRESHOLD)
MAX_GPU_CACHE_GIB = MAX_GPU_GIB * 64  # a replica's prefix cache: every GPU of the widest TP


def _numbers(value: str, refusal: str) -> list[float]:
    """Numbers separated by spaces or commas (float() reads "inf" and "nan" too: callers
    check what they allow); `refusal` when one is not a number."""
    try:
        return [float(part) for part in value.replace(",", " ").split()]
    except ValueError:
        raise forms.ValidationError(refusal) from None


def _budgets(value: str) -> list[float]:
    """Budgets of host RAM per replica, in GiB: what each buys is on the first screen."""
    budgets = _numbers(value, "Budgets are GiB per replica, e.g. “256 512”.")
    if any(not math.isfinite(b) or not 0 < b <= MAX_HOST_GIB for b in budgets):
        raise forms.ValidationError(f"Give each budget in GiB, above 0 and up to {MAX_HOST_GIB:,}.")
    if len(budgets) > 6:
        raise forms.ValidationError("At most 6 budgets.")
    return sorted(set(budgets))


def _windows(value: str) -> list[float]:
    windows = _numbers(value, "Windows are seconds, e.g. “300 3600 86400”.")
    # float() reads "inf" and "nan" too: neither is a window
    if not windows or any(not math.isfinite(w) or w <= 0 for w in windows):
        raise forms.ValidationError("Give one or more positive windows in seconds.")
    if max(windows) > MAX_SECONDS:
        raise forms.ValidationError(f"A window is at most {MAX_SECONDS:,.0f} s (about 31 years).")
    if len(windows) > 6:
        raise forms.ValidationError("At most 6 windows.")
    return sorted(set(windows))


class AnalysisForm(forms.Form):
    """Parameters of an analysis. Sizes are in GiB on the form, as people think of RAM."""

    block_tokens = forms.TypedChoiceField(coerce=int, label="Block size (tokens)")
    model = forms.ChoiceField(
        choices=[(name, name) for name in PRESETS], initial=DEFAULT_PROFILE, label="Model"
    )
    model_config = forms.FileField(
        required=False,
        label="…or a Hugging Face config.json",
        help_text="Overrides the preset: layers, KV heads, head_dim (or MLA fields).",
    )
    kv_dtype = forms.ChoiceField(
        choices=[("", "The model's own")] + [(d, d.upper()) for d in DTYPE_BYTES],
        required=False,
        label="KV dtype",
    )
    windows = forms.CharField(
        initial=" ".join(f"{w:g}" for w in DEFAULTS.windows_s), label="Reuse windows (s)"
    )
    scope = forms.ChoiceField(
        choices=[(s, s) for s in SCOPES], initial=DEFAULTS.scope, label="Sharing scope"
    )
    lifetime = forms.FloatField(
        required=False,
        min_value=1,
        max_value=MAX_SECONDS,
        label="Block lifetime (s)",
        help_text="Leave empty for no lifetime.",
    )
    # shares entered as percentages (console.percent_fields): params() gives the engine shares
    warmup = PercentField(
        required=False,
        initial=percentage(DEFAULTS.warmup),
        min_value=0,
        max_value=99,
        label="Warm-up (% of requests)",
        help_text="The first requests fill the cache but count in no hit ratio; "
        "50 gives the steady state kvcache-simulator reports.",
        message="Give the warm-up as a percentage of the requests from 0 to 99, e.g. 50.",
    )
    target = PercentField(
        initial=percentage(DEFAULTS.target),
        min_value=1,
        max_value=100,
        label="Target share of the ceiling (%)",
        message="Give the target as a percentage of the ceiling from 1 to 100, e.g. 90.",
    )
    headroom = PercentField(
        initial=percentage(DEFAULTS.headroom),
        min_value=0,
        max_value=500,
        label="Headroom (%)",
        help_text="Added to the capacity for metadata and fragmentation.",
        message="Give the headroom as a percentage from 0 to 500, e.g. 10.",
    )
    tp = forms.IntegerField(
        initial=DEFAULTS.tp, min_value=1, max_value=64, label="Tensor-parallel ranks"
    )
    min_reuses = forms.IntegerField(
        initial=DEFAULTS.min_reuses,
        min_value=1,
        max_value=MAX_COUNT,
        label="Reuses to call a segment hot",
    )
    doc_min_tokens = forms.IntegerField(
        initial=DEFAULTS.doc_min_tokens,
        min_value=1,
        max_value=MAX_COUNT,
        label="Tokens for a message to count as a document",
    )
    host_ram_gib = forms.FloatField(
        required=False, min_value=0, max_value=MAX_HOST_GIB, label="Host RAM (GiB)"
    )
    budgets_gib = forms.CharField(
        required=False,
        label="Budgets to price (GiB per replica)",
        help_text="e.g. “256 512”: the first screen says what each buys.",
    )
    gpu_memory_gib = forms.FloatField(
        required=False, min_value=1, max_value=MAX_GPU_GIB, label="GPU memory (GiB)"
    )
    weight_dtype = forms.ChoiceField(
        choices=[(d, d) for d in WEIGHT_DTYPE_BYTES],
        initial=ServingShape.weight_dtype,
        label="Weight dtype",
    )
    params_b = forms.FloatField(
        required=False,
        min_value=0.01,
        max_value=MAX_PARAMS_B,
        label="Parameters (billions)",
        help_text="Empty: the preset's.",
    )
    concurrent_sequences = forms.IntegerField(
        initial=ServingShape.concurrent_sequences,
        min_value=0,
        max_value=MAX_SEQUENCES,
        label="Concurrent sequences",
    )
    context_tokens = forms.IntegerField(
        initial=ServingShape.context_tokens,
        min_value=0,
        max_value=MAX_CONTEXT_TOKENS,
        label="Context per sequence",
    )

    # --- a fleet (metrics.md section 8): all empty, one cache fed all of the traffic ----
    replicas = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_REPLICAS,
        label="Replicas",
        help_text="Identical instances serving the route. Empty: one cache, no fleet; "
        "1 with a GPU cache or a store threshold: one replica with those.",
        error_messages={
            "invalid": "Replicas are a whole number, e.g. 4.",
            "min_value": "A fleet has at least 1 replica.",
            "max_value": f"At most {MAX_REPLICAS:,} replicas.",
        },
    )
    routers = forms.MultipleChoiceField(
        required=False,
        choices=[(r, f"{ROUTER_NAMES[r]}: {ROUTER_WHAT[r]}") for r in ROUTERS],
        widget=forms.CheckboxSelectMultiple,
        label="Routers to compare",
        help_text="None ticked: every router (with 2 or more replicas).",
        error_messages={"invalid_choice": "%(value)s is not a router this console knows."},
    )
    gpu_cache_gib = forms.FloatField(
        required=False,
        min_value=0,
        max_value=MAX_GPU_CACHE_GIB,
        label="GPU prefix cache per replica (GiB)",
        help_text="The KV a replica keeps on its GPUs (all its TP ranks) in front of host "
        f"RAM: hits there need no RAM. Empty: {gib(FleetParams.gpu_cache_bytes):g} GiB.",
        error_messages={
            "invalid": "The GPU prefix cache is a number of GiB, e.g. 40.",
            "min_value": "The GPU prefix cache cannot be negative: 0 is none.",
            "max_value": f"At most {MAX_GPU_CACHE_GIB:,} GiB of GPU prefix cache per replica.",
        },
    )
    store_threshold = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_STORE_THRESHOLD,
        label="Store threshold (references)",
        help_text="A block enters host RAM at its k-th use (vLLM's store_threshold; 2 "
        f"skips one-offs). Empty: {FleetParams.store_threshold}, store on first use.",
        error_messages={
            "invalid": "The store threshold is a whole number of uses, e.g. 2.",
            "min_value": "A block is stored at its 1st use at the earliest.",
            "max_value": f"At most {MAX_STORE_THRESHOLD:,} uses.",
        },
    )
    prefix_threshold = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Prefix threshold (share of the prompt)",
        help_text="Prefix-aware router: a request whose best match covers less than this "
        "share of its prompt goes to the least-loaded replica instead. "
        f"Empty: {FleetParams.prefix_threshold:g}.",
        error_messages={
            "invalid": "The prefix threshold is a share of the prompt, e.g. 0.5.",
            "min_value": "The prefix threshold is a share from 0 to 1.",
            "max_value": "The prefix threshold is a share from 0 to 1 (0.5 is half the prompt).",
        },
    )

    # --- what the engine that wrote the log ran with (#18): its cached tokens compared ----
    logged_ram_gib = forms.FloatField(
        required=False,
        min_value=0,
        max_value=MAX_HOST_GIB,
        label="Host RAM per replica the logged engine had (GiB)",
        help_text="When the log's responses report cached tokens, kvscope predicts them for "
        "this RAM, with the fleet above (replicas, first router, GPU prefix cache). Empty: "
        "the GPU prefix cache alone, or no prediction without one.",
        error_messages={
            "invalid": "The RAM is a number of GiB, e.g. 64.",
            "min_value": "The RAM cannot be negative: 0 is none.",
        },
    )

    def __init__(self, *args, block_sizes: list[int] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        for name, label in RESERVE_LABELS.items():
            self.fields[f"reserve_{name}_gib"] = forms.FloatField(
                required=False, min_value=0, max_value=MAX_HOST_GIB, label=f"{label} (GiB)"
            )
        sizes = block_sizes or [256]
        self.fields["block_tokens"].choices = [(b, str(b)) for b in sizes]
        self.fields["block_tokens"].initial = sizes[0]

    def clean_warmup(self) -> float:
        """Empty is no warm-up (a form posted before the field existed has none)."""
        value = self.cleaned_data.get("warmup")
        return percentage(DEFAULTS.warmup) if value is None else value

    def clean_budgets_gib(self):
        return _budgets(self.cleaned_data["budgets_gib"])

    def clean_windows(self):
        return _windows(self.cleaned_data["windows"])

    def clean_model_config(self):
        upload = self.cleaned_data.get("model_config")
        if not upload:
            return None
        if upload.size > 1024 * 1024:
            raise forms.ValidationError("A config.json is small; this file is over 1 MiB.")
        try:
            config = json.loads(upload.read())
            parse_model_config(config, upload.name)
        except (ValueError, ProfileError, UnicodeDecodeError) as exc:
            raise forms.ValidationError(f"Not a usable config.json: {exc}") from None
        return config

    def clean(self):
        data = super().clean()
        # the ranks must share the model's KV heads evenly (metrics.md section 8): said at
        # the tp field rather than as a failed analysis
        tp, config = data.get("tp"), data.get("model_config")
        if tp is not None and "tp" not in self.errors and (config or data.get("model")):
            try:
                profile = parse_model_config(config) if config else preset(data["model"])
                profile.check_tp(tp)
            except (ProfileError, ValueError) as exc:
                self.add_error("tp", str(exc))
        self._check_reserves_fit(data)
        self._check_routers_have_replicas(data)
        self._check_prefix_threshold_has_a_fleet(data)
        return data

    def _check_prefix_threshold_has_a_fleet(self, data: dict) -> None:
        """The prefix threshold steers a fleet's prefix router and makes no fleet by itself
        (console.engine): given alone it would be dropped, so it is refused in words."""
        fleet_fields = ("replicas", "routers", "gpu_cache_gib", "store_threshold")
        if data.get("prefix_threshold") is not None and not any(
            data.get(name) not in (None, []) for name in fleet_fields
        ):
            self.add_error(
                "prefix_threshold",
                "The prefix threshold steers the prefix-aware router of a fleet: give the "
                "replicas too, or leave it empty.",
            )

    def _check_routers_have_replicas(self, data: dict) -> None:
        """Routers split traffic among replicas: ticked with one replica (or none given),
        every router is the same single cache, which is surely not what was meant."""
        replicas = data.get("replicas")
        if data.get("routers") and "replicas" not in self.errors and (replicas or 1) < 2:
            self.add_error(
                "routers",
                "Routers share the traffic among replicas: give 2 or more replicas to "
                "compare them, or untick the routers.",
            )

    def _check_reserves_fit(self, data: dict) -> None:
        """Reserves that take the whole host leave no RAM for KV blocks: said at the host
        RAM field, not shown later as a negative amount available."""
        host = data.get("host_ram_gib")
        reserves = sum(data.get(f"reserve_{name}_gib") or 0.0 for name in RESERVE_LABELS)
        if host is not None and reserves >= host > 0:
            self.add_error(
                "host_ram_gib",
                f"The reserves ({reserves:,.2f} GiB) take all of the host RAM "
                f"({host:,.2f} GiB): nothing is left for KV blocks. Lower the reserves or "
                "give the host's real RAM.",
            )

    def params(self) -> dict:
        """The cleaned values as JSON-ready parameters (console.engine reads them)."""
        data = dict(self.cleaned_data)
        data.pop("block_tokens")
        for name in PERCENT_FIELDS:
            data[name] = share(data[name])
        if data.get("model_config"):
            data["model"] = "config.json"  # the label lists and comparisons show
        return data


# the fields entered as percentages, whose stored parameters are shares
PERCENT_FIELDS = tuple(
    n for n, f in AnalysisForm.base_fields.items() if isinstance(f, PercentField)
)


def analysis_initial(params: dict, block_tokens: int) -> dict:
    """Form values from a stored analysis, to re-run it with changes."""
    initial = {k: v for k, v in params.items() if k != "model_config"}
    initial["windows"] = " ".join(f"{w:g}" for w in params.get("windows", []))
    initial["budgets_gib"] = " ".join(f"{b:g}" for b in params.get("budgets_gib") or [])
    initial["block_tokens"] = block_tokens
    for name in PERCENT_FIELDS:  # stored as shares, shown as percentages
        if params.get(name) is not None:
            initial[name] = percentage(params[name])
    return initial
