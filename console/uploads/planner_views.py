"""The first screen's answers: what a size per replica buys (a JSON reading the page asks
for as the planner types, and the same answer rendered for a browser without scripts),
and the cost view at the planner's prices."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404

from analysis.cost import cost_at, cost_view
from console.models import Analysis, JobStatus
from console.roles import reader_required
from console.uploads.planner import ask, first_screen, planned_router
from console.uploads.planner_forms import AskForm, CostForm


@reader_required
def analysis_buys(request: HttpRequest, pk: int) -> JsonResponse:
    """{"sentence", "hit_ratio", ...} for ?buy_gib=N, or {"error"} with status 400."""
    analysis = get_object_or_404(Analysis, pk=pk, status=JobStatus.DONE)
    form = AskForm(request.GET)
    if not form.is_valid():
        return JsonResponse({"error": " ".join(form.errors["buy_gib"])}, status=400)
    report = analysis.report
    entry = planned_router(report)
    try:
        got = ask(report, form.cleaned_data["buy_gib"], entry["router"] if entry else None)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse(got)


def planner_page(report: dict | None, query) -> dict:
    """The analysis page's first-screen context: "first" (planner.first_screen), the ask
    form and its answer, the cost form and its view ("cost": None without prices)."""
    if not report:
        return {"first": None}
    first = first_screen(report)
    ask_form = AskForm.from_query(query)
    answer = None
    if ask_form.is_bound and ask_form.is_valid():
        try:
            answer = ask(report, ask_form.cleaned_data["buy_gib"], first["router"])
        except ValueError as exc:
            ask_form.add_error("buy_gib", str(exc))
    cost_form = CostForm.from_query(query)
    cost = None
    if cost_form.is_bound and cost_form.is_valid():
        cost = _cost(report, first, cost_form)
    return {"first": first, "ask_form": ask_form, "answer": answer,
            "cost_form": cost_form, "cost": cost}  # fmt: skip


def _cost(report: dict, first: dict, form: CostForm) -> dict:
    """The cost view, with the rows the page names: the recommendation, the knee, the host
    and each budget asked for, read at their own sizes."""
    prices, router = form.prices(), first["router"]
    view = cost_view(report, prices, router)
    rec = first["recommendation"]
    named = [("Recommended", rec["capacity_slots"], rec["hit_ratio"])]
    if first["knee"] and router is None:  # the knee is one cache's
        named.append(("Knee", first["knee"]["capacity_slots"], first["knee"]["hit_ratio"]))
    if first["host"] and first["host"]["buys"]:
        buys = first["host"]["buys"]
        named.append(("Host budget", buys["capacity_slots"], buys["hit_ratio"]))
    named += [("Budget", b["capacity_slots"], b["hit_ratio"]) for b in first["budgets"]]
    view["named"] = [
        {"name": name, **cost_at(report, prices, slots, hit, router)} for name, slots, hit in named
    ]
    return view
