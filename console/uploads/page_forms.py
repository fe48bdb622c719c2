"""The GET forms of an analysis's pages: the "does offload pay?" estimate and the replay
trace export. They validate and nothing more."""

from __future__ import annotations

from django import forms

from analysis.offload import DEFAULT_PCIE, DEFAULT_PREFILL_TOKENS_PER_S, PCIE_GB_S
from console.percent_fields import PercentField, share


class QuestionForm(forms.Form):
    """A GET form of the analysis page that reads the query only when its own key, `asked_by`,
    is in it (otherwise it shows its defaults, unbound): the page renders a view with none
    of these keys once for every reader (console.uploads.report_section)."""

    asked_by: str

    @classmethod
    def from_query(cls, query) -> QuestionForm:
        return cls(query if cls.asked_by in query else None)


class OffloadForm(QuestionForm):
    """Inputs of the "does offload pay?" estimate on the analysis page (a GET form)."""

    asked_by = "prefill_tokens_per_s"

    pcie = forms.ChoiceField(
        choices=[(g, f"PCIe {g}.0 x16 (~{b:g} GB/s)") for g, b in PCIE_GB_S.items()],
        initial=DEFAULT_PCIE,
        label="Host-to-GPU link",
    )
    bandwidth_gb_s = forms.FloatField(
        required=False, min_value=0.01, max_value=100_000, label="or a measured bandwidth (GB/s)"
    )
    prefill_tokens_per_s = forms.FloatField(
        # shown as a person would type it: 30000, not 30000.0
        initial=f"{DEFAULT_PREFILL_TOKENS_PER_S:g}",
        min_value=1,
        max_value=1e9,
        label="Prefill throughput (tokens/s)",
    )
    hit_ratio = PercentField(
        required=False,
        min_value=0,
        max_value=100,
        label="Hit ratio (%; blank: at the recommended size)",
        message="Give the hit ratio as a percentage from 0 to 100, e.g. 25.",
    )

    def estimate_args(self) -> dict:
        """Keyword arguments for analysis.offload.offload_payoff (defaults when unbound)."""
        data = self.cleaned_data if self.is_bound and self.is_valid() else {}
        pcie = data.get("pcie") or DEFAULT_PCIE
        return {
            "bandwidth_gb_s": data.get("bandwidth_gb_s") or PCIE_GB_S[pcie],
            "prefill_tokens_per_s": data.get("prefill_tokens_per_s")
            or DEFAULT_PREFILL_TOKENS_PER_S,
            "hit_ratio": None if data.get("hit_ratio") is None else share(data["hit_ratio"]),
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
