"""The benchmarks forms: result files with their tags, and the SLO of the matrix page."""

from __future__ import annotations

from django import forms

from console.benchmarks.models import Tier
from console.benchmarks.services import EVERY_RATE
from console.uploads.forms import MultipleFileField


class BenchUploadForm(forms.Form):
    files = MultipleFileField(
        label="Result files (vllm bench serve --save-result JSON, or AIPerf's "
        "profile_export_aiperf.json)",
        help_text="One or more runs of the same configuration; each file's own "
        "max_concurrency is used when it has one (AIPerf files need the limit and the model).",
    )
    model_name = forms.CharField(
        max_length=200, required=False, label="Model (blank: the files' model_id)"
    )
    tier = forms.ChoiceField(choices=Tier.choices, label="KV tiers")
    ram_gib = forms.FloatField(required=False, min_value=0, label="CPU RAM for KV (GiB)")
    kv_dtype = forms.CharField(max_length=20, required=False, label="KV dtype (e.g. fp8)")
    weights_offload = forms.BooleanField(
        required=False, label="Weights offloaded to CPU (kept apart from KV offload)"
    )
    context_tokens = forms.IntegerField(
        min_value=1, max_value=2**31 - 1, label="Context length (tokens)"
    )
    concurrency = forms.IntegerField(
        min_value=1,
        max_value=2**31 - 1,
        required=False,
        label="Concurrency limit (blank: from each file)",
    )
    request_rate = forms.FloatField(
        required=False,
        min_value=0.001,
        max_value=1e6,
        label="Request rate (req/s; blank: from each file, else unlimited)",
    )
    warm = forms.BooleanField(required=False, label="Warm run (the cache was filled first)")
    driver = forms.CharField(max_length=50, required=False, label="Driver version")
    cuda = forms.CharField(max_length=50, required=False, label="CUDA version")
    engine = forms.CharField(max_length=100, required=False, label="Engine and version")
    model_revision = forms.CharField(max_length=100, required=False, label="Model revision")
    tokenizer = forms.CharField(max_length=100, required=False, label="Tokenizer")
    topology = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        label="Host topology (nvidia-smi topo -m, numactl --hardware)",
    )
    numa_binding = forms.CharField(max_length=200, required=False, label="NUMA binding used")

    def clean(self):
        data = super().clean()
        if data.get("tier") in ("ram", "ram_disk") and not data.get("ram_gib"):
            self.add_error("ram_gib", "Say how much CPU RAM the KV cache had.")
        return data


class SloForm(forms.Form):
    """The objectives, and which request rate's runs to show when there are several."""

    p99_ttft_ms = forms.FloatField(required=False, min_value=0, initial=2000,
                                   label="p99 TTFT at most (ms)")  # fmt: skip
    p99_tpot_ms = forms.FloatField(required=False, min_value=0, label="p99 TPOT at most (ms)")
    p99_itl_ms = forms.FloatField(required=False, min_value=0, initial=100,
                                  label="p99 ITL at most (ms)")  # fmt: skip
    rate = forms.ChoiceField(required=False, label="Request rate")

    def __init__(self, *args, rates: list[float | None] = (), **kwargs):
        super().__init__(*args, **kwargs)
        if len(rates) > 1:
            self.fields["rate"].choices = [("", "every rate (the worst run of a cell)")] + [
                ("unlimited" if r is None else repr(r),  # exact: it filters the runs
                 "unlimited" if r is None else f"{r:g} req/s") for r in rates]  # fmt: skip
        else:
            del self.fields["rate"]

    def chosen_rate(self) -> float | str | None:
        """Of a valid form: None for unlimited; EVERY_RATE when no rate was chosen."""
        value = self.cleaned_data.get("rate")
        if not value:
            return EVERY_RATE
        return None if value == "unlimited" else float(value)
