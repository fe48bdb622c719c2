"""The first screen's GET forms: "what does N GiB per replica buy?" and the cost view's
prices. They validate and nothing more; the engine computes (analysis.metrics.at_budget,
analysis.cost)."""

from __future__ import annotations

from django import forms

from analysis.cost import Prices
from analysis.offload import DEFAULT_PREFILL_TOKENS_PER_S
from console.uploads.page_forms import QuestionForm
from console.uploads.planner import MAX_ASK_GIB


class AskForm(QuestionForm):
    """A size per replica, in GiB (the page's unit for sizes)."""

    asked_by = "buy_gib"

    buy_gib = forms.FloatField(
        min_value=0.001,
        max_value=MAX_ASK_GIB,
        label="What does",
        widget=forms.NumberInput(attrs={"step": "any", "inputmode": "decimal", "size": 8}),
    )


class CostForm(QuestionForm):
    """The prices the cost view needs: no price, no cost view."""

    asked_by = "ram_price"

    ram_price = forms.FloatField(
        min_value=0.0001, max_value=1e6, label="Host RAM price (per GiB-month)",
        widget=forms.NumberInput(attrs={"step": "any", "inputmode": "decimal"}),
    )  # fmt: skip
    gpu_price = forms.FloatField(
        min_value=0.0001, max_value=1e6, label="GPU price (per hour)",
        widget=forms.NumberInput(attrs={"step": "any", "inputmode": "decimal"}),
    )  # fmt: skip
    # its own name: the offload estimate's form on the same page reads prefill_tokens_per_s
    cost_prefill_tokens_per_s = forms.FloatField(
        required=False, min_value=1, max_value=1e9, label="Prefill throughput (tokens/s)",
        help_text=f"Blank: {DEFAULT_PREFILL_TOKENS_PER_S:,.0f}, the offload estimate's default.",
    )  # fmt: skip

    def prices(self) -> Prices:
        data = self.cleaned_data
        return Prices(
            ram_per_gib_month=data["ram_price"],
            gpu_per_hour=data["gpu_price"],
            prefill_tokens_per_s=data.get("cost_prefill_tokens_per_s")
            or DEFAULT_PREFILL_TOKENS_PER_S,
        )
