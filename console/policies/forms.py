"""The policy form: every field of the body, flattened for HTML, and back."""

from __future__ import annotations

from collections.abc import Callable

from django import forms

from analysis.compare import router_name
from analysis.params import ROUTERS
from analysis.profiles import DTYPE_BYTES, KVProfile
from console.models import Analysis, BenchRun, JobStatus
from console.policies.body import (
    CLASSIFICATIONS,
    END_OF_LIFE_EVENTS,
    FAILURES,
    REMOTE_KINDS,
    SCOPES,
    empty_body,
)
from console.policies.reruns import RerunFor, rerun_text, rerun_versions
from console.policies.serving import route_profile, sizing

SCOPE_HELP = {
    "global": "all traffic shares blocks",
    "tenant": "a per-tenant cache salt on every request",
    "user": "a per-user cache salt on every request",
}


def _choices(mapping: dict) -> list[tuple[str, str]]:
    return [("", "— choose —"), *mapping.items()]


def _list(value: str) -> list[str]:
    return [item.strip() for item in value.replace("\n", ",").split(",") if item.strip()]


# Limits that keep a policy a policy: past them a value is a mistake (or an attack on the
# pages that show it), said at its field. 2**20 GiB is a pebibyte per tier; 10**9 s is
# 31 years.
MAX_GIB = float(1 << 20)
MAX_SECONDS = 1e9
SHORT_TEXT = 500
LONG_TEXT = 10_000
MAX_ROUTES = 50
MAX_TP = 256


def _text(label: str, *, long: bool = False, **kwargs) -> forms.CharField:
    return forms.CharField(
        required=False, label=label, max_length=LONG_TEXT if long else SHORT_TEXT, **kwargs
    )


def _gib(label: str) -> forms.FloatField:
    return forms.FloatField(required=False, min_value=0, max_value=MAX_GIB, label=label)


def _failure(key: str) -> forms.ChoiceField:
    """The field of one failure in the body (body.FAILURES: what it answers, its choices)."""
    what, choices = FAILURES[key]
    return forms.ChoiceField(
        choices=_choices(choices), required=False, label=what[0].upper() + what[1:]
    )


# the tiers' fields are "<prefix>_<key>" (disk_size_gib); every other value an author sets
# directly is its field's own name
_TIER_FIELD_PREFIX = {"cpu_ram": "cpu_ram", "local_disk": "disk", "remote": "remote"}


def _body_paths() -> dict[str, tuple[str, ...]]:
    """Form field -> its path in the body, for every value of the body's shape
    (body.empty_body) set directly; the lists (routes, tenants, end of life), serving
    and the evidence have their own fields, and GPU memory is always a tier."""
    shape = empty_body()
    paths = {key: (key,) for key, value in shape.items() if not isinstance(value, list | dict)}
    for tier, value in shape["tiers"].items():
        if isinstance(value, dict):
            prefix = _TIER_FIELD_PREFIX[tier]
            paths |= {f"{prefix}_{key}": ("tiers", tier, key) for key in value}
        elif tier != "gpu":
            paths[tier] = ("tiers", tier)
    for section in ("failure", "disk_contract", "access"):
        paths |= {key: (section, key) for key in shape[section]}
    return paths


BODY_PATHS = _body_paths()


def parse_serving(text: str, profile_of: Callable[[str], KVProfile | None] | None = None) -> dict:
    """ "route tp=2 kv_dtype=fp8" lines -> {route: {"tp": 2, "kv_dtype": "fp8"}}. With
    `profile_of` (a route's profile, None when unknown), a tp that cannot share the
    route's KV heads evenly (metrics.md section 8: 3 ranks for 8 heads) is refused."""
    out: dict = {}
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split()
        if not words:
            continue
        route, settings = words[0], {}
        for word in words[1:]:
            key, _, value = word.partition("=")
            if key == "tp" and value.isdigit() and 1 <= int(value) <= MAX_TP:
                settings["tp"] = int(value)
            elif key == "kv_dtype" and value in DTYPE_BYTES:
                settings["kv_dtype"] = value
            else:
                raise forms.ValidationError(
                    f"Line {number}: “{word}” is not tp=<1…{MAX_TP}> or "
                    f"kv_dtype=<{'|'.join(DTYPE_BYTES)}>."
                )
        if not settings:
            raise forms.ValidationError(f"Line {number}: say tp=… or kv_dtype=… for {route}.")
        if route in out:
            raise forms.ValidationError(f"Line {number}: {route} is given twice.")
        profile = profile_of(route) if profile_of and "tp" in settings else None
        if profile is not None:
            try:
                profile.check_tp(settings["tp"])
            except ValueError as exc:
                raise forms.ValidationError(
                    f"Line {number}: {route} at tp={settings['tp']}: {exc}."
                ) from None
        out[route] = settings
    return out


def serving_text(serving: dict) -> str:
    return "\n".join(
        " ".join([route, *(f"{k}={v}" for k, v in sorted(settings.items()))])
        for route, settings in serving.items()
    )


class SignForm(forms.Form):
    """An approver's decision: a comment and the password again (approve, retire). Bound
    again after a refusal, so the comment written survives a mistyped password."""

    comment = forms.CharField(
        max_length=4000, widget=forms.Textarea(attrs={"rows": 2}), label="Comment"
    )
    password = forms.CharField(
        max_length=512,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        label="Your password",
    )

    def __init__(self, *args, action: str, **kwargs):
        # "approve-comment", "retire-password": two of these on one page
        super().__init__(*args, auto_id=f"{action}-%s", **kwargs)
        if action == "retire":
            self.fields["comment"].label = "Why"
        self.fields["comment"].error_messages["required"] = (
            "An approval needs a comment." if action == "approve" else "Say why."
        )


class PolicyCreateForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="e.g. “chat routes, EU tenants”")


def _analysis_choice(analysis: Analysis, reruns: dict[int, list[RerunFor]]) -> str:
    """An analysis as the evidence chooser lists it, a policy's re-run said as such."""
    label = f"#{analysis.pk} {analysis.upload} · {analysis.title}"
    if analysis.pk in reruns:
        label += f" · policy re-run: {rerun_text(reruns[analysis.pk])}"
    return label


class PolicyForm(forms.Form):
    analysis = forms.ModelChoiceField(
        queryset=Analysis.objects.none(),
        required=False,
        label="Evidence: the analysis this policy relies on",
    )
    bench_runs = forms.ModelMultipleChoiceField(
        queryset=BenchRun.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Evidence: benchmark runs (replays with offload off and on)",
    )
    routes = _text("Model routes governed", long=True, help_text="Comma-separated.")
    serving = _text(
        "Served differently from the analysis (optional)",
        long=True,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One line per route: “route tp=2 kv_dtype=fp8”. Other routes are served "
        "with the analysis's TP and KV dtype.",
    )
    tenants = _text(
        "Tenants (optional)", long=True, help_text="Comma-separated; empty = every tenant."
    )
    lifetime_s = forms.FloatField(required=False, min_value=1, max_value=MAX_SECONDS,
                                  label="Block lifetime (s after last use)")  # fmt: skip
    purge_deadline_s = forms.FloatField(
        required=False,
        max_value=MAX_SECONDS,
        min_value=1,
        label="Maximum time to purge after an end-of-life event (s)",
    )
    scope = forms.ChoiceField(
        choices=[(s, f"{s} — {SCOPE_HELP[s]}") for s in SCOPES], label="Sharing scope"
    )
    cpu_ram_enabled = forms.BooleanField(required=False, label="CPU RAM tier enabled")
    cpu_ram_size_gib = _gib("CPU RAM (GiB)")
    # metrics.md section 8: with a fleet the tiers are per replica, for one router's curve
    fleet_router = forms.ChoiceField(
        choices=[("", "the highest fleet ceiling of a local cache per replica (not pooled)")]
        + [(r, router_name(r)) for r in ROUTERS],
        required=False,
        label="Router the sizes are for (an analysis with a fleet; sizes per replica)",
    )
    no_persistent_storage = forms.BooleanField(
        required=False, label="No persistent storage of content (forces disk and remote off)"
    )
    disk_enabled = forms.BooleanField(required=False, label="Local disk / NVMe tier enabled")
    disk_size_gib = _gib("Disk size (GiB)")
    disk_path = _text("Disk path", initial="/var/cache/kv")
    remote_enabled = forms.BooleanField(required=False, label="Remote store enabled")
    remote_kind = forms.ChoiceField(
        choices=[("", "—")] + [(k, k) for k in REMOTE_KINDS], required=False, label="Remote store"
    )
    remote_size_gib = _gib("Remote size (GiB)")
    remote_url = _text("Remote URL")
    encrypt_at_rest = forms.BooleanField(
        required=False,
        label="Blocks encrypted at rest on the disk and remote tiers (where the engine "
        "offers it: LMCache's per-salt AES-GCM serde)",
    )
    ram_full = _failure("ram_full")
    worker_exit = _failure("worker_exit")
    load_failure = _failure("load_failure")
    allowed_data = _text(
        "Data allowed on disk/remote",
        help_text="e.g. only prefixes of at least 4,096 tokens seen 3 times",
    )
    cold_after_s = forms.FloatField(
        required=False, min_value=1, max_value=MAX_SECONDS, label="A block is cold after (s)"
    )
    request_may_wait = forms.BooleanField(
        required=False, label="A request may wait for a disk block"
    )
    deleted_by = _text("Who deletes the files")
    delete_when = _text("When the files are deleted")
    on_disk_full = _text("When the disk is full")
    on_restart = _text("On a process restart")
    readers = _text("Services or processes that may read the blocks")
    classification = forms.ChoiceField(
        required=False,
        choices=[("", "— choose —")] + [(c, c) for c in CLASSIFICATIONS],
        label="Data classification of the traffic",
    )
    justification = _text("Justification", long=True, widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        done = Analysis.objects.filter(status=JobStatus.DONE)
        self.fields["analysis"].queryset = done.select_related("upload")
        reruns = rerun_versions(done.values("pk"))
        self.fields["analysis"].label_from_instance = lambda a: _analysis_choice(a, reruns)
        self.fields["bench_runs"].queryset = BenchRun.objects.defer("raw", "topology")
        self.fields["bench_runs"].label_from_instance = lambda r: f"{r} ({r.name})"
        for event, label in END_OF_LIFE_EVENTS.items():
            self.fields[f"eol_{event}"] = forms.BooleanField(required=False, label=label)
            self.fields[f"eol_{event}_deadline_s"] = forms.FloatField(
                required=False, min_value=1, max_value=MAX_SECONDS, label="purge within (s)"
            )

    # The form validates types only; what a policy must say is checked by
    # console.policies.checks before submission, so a draft can be saved half-done.

    def clean_routes(self) -> str:
        routes = _list(self.cleaned_data["routes"] or "")
        if len(routes) > MAX_ROUTES:
            raise forms.ValidationError(f"At most {MAX_ROUTES} routes ({len(routes)} given).")
        if any(len(route) > 200 for route in routes):
            raise forms.ValidationError("A route name has at most 200 characters.")
        return self.cleaned_data["routes"]

    def clean_serving(self) -> dict:
        # the analysis (a field before this one) is what an unknown route is served as
        analysis = self.cleaned_data.get("analysis")
        size = sizing(analysis.params) if analysis is not None else None
        return parse_serving(
            self.cleaned_data["serving"] or "", lambda route: route_profile(route, size)
        )

    def clean(self):
        data = super().clean()
        serving, routes = data.get("serving"), data.get("routes")
        if serving and routes is not None:
            unknown = [r for r in serving if r not in _list(routes)]
            if unknown:
                self.add_error(
                    "serving", f"Not a governed route: {', '.join(unknown)} (see the routes)."
                )
        return data

    def eol_rows(self):
        return [(self[f"eol_{e}"], self[f"eol_{e}_deadline_s"]) for e in END_OF_LIFE_EVENTS]

    def to_body(self) -> dict:
        d = self.cleaned_data
        body = empty_body()
        body.update(
            routes=_list(d["routes"] or ""),
            serving=d.get("serving") or {},
            tenants=_list(d["tenants"] or ""),
            end_of_life=[
                {"event": e, "deadline_s": d.get(f"eol_{e}_deadline_s")}
                for e in END_OF_LIFE_EVENTS
                if d.get(f"eol_{e}")
            ],
        )
        for name, (*sections, key) in BODY_PATHS.items():
            _section(body, sections)[key] = d[name]
        if d.get("fleet_router"):  # absent unless picked: a body without a fleet is as it was
            body["fleet_router"] = d["fleet_router"]
        return body


def _section(body: dict, path: list[str]) -> dict:
    """The dict at `path` inside the body (the body itself for an empty path)."""
    for part in path:
        body = body[part]
    return body


def initial_from_body(body: dict, analysis: Analysis | None) -> dict:
    initial = {
        "analysis": analysis.pk if analysis else None,
        "bench_runs": [r["id"] for r in body.get("evidence", {}).get("benchmark_runs", [])],
        "routes": ", ".join(body["routes"]),
        "serving": serving_text(body.get("serving") or {}),
        "tenants": ", ".join(body["tenants"]),
        "fleet_router": body.get("fleet_router") or "",
    }
    for name, (*sections, key) in BODY_PATHS.items():
        # a section may be absent: the disk contract is None without a disk or remote tier
        section = body
        for part in sections:
            section = section.get(part) or {}
        if key in section:
            initial[name] = section[key]
    for item in body["end_of_life"]:
        initial[f"eol_{item['event']}"] = True
        initial[f"eol_{item['event']}_deadline_s"] = item["deadline_s"]
    return initial
