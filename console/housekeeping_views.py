"""Rename and delete pages, one pair for every kind of object (console.housekeeping): the
rename form (also inline on the object's page), and the deletion's confirmation page that
says what goes and asks for a ticked box, or why it may not go."""

from __future__ import annotations

from django.contrib import messages
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from console.benchmarks.housekeeping import BENCH_RUN
from console.housekeeping import HousekeepingError, Kind, delete, may_delete, rename, who_may_delete
from console.housekeeping_forms import DeleteForm, RenameForm
from console.policies.models import PolicyError
from console.roles import analyst_required
from console.uploads.housekeeping import ANALYSIS, UPLOAD
from console.web import forbidden

KINDS: dict[type[models.Model], Kind] = {kind.model: kind for kind in (UPLOAD, ANALYSIS, BENCH_RUN)}


def kind_of(obj: models.Model) -> Kind:
    return KINDS[type(obj)]


@require_http_methods(["GET", "POST"])
@analyst_required
def rename_view(request: HttpRequest, pk: int, kind: Kind) -> HttpResponse:
    """The rename form; posted (from here or the object's page), the new name or the form
    again with its error next to the field."""
    obj = get_object_or_404(kind.model, pk=pk)
    posted = request.method == "POST"
    form = RenameForm(request.POST if posted else None, kind=kind, current=kind.name_of(obj))
    if posted and form.is_valid():
        new_name = form.cleaned_data["name"]
        try:
            rename(kind, obj=obj, new_name=new_name, user=request.user)
        except (HousekeepingError, PolicyError) as exc:  # (PolicyError: the audit trail broken)
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Renamed to “{new_name}”; the audit trail records it.")
            return redirect(kind.page_url(obj))
    context = {"kind": kind, "obj": obj, "form": form, "what": kind.describe(obj),
               "page_url": kind.page_url(obj)}  # fmt: skip
    return render(request, "housekeeping/rename.html", context, status=400 if posted else 200)


@require_http_methods(["GET", "POST"])
@analyst_required
def delete_view(request: HttpRequest, pk: int, kind: Kind) -> HttpResponse:
    """What deleting it takes, and a box to tick; posted with the box ticked, deleted (or
    refused, saying why: the policy relying on it, its ingest still writing)."""
    obj = get_object_or_404(kind.model, pk=pk)
    if not may_delete(request.user, obj):
        return forbidden(request, who_may_delete(kind, obj))
    plan = kind.plan(obj)
    posted = request.method == "POST"
    form = DeleteForm(request.POST if posted else None, kind=kind)
    what = kind.describe(obj)
    if posted and not plan.refusal and form.is_valid():
        try:
            left = delete(kind, obj=obj, user=request.user)
        except (HousekeepingError, PolicyError) as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Deleted {what}; the audit trail records it.")
            for problem in left:
                messages.warning(request, problem)
            return redirect(kind.gone_to(obj))
    context = {"kind": kind, "obj": obj, "form": form, "plan": plan, "what": what,
               "page_url": kind.page_url(obj)}  # fmt: skip
    status = (409 if plan.refusal else 400) if posted else 200
    return render(request, "housekeeping/delete.html", context, status=status)
