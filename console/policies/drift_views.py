"""Drift check pages: the form (on the version page and on its own after a refusal), the
check's result, and what the version page lists of a policy's checks."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.policies.deployed import FORMATS, DeployedError
from console.policies.drift import KINDS, DriftError
from console.policies.drift_checks import approved_version, can_check, drift_check_create
from console.policies.models import DriftCheck, PolicyError, PolicyVersion
from console.roles import reader_required
from console.web import forbidden

MAX_BYTES = 1 << 20  # a configuration, not a log: 1 MiB is plenty
PASTED = "pasted text"


class DriftForm(forms.Form):
    file = forms.FileField(
        required=False,
        label="Configuration file",
        help_text="A vllm serve command line, a vLLM JSON or YAML config, an LMCache YAML, "
        "SGLang launch_server arguments, an lmcache server command or Helm values.",
    )
    text = forms.CharField(
        required=False,
        label="Or paste it",
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        max_length=MAX_BYTES,
    )
    route = forms.CharField(
        required=False,
        max_length=200,
        label="Route",
        help_text="Only for a file that names no model (an LMCache YAML, an lmcache server "
        "command): the route it serves.",
    )

    def clean(self) -> dict:
        data = super().clean()
        upload, text = data.get("file"), (data.get("text") or "").strip()
        if upload is None and not text:
            raise forms.ValidationError("Choose a file or paste its text.")
        if upload is not None:
            if upload.size > MAX_BYTES:
                raise forms.ValidationError(
                    f"{upload.name}: larger than {MAX_BYTES >> 10:,} KiB: not a configuration."
                )
            raw = upload.read()
            try:
                data["content"] = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                line = raw[: exc.start].count(b"\n") + 1
                raise forms.ValidationError(
                    f"{upload.name}, line {line}: not UTF-8 text (a configuration is text)."
                ) from None
            data["name"] = upload.name
        else:
            data["content"], data["name"] = data["text"], PASTED
        data["route"] = (data.get("route") or "").strip()
        return data


def drift_context(version: PolicyVersion, user) -> dict:
    """What the version page shows of drift: the form, when the user may run a check and
    an approved version governs, and the policy's checks, newest first."""
    governing = approved_version(version.policy)
    checks = DriftCheck.objects.filter(version__policy=version.policy).select_related("version")
    return {
        "drift_form": DriftForm() if governing and can_check(user) else None,
        "drift_governing": governing,
        "drift_checks": checks[:50],
        "drift_formats": FORMATS,
    }


def _page(request: HttpRequest, version: PolicyVersion, form: DriftForm, status: int = 200):
    context = {"version": version, "policy": version.policy, "drift_form": form,
               "drift_governing": approved_version(version.policy)}  # fmt: skip
    return render(request, "policies/drift_new.html", context, status=status)


@require_POST
@reader_required
def drift_check_new(request: HttpRequest, pk: int) -> HttpResponse:
    """Run a check from a version page's form; a file that cannot be read comes back on
    the form's own page, saying where and why."""
    version = get_object_or_404(PolicyVersion.objects.select_related("policy"), pk=pk)
    if not can_check(request.user):
        return forbidden(request, "Only analysts and approvers check deployments.")
    form = DriftForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, version, form, status=400)
    data = form.cleaned_data
    try:
        check = drift_check_create(policy=version.policy, user=request.user,
                                   file_name=data["name"], text=data["content"],
                                   route=data["route"])  # fmt: skip
    except (DeployedError, DriftError, PolicyError) as exc:
        form.add_error(None, str(exc))
        return _page(request, version, form, status=400)
    return redirect("policy_drift_check", pk=check.pk)


@reader_required
def drift_check_detail(request: HttpRequest, pk: int) -> HttpResponse:
    check = get_object_or_404(
        DriftCheck.objects.select_related("version__policy", "uploaded_by"), pk=pk
    )
    context = {
        "check": check,
        "version": check.version,
        "policy": check.version.policy,
        "format_label": FORMATS.get(check.format, check.format),
        "kinds": KINDS,
    }
    return render(request, "policies/drift_check.html", context)
