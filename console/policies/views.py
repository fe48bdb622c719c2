"""Policy pages: thin — check the role, validate, call a service, render."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.models import Analysis, JobStatus
from console.policies import exports
from console.policies.audit import verify
from console.policies.body import END_OF_LIFE_EVENTS, LOAD_FAILURE, RAM_FULL, WORKER_EXIT
from console.policies.forms import PolicyCreateForm, PolicyForm, initial_from_body
from console.policies.models import AuditEvent, Policy, PolicyVersion, VersionState
from console.policies.services import (
    ChecksFailed,
    PolicyError,
    findings_for,
    policy_create,
    policy_retire,
    record_export,
    version_approve,
    version_delete_draft,
    version_new,
    version_request_changes,
    version_submit,
    version_update,
)
from console.roles import can_approve, can_author, reader_required
from console.views import _is_id


@reader_required
def policy_list(request: HttpRequest) -> HttpResponse:
    policies = Policy.objects.prefetch_related("versions")
    return render(
        request,
        "policies/list.html",
        {"policies": policies, "can_author": can_author(request.user)},
    )


@reader_required
def policy_new(request: HttpRequest) -> HttpResponse:
    if not can_author(request.user):
        return _forbidden(request, "Only analysts draft policies.")
    analysis = None
    analysis_id = request.GET.get("analysis") or request.POST.get("analysis")
    if analysis_id and _is_id(str(analysis_id)):
        analysis = Analysis.objects.filter(pk=analysis_id, status=JobStatus.DONE).first()
    form = PolicyCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            version = policy_create(
                name=form.cleaned_data["name"], user=request.user, analysis=analysis
            )
        except PolicyError as exc:
            form.add_error("name", str(exc))
        else:
            return redirect("policy_edit", pk=version.pk)
    return render(request, "policies/new.html", {"form": form, "analysis": analysis})


def _forbidden(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "403.html", {"exception": message}, status=403)


def _version(pk: int) -> PolicyVersion:
    return get_object_or_404(
        PolicyVersion.objects.select_related(
            "policy", "author", "analysis__upload", "constrained_analysis"
        ),
        pk=pk,
    )


@reader_required
def version_detail(request: HttpRequest, pk: int) -> HttpResponse:
    version = _version(pk)
    user = request.user
    context = {
        "version": version,
        "policy": version.policy,
        "versions": version.policy.versions.all(),
        "findings": findings_for(version)
        if version.editable or version.state == VersionState.IN_REVIEW
        else [],
        "reviews": version.reviews.select_related("actor"),
        "can_edit": can_author(user) and version.editable,
        "can_submit": can_author(user) and version.editable,
        "can_delete": can_author(user)
        and version.state == VersionState.DRAFT
        and not version.reviews.exists(),
        "can_review": can_approve(user) and version.state == VersionState.IN_REVIEW,
        "is_author": version.author_id == user.pk,
        "can_new_version": can_author(user)
        and version.policy.retired_at is None
        and version.state in (VersionState.APPROVED, VersionState.SUPERSEDED),
        "can_retire": can_approve(user)
        and version.policy.retired_at is None
        and version.state == VersionState.APPROVED,
        "labels": {
            "eol": END_OF_LIFE_EVENTS,
            "ram_full": RAM_FULL,
            "worker_exit": WORKER_EXIT,
            "load_failure": LOAD_FAILURE,
        },
    }
    return render(request, "policies/version.html", context)


@reader_required
def version_edit(request: HttpRequest, pk: int) -> HttpResponse:
    version = _version(pk)
    if not can_author(request.user):
        return _forbidden(request, "Only analysts edit policies.")
    if not version.editable:
        messages.error(request, "Only a draft can be edited; approved versions are immutable.")
        return redirect("policy_version", pk=pk)
    if request.method == "POST":
        form = PolicyForm(request.POST)
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
    return render(request, "policies/edit.html", {"form": form, "version": version})


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


@require_POST
@reader_required
def version_approve_view(request: HttpRequest, pk: int) -> HttpResponse:
    def act(v):
        version_approve(
            version=v,
            user=request.user,
            password=request.POST.get("password", ""),
            comment=request.POST.get("comment", ""),
        )
        messages.success(request, "Approved and signed off.")

    return _post_action(request, pk, act)


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
    def act(v):
        policy_retire(policy=v.policy, user=request.user, comment=request.POST.get("comment", ""))
        messages.success(request, "The policy is retired.")

    return _post_action(request, pk, act)


@reader_required
def signoff_page(request: HttpRequest, pk: int) -> HttpResponse:
    version = _version(pk)
    if not hasattr(version, "signoff"):
        messages.error(request, "This version has no sign-off yet.")
        return redirect("policy_version", pk=pk)
    return render(
        request,
        "policies/signoff.html",
        {
            "version": version,
            "policy": version.policy,
            "signoff": version.signoff,
            "reviews": version.reviews.select_related("actor"),
            "labels": {
                "eol": END_OF_LIFE_EVENTS,
                "ram_full": RAM_FULL,
                "worker_exit": WORKER_EXIT,
                "load_failure": LOAD_FAILURE,
            },
        },
    )


EXPORTS = {
    "lmcache.yaml": ("application/yaml", "lmcache"),
    "vllm-serve.sh": ("text/x-shellscript", "vllm"),
    "helm-values.yaml": ("application/yaml", "helm"),
}


@reader_required
def version_export(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    version = _version(pk)
    if kind not in EXPORTS:
        return HttpResponse(status=404)
    if version.state != VersionState.APPROVED:
        messages.error(request, "Only an approved version can be exported.")
        return redirect("policy_version", pk=pk)
    content_type, name = EXPORTS[kind]
    text = export_text(version, name)
    record_export(version=version, user=request.user, kind=kind)
    response = HttpResponse(text, content_type=content_type)
    slug = "".join(c if c.isalnum() else "-" for c in version.policy.name.lower())
    response["Content-Disposition"] = f'attachment; filename="{slug}-v{version.number}-{kind}"'
    return response


def export_text(version: PolicyVersion, name: str) -> str:
    signoff = version.signoff
    body = version.body
    evidence = body.get("evidence") or {}
    params = evidence.get("params") or {}
    tp = int(params.get("tp") or 1)
    model = body["routes"][0] if body["routes"] else params.get("model", "MODEL")
    meta = {
        "name": version.policy.name,
        "version": version.number,
        "digest": version.digest,
        "approved_at": signoff.at.isoformat(timespec="seconds"),
        "approved_by": signoff.approver_name,
        "lifetime_s": body["lifetime_s"],
        "scope": body["scope"],
    }
    if name == "lmcache":
        return exports.lmcache_yaml(
            body, meta, chunk_size=evidence.get("block_tokens") or 256, tp=tp
        )
    if name == "vllm":
        return exports.vllm_flags(body, meta, model=model, tp=tp)
    return exports.helm_values(body, meta, model=model, tp=tp)


@reader_required
def audit_log(request: HttpRequest) -> HttpResponse:
    events = AuditEvent.objects.order_by("-pk")[:500]
    return render(request, "policies/audit.html", {"events": events, "chain": verify()})
