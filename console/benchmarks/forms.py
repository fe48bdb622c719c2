"""The benchmarks forms: result files with their tags, and the SLO of the matrix page."""

from __future__ import annotations

from django import forms

from analysis.benchmarks.scrapes import ScrapeError, parse_scrape
from analysis.params import MAX_REPLICAS, ROUTER_NAMES, ROUTERS
from console.benchmarks.models import ReplayExport, Tier
from console.benchmarks.services import EVERY_RATE
from console.uploads.forms import MultipleFileField

SCRAPE_SIDES = ("before", "after")
MAX_SCRAPE_BYTES = 16 << 20


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
    replay_export = forms.ModelChoiceField(
        queryset=ReplayExport.objects.select_related("upload"),
        required=False,
        label="The replay export this run replayed",
        empty_label="none (no prediction)",
        help_text="Its id is the x<N> in the file's name. kvscope then predicts the run's hit "
        "ratio for exactly that trace on the configuration below.",
    )
    replicas = forms.IntegerField(min_value=1, max_value=MAX_REPLICAS, initial=1,
                                  required=False, label="Replicas serving the trace")  # fmt: skip
    router = forms.ChoiceField(choices=[(r, ROUTER_NAMES[r]) for r in ROUTERS], required=False,
                               initial="round_robin", label="Router (replicas > 1)")  # fmt: skip
    gpu_cache_gib = forms.FloatField(
        required=False,
        min_value=0,
        label="GPU prefix cache per replica (GiB)",
        help_text="The KV cache the engine reported at start (vLLM: \u201cGPU KV cache "
        "size\u201d, in tokens \u00d7 KV bytes per token). Blank: the RAM tier alone.",
    )
    scrape_before = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        label="Engine metrics just before the run (paste /metrics)",
        help_text="Optional, with the one after: the engine's own hit counters measure the "
        "run's hit ratio (vLLM, SGLang, or an LMCache server). One result file only.",
    )
    scrape_before_file = forms.FileField(required=False, label="…or the file of that scrape")
    scrape_after = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        label="Engine metrics just after the run (paste /metrics)",
    )
    scrape_after_file = forms.FileField(required=False, label="…or the file of that scrape")

    def clean(self):
        data = super().clean()
        if data.get("tier") in ("ram", "ram_disk") and not data.get("ram_gib"):
            self.add_error("ram_gib", "Say how much CPU RAM the KV cache had.")
        scrapes = {side: self._scrape_text(side) for side in SCRAPE_SIDES}
        for side, text in scrapes.items():
            if text:  # each scrape readable on its own, said on its own field
                try:
                    parse_scrape(text, f"the scrape {side} the run")
                except ScrapeError as exc:
                    self.add_error(f"scrape_{side}", str(exc))
        data["scrapes"] = None
        if any(text is not None and text != "" for text in scrapes.values()):
            missing = [side for side, text in scrapes.items() if text == ""]
            for side in missing:
                self.add_error(f"scrape_{side}", f"Give the scrape {side} the run too: the "
                               "measured hit ratio is the counters' difference.")  # fmt: skip
            if len(data.get("files") or []) > 1:
                self.add_error("files", "Scrapes measure one run: upload its one result file "
                               "with them (the other files on their own).")  # fmt: skip
            if all(scrapes.values()):
                data["scrapes"] = scrapes
        return data

    def _scrape_text(self, side: str) -> str | None:
        """The pasted text, else the file's (UTF-8); "" when neither was given, None when
        what was given is refused (its error added)."""
        pasted = self.cleaned_data.get(f"scrape_{side}") or ""
        upload = self.cleaned_data.get(f"scrape_{side}_file")
        if upload is None:
            return pasted if pasted.strip() else ""
        if pasted.strip():
            self.add_error(f"scrape_{side}", "Paste the scrape or give its file, not both.")
            return None
        if upload.size > MAX_SCRAPE_BYTES:
            limit = f"{MAX_SCRAPE_BYTES >> 20} MiB"
            self.add_error(f"scrape_{side}_file", f"{upload.name} is larger than {limit}: "
                           "a /metrics page is far smaller.")  # fmt: skip
            return None
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            self.add_error(f"scrape_{side}_file", f"{upload.name} is not UTF-8 text (byte "
                           f"{exc.start}): save the /metrics page as it was served.")  # fmt: skip
            return None


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
