"""Policy pages: thin — check the role, validate, call a service, render."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.models import Analysis, JobStatus
from console.policies import exports
from console.policies.body import LABELS
from console.policies.diff import changes_context
from console.policies.drift_views import drift_context
from console.policies.forms import PolicyCreateForm, PolicyForm, SignForm, initial_from_body
from console.policies.models import Policy, PolicyVersion, VersionState
from console.policies.services import (
    SIGNED,
    ChecksFailed,
    PolicyError,
    findings_for,
    policy_create,
    policy_retire,
    record_export,
    signed_body,
    version_approve,
    version_delete_draft,
    version_new,
    version_request_changes,
    version_submit,
    version_update,
    worked_on,
)
from console.policies.signed_exports import export_text
from console.roles import can_analyze, can_approve, reader_required
from console.signin import client_address
from console.web import download, forbidden, is_id


@reader_required
def policy_list(request: HttpRequest) -> HttpResponse:
    policies = Policy.objects.prefetch_related("versions")
    return render(
        request,
        "policies/list.html",
        {"policies": policies, "can_analyze": can_analyze(request.user)},
    )


@reader_required
def policy_new(request: HttpRequest) -> HttpResponse:
    if not can_analyze(request.user):
        return forbidden(request, "Only analysts draft policies.")
    analysis = None
    analysis_id = request.GET.get("analysis") or request.POST.get("analysis")
    if analysis_id and is_id(str(analysis_id)):
        analysis = Analysis.objects.filter(pk=analysis_id, status=JobStatus.DONE).first()
    form = PolicyCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            version = policy_create(
                name=form.cleaned_data["name"], user=request.user, analysis=analysis
            )
        except PolicyError as exc:  # the name taken, or the audit trail broken
            form.add_error(exc.field, str(exc))
        else:
            return redirect("policy_edit", pk=version.pk)
    return render(request, "policies/new.html", {"form": form, "analysis": analysis})


def _version(pk: int) -> PolicyVersion:
    return get_object_or_404(
        PolicyVersion.objects.select_related(
            "policy", "author", "analysis__upload", "constrained_analysis"
        ),
        pk=pk,
    )


@reader_required
def version_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _render_version(request, _version(pk))


def _integrity_problem(version: PolicyVersion) -> str:
    """Why a signed version's body cannot be trusted as signed ("" when it can)."""
    if version.state not in SIGNED:
        return ""
    try:
        signed_body(version)
    except PolicyError as exc:
        return str(exc)
    return ""


def _render_version(
    request: HttpRequest,
    version: PolicyVersion,
    approve_form: SignForm | None = None,
    retire_form: SignForm | None = None,
) -> HttpResponse:
    """The version page; with a bound form after a refused approval or retirement, so
    what the reviewer wrote is still there next to the error."""
    user = request.user
    context = {
        "version": version,
        "policy": version.policy,
        "versions": version.policy.versions.all(),
        "findings": findings_for(version)
        if version.editable or version.state == VersionState.IN_REVIEW
        else [],
        "reviews": version.reviews.select_related("actor"),
        "can_edit": can_analyze(user) and version.editable,
        "can_submit": can_analyze(user) and version.editable,
        "can_delete": can_analyze(user)
        and version.author_id == user.pk
        and version.state == VersionState.DRAFT
        and not version.reviews.exists(),
        "can_review": can_approve(user) and version.state == VersionState.IN_REVIEW,
        "is_author": worked_on(version, user),
        "can_new_version": can_analyze(user)
        and version.policy.retired_at is None
        and version.state in (VersionState.APPROVED, VersionState.SUPERSEDED),
        "can_retire": can_approve(user)
        and version.policy.retired_at is None
        and version.state == VersionState.APPROVED,
        "integrity_problem": _integrity_problem(version),
        # one download per LMCache file: (file name, its routes, the route to ask for)
        "lmcache_files": [
            (name, routes, routes[0]) for name, routes in exports.lmcache_files(version.body)
        ]
        if version.state == VersionState.APPROVED
        else [],
        # the other exports' links: (file name, label), LMCache YAML's being lmcache_files
        "export_links": [
            (k, label) for k, (_, name, label) in exports.KINDS.items() if name != "lmcache"
        ],
        "approve_form": approve_form or SignForm(action="approve"),
        "retire_form": retire_form or SignForm(action="retire"),
        "labels": LABELS,
        **changes_context(version),  # what the approver reads before the approve button
        **drift_context(version, user),  # the drift check's form and the policy's checks
    }
    return render(request, "policies/version.html", context)


@reader_required
def version_edit(request: HttpRequest, pk: int) -> HttpResponse:
    version = _version(pk)
    if not can_analyze(request.user):
        return forbidden(request, "Only analysts edit policies.")
    if not version.editable:
        messages.error(request, "Only a draft can be edited; approved versions are immutable.")
        return redirect("policy_version", pk=pk)
    too_large, data = "", None
    if request.method == "POST":
        try:
            data = request.POST
        except (RequestDataTooBig, TooManyFieldsSent):
            # past Django's request limits: the form is shown again as stored, saying so
            data = None
            too_large = (
                "Nothing was saved: the form sent is larger than the server accepts "
                f"({settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024:,} KiB). Policy texts "
                "are limited to 10,000 characters each."
            )
    if request.method == "POST" and data is not None:
        form = PolicyForm(data)
        if form.is_valid():
            try:
                version_update(
                    version=version,
                    body=form.to_body(),
                    user=request.user,
                    analysis=form.cleaned_data["analysis"],
                    bench_runs=list(form.cleaned_data["bench_runs"]),
                )
            except PolicyError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, "Saved.")
                return redirect("policy_version", pk=pk)
    else:
        form = PolicyForm(initial=initial_from_body(version.body, version.analysis))
    context = {"form": form, "version": version, "too_large": too_large}
    return render(request, "policies/edit.html", context)


def _post_action(request: HttpRequest, pk: int, action) -> HttpResponse:
    version = _version(pk)
    try:
        action(version)
    except ChecksFailed as exc:
        messages.error(request, f"Not submitted: {exc}. See the checks below.")
    except PolicyError as exc:
        messages.error(request, str(exc))
    return redirect("policy_version", pk=version.pk)


@require_POST
@reader_required
def version_submit_view(request: HttpRequest, pk: int) -> HttpResponse:
    def act(v):
        version_submit(version=v, user=request.user)
        messages.success(request, "Submitted for review.")

    return _post_action(request, pk, act)


@require_POST
@reader_required
def version_request_changes_view(request: HttpRequest, pk: int) -> HttpResponse:
    def act(v):
        version_request_changes(
            version=v, user=request.user, comment=request.POST.get("comment", "")
        )
        messages.success(request, "Sent back to the author.")

    return _post_action(request, pk, act)


def _signed_decision(
    request: HttpRequest,
    pk: int,
    action: str,
    decide: Callable[[PolicyVersion, dict, str], None],
    done: str,
) -> HttpResponse:
    """Approve or retire: a refusal that belongs to the form (the password, the comment)
    re-renders the page with the form as it was sent; any other goes back with a message."""
    version = _version(pk)
    if not can_approve(request.user):
        messages.error(request, "Only approvers approve or retire policies.")
        return redirect("policy_version", pk=version.pk)
    form = SignForm(request.POST, action=action)
    if form.is_valid():
        try:
            decide(version, form.cleaned_data, client_address(request))
        except PolicyError as exc:
            if exc.field is None:
                messages.error(request, str(exc))
                return redirect("policy_version", pk=version.pk)
            form.add_error(exc.field, str(exc))
        else:
            messages.success(request, done)
            return redirect("policy_version", pk=version.pk)
    version = _version(pk)
    forms_ = {"approve_form": form} if action == "approve" else {"retire_form": form}
    return _render_version(request, version, **forms_)


@require_POST
@reader_required
def version_approve_view(request: HttpRequest, pk: int) -> HttpResponse:
    def decide(v: PolicyVersion, data: dict, address: str) -> None:
        version_approve(version=v, user=request.user, password=data["password"],
                        comment=data["comment"], address=address)  # fmt: skip

    return _signed_decision(request, pk, "approve", decide, "Approved and signed off.")


@require_POST
@reader_required
def version_new_view(request: HttpRequest, pk: int) -> HttpResponse:
    version = _version(pk)
    try:
        new = version_new(policy=version.policy, user=request.user)
    except PolicyError as exc:
        messages.error(request, str(exc))
        return redirect("policy_version", pk=pk)
    return redirect("policy_edit", pk=new.pk)


@require_POST
@reader_required
def version_delete_view(request: HttpRequest, pk: int) -> HttpResponse:
    version = _version(pk)
    try:
        policy = version_delete_draft(version=version, user=request.user)
    except PolicyError as exc:
        messages.error(request, str(exc))
        return redirect("policy_version", pk=pk)
    messages.success(request, f"Draft v{version.number} deleted.")
    if policy is not None:
        return redirect("policy_version", pk=policy.versions.first().pk)
    return redirect("policy_list")


@require_POST
@reader_required
def policy_retire_view(request: HttpRequest, pk: int) -> HttpResponse:
    def decide(v: PolicyVersion, data: dict, address: str) -> None:
        policy_retire(policy=v.policy, user=request.user, password=data["password"],
                      comment=data["comment"], address=address)  # fmt: skip

    return _signed_decision(request, pk, "retire", decide, "The policy is retired.")


@reader_required
def signoff_page(request: HttpRequest, pk: int) -> HttpResponse:
    version = _version(pk)
    if not hasattr(version, "signoff"):
        messages.error(request, "This version has no sign-off yet.")
        return redirect("policy_version", pk=pk)
    context = {
        "version": version,
        "policy": version.policy,
        "signoff": version.signoff,
        "reviews": version.reviews.select_related("actor"),
        "labels": LABELS,
        **changes_context(version),
    }
    try:
        body = signed_body(version)
    except PolicyError as exc:
        # refuse to present a changed body under the signature it no longer matches
        context["integrity_problem"] = str(exc)
        return render(request, "policies/signoff.html", context, status=409)
    # what the engines cannot enforce of the policy, listed beside the signature
    context["engine_gaps"] = exports.gaps(body)
    return render(request, "policies/signoff.html", context)


@reader_required
def version_export(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    """An export of an approved version (exports.KINDS). LMCache YAML takes ?route=<route>
    for that route's file when the routes need different ones (exports.lmcache_files);
    without it, the first route's (the only file when all routes share one)."""
    version = _version(pk)
    if kind not in exports.KINDS:
        return HttpResponse(status=404)
    if version.state != VersionState.APPROVED:
        messages.error(request, "Only an approved version can be exported.")
        return redirect("policy_version", pk=pk)
    content_type, name, _ = exports.KINDS[kind]
    route = request.GET.get("route") if name == "lmcache" else None
    filename = kind
    try:
        text = export_text(version, name, route=route)
        if name == "lmcache":  # the name its vllm serve command gives it
            files = exports.lmcache_files(version.body)
            filename = exports.lmcache_file_of(version.body, route) if route else files[0][0]
        record_export(version=version, user=request.user, kind=filename)
    except (PolicyError, exports.ExportChoice) as exc:
        messages.error(request, str(exc))
        return redirect("policy_version", pk=pk)
    slug = "".join(c if c.isalnum() else "-" for c in version.policy.name.lower())
    return download(text, f"{slug}-v{version.number}-{filename}", content_type)
