"""Forms: they validate and nothing more. Parameter values are kept as plain JSON so an
analysis can be re-run and compared later."""

from __future__ import annotations

import datetime as dt
import json
import math

from django import forms
from django.utils import timezone

from analysis.budgets import WEIGHT_DTYPE_BYTES
from analysis.ingest import DEFAULT_BLOCK_TOKENS
from analysis.offload import DEFAULT_PCIE, DEFAULT_PREFILL_TOKENS_PER_S, PCIE_GB_S
from analysis.profiles import DEFAULT_PROFILE, DTYPE_BYTES, PRESETS, ProfileError, preset
from analysis.profiles import profile_from_config as parse_model_config
from analysis.reuse import SCOPES
from console.sniff import refusal

# The block-size choice "the format's own": stored as no explicit size (Upload.block_sizes
# == []), so the engine takes each format's default (analysis.ingest.DEFAULT_BLOCK_TOKENS).
FORMAT_OWN = 0
_CHAT, _TRACE = DEFAULT_BLOCK_TOKENS["chat"], DEFAULT_BLOCK_TOKENS["mooncake"]
BLOCK_SIZE_CHOICES = [
    (FORMAT_OWN, f"The format's own (chat {_CHAT}, Mooncake {_TRACE} …)"),
    (16, "16 (vLLM block)"),
    (64, "64"),
    (128, "128"),
    (256, "256 (LMCache chunk)"),
    (512, "512"),
]
# one field per host reserve of analysis.metrics.HOST_RESERVES
RESERVE_LABELS = {
    "os": "Operating system",
    "page_cache": "Page cache",
    "tokenizers": "Tokenizers",
    "request_buffers": "Request buffers",
    "serving_process": "Serving process",
    "cache_process": "Separate cache process (e.g. LMCache server)",
}


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    widget = MultipleFileInput

    def clean(self, data, initial=None):
        files = data if isinstance(data, list | tuple) else [data]
        files = [f for f in files if f]
        if not files:
            raise forms.ValidationError("Choose at least one log file.")
        return [super(MultipleFileField, self).clean(f, initial) for f in files]


BLOCK_SIZES_HELP = (
    f"The format's own is the default: {_CHAT} tokens for chat logs (LMCache's chunk), "
    f"{_TRACE} for pre-hashed Mooncake traces (the size their hash_ids were made with). "
    "Ticking a size of your own unticks it (the two do not mix). A chat log is keyed at "
    "every size ticked, chosen now: token ids are never stored, so other sizes need a new "
    "upload. A pre-hashed trace has one size: 512 if ticked, else the smallest ticked."
)


def block_sizes_field() -> forms.TypedMultipleChoiceField:
    """The block-size checkboxes of the upload form and of Retry (one definition)."""
    return forms.TypedMultipleChoiceField(
        choices=BLOCK_SIZE_CHOICES,
        coerce=int,
        initial=[FORMAT_OWN],
        widget=forms.CheckboxSelectMultiple,
        label="Block sizes (tokens)",
        help_text=BLOCK_SIZES_HELP,
        error_messages={"required": "Tick the format's own or at least one block size."},
    )


def chosen_block_sizes(ticked: list[int]) -> list[int]:
    """What to store: the sizes ticked, or [] for the format's own. Both ticked is refused
    rather than one silently dropped (the page's script unticks the other; this is for a
    browser without it)."""
    own = FORMAT_OWN in ticked
    sizes = sorted({size for size in ticked if size != FORMAT_OWN})
    if own and sizes:
        raise forms.ValidationError(
            "Tick the format's own or sizes of your own, not both: untick “The format's "
            f"own” to key at {', '.join(map(str, sizes))}, or untick those sizes."
        )
    return sizes


def block_sizes_initial(stored: list[int]) -> list[int]:
    """The checkboxes ticked for stored sizes (a retry starts from what was chosen)."""
    return list(stored) or [FORMAT_OWN]


class RetryForm(forms.Form):
    """Retry a failed ingest, with the block sizes changed if need be (a trace read at
    the wrong size fails every line; the message names the size that fits)."""

    block_sizes = block_sizes_field()

    def clean_block_sizes(self) -> list[int]:
        return chosen_block_sizes(self.cleaned_data["block_sizes"])


class UploadForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="e.g. “prod-eu, Monday”")
    files = MultipleFileField(
        label="Log files",
        help_text="Chat-completion JSONL or pre-hashed (Mooncake) traces, plain or .gz. "
        "Several files are analyzed as one log.",
    )
    format = forms.ChoiceField(
        choices=[
            ("auto", "Detect from the first line"),
            ("chat", "Chat-completion JSONL"),
            ("mooncake", "Pre-hashed trace (Mooncake)"),
        ],
        initial="auto",
    )
    block_sizes = block_sizes_field()
    trace_tails = forms.ChoiceField(
        choices=[
            ("cached", "Cached, like every block (Mooncake's convention)"),
            ("uncached", "An uncached tail (vLLM; kvscope's own replay exports)"),
        ],
        initial="cached",
        required=False,
        widget=forms.RadioSelect,
        label="Pre-hashed traces: a last block with fewer tokens than the block size is",
    )
    previews = forms.BooleanField(
        required=False,
        label="Keep text previews of segments",
        help_text="Off by default: without it no prompt text is stored anywhere.",
    )
    retention = forms.ChoiceField(
        choices=[
            ("delete", "Delete the raw file after ingest"),
            ("keep", "Keep the raw file until a date"),
        ],
        initial="delete",
        widget=forms.RadioSelect,
        label="Raw file",
    )
    keep_until = forms.DateField(
        required=False, widget=forms.DateInput(attrs={"type": "date"}), label="Keep until"
    )

    def clean_files(self):
        files = self.cleaned_data["files"]
        problems = []
        for upload in files:
            head = upload.read(4096)
            upload.seek(0)
            problem = refusal(upload.name, head)
            if problem:
                problems.append(problem)
        if problems:
            raise forms.ValidationError(problems)
        return files

    def clean_block_sizes(self) -> list[int]:
        return chosen_block_sizes(self.cleaned_data["block_sizes"])

    def clean(self):
        data = super().clean()
        if data.get("retention") == "keep":
            until = data.get("keep_until")
            if until is None:
                self.add_error("keep_until", "Give the date the raw file may be deleted.")
            elif until <= timezone.localdate():
                self.add_error("keep_until", "The date must be in the future.")
            elif until > timezone.localdate() + dt.timedelta(days=366):
                self.add_error("keep_until", "Keep raw files for at most a year.")
        else:
            data["keep_until"] = None
        return data


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


def _windows(value: str) -> list[float]:
    try:
        windows = [float(part) for part in value.replace(",", " ").split()]
    except ValueError:
        raise forms.ValidationError("Windows are seconds, e.g. “300 3600 86400”.") from None
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
    windows = forms.CharField(initial="300 3600 86400", label="Reuse windows (s)")
    scope = forms.ChoiceField(
        choices=[(s, s) for s in SCOPES], initial="global", label="Sharing scope"
    )
    lifetime = forms.FloatField(
        required=False,
        min_value=1,
        max_value=MAX_SECONDS,
        label="Block lifetime (s)",
        help_text="Leave empty for no lifetime.",
    )
    target = forms.FloatField(
        initial=0.9, min_value=0.01, max_value=1, label="Target share of the ceiling"
    )
    headroom = forms.FloatField(initial=0.1, min_value=0, max_value=5, label="Headroom")
    tp = forms.IntegerField(initial=1, min_value=1, max_value=64, label="Tensor-parallel ranks")
    min_reuses = forms.IntegerField(
        initial=2, min_value=1, max_value=MAX_COUNT, label="Reuses to call a segment hot"
    )
    doc_min_tokens = forms.IntegerField(
        initial=512,
        min_value=1,
        max_value=MAX_COUNT,
        label="Tokens for a message to count as a document",
    )
    host_ram_gib = forms.FloatField(
        required=False, min_value=0, max_value=MAX_HOST_GIB, label="Host RAM (GiB)"
    )
    gpu_memory_gib = forms.FloatField(
        required=False, min_value=1, max_value=MAX_GPU_GIB, label="GPU memory (GiB)"
    )
    weight_dtype = forms.ChoiceField(
        choices=[(d, d) for d in WEIGHT_DTYPE_BYTES], initial="bf16", label="Weight dtype"
    )
    params_b = forms.FloatField(
        required=False,
        min_value=0.01,
        max_value=MAX_PARAMS_B,
        label="Parameters (billions)",
        help_text="Empty: the preset's.",
    )
    concurrent_sequences = forms.IntegerField(
        initial=32, min_value=0, max_value=MAX_SEQUENCES, label="Concurrent sequences"
    )
    context_tokens = forms.IntegerField(
        initial=8192, min_value=0, max_value=MAX_CONTEXT_TOKENS, label="Context per sequence"
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
        return data

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
        if data.get("model_config"):
            data["model"] = "config.json"  # the label lists and comparisons show
        return data


def analysis_initial(params: dict, block_tokens: int) -> dict:
    """Form values from a stored analysis, to re-run it with changes."""
    initial = {k: v for k, v in params.items() if k != "model_config"}
    initial["windows"] = " ".join(f"{w:g}" for w in params.get("windows", []))
    initial["block_tokens"] = block_tokens
    return initial


class OffloadForm(forms.Form):
    """Inputs of the "does offload pay?" estimate on the analysis page (a GET form)."""

    pcie = forms.ChoiceField(
        choices=[(g, f"PCIe {g}.0 x16 (~{b:g} GB/s)") for g, b in PCIE_GB_S.items()],
        initial=DEFAULT_PCIE,
        label="Host-to-GPU link",
    )
    bandwidth_gb_s = forms.FloatField(
        required=False, min_value=0.01, max_value=100_000, label="or a measured bandwidth (GB/s)"
    )
    prefill_tokens_per_s = forms.FloatField(
        initial=DEFAULT_PREFILL_TOKENS_PER_S,
        min_value=1,
        max_value=1e9,
        label="Prefill throughput (tokens/s)",
    )
    hit_ratio = forms.FloatField(
        required=False, min_value=0, max_value=1, label="Hit ratio (blank: at the recommended size)"
    )

    def estimate_args(self) -> dict:
        """Keyword arguments for analysis.offload.offload_payoff (defaults when unbound)."""
        data = self.cleaned_data if self.is_bound and self.is_valid() else {}
        pcie = data.get("pcie") or DEFAULT_PCIE
        return {
            "bandwidth_gb_s": data.get("bandwidth_gb_s") or PCIE_GB_S[pcie],
            "prefill_tokens_per_s": data.get("prefill_tokens_per_s")
            or DEFAULT_PREFILL_TOKENS_PER_S,
            "hit_ratio": data.get("hit_ratio"),
        }


class ReplayForm(forms.Form):
    """What to put in a replay trace (the export page's GET form)."""

    block_tokens = forms.TypedChoiceField(coerce=int, label="Block size (tokens)")
    start_s = forms.FloatField(
        required=False, min_value=0, max_value=1e9, label="From (s after the start)"
    )
    end_s = forms.FloatField(
        required=False, min_value=0, max_value=1e9, label="To (s after the start)"
    )
    tenants = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Tenants (none ticked: all)"
    )
    time_scale = forms.FloatField(
        initial=1.0, min_value=0.001, max_value=1000, label="Time scale (0.5: twice as fast)"
    )
    labels = forms.BooleanField(required=False, label="Write tenant and user labels")

    def __init__(self, *args, block_sizes: list[int], tenants: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["block_tokens"].choices = [(b, str(b)) for b in block_sizes]
        self.fields["block_tokens"].initial = block_sizes[0] if block_sizes else None
        self.fields["tenants"].choices = [(t, t or "(none)") for t in tenants]

    def clean(self):
        data = super().clean()
        start, end = data.get("start_s"), data.get("end_s")
        if start is not None and end is not None and end <= start:
            self.add_error("end_s", "The end must come after the start.")
        return data

    def options(self) -> dict:
        """Keyword arguments of analysis.replay.ReplayOptions."""
        data = self.cleaned_data
        return {
            "start_s": data.get("start_s"),
            "end_s": data.get("end_s"),
            "tenants": data.get("tenants") or None,
            "time_scale": data.get("time_scale") or 1.0,
            "labels": bool(data.get("labels")),
        }
