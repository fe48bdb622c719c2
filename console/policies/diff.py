"""What a version changes, field by field, against the version it is compared with: the
approved one before it, else the one it follows. The version page and the sign-off page
show it, so an approver reads what changed before signing the whole body.

Labels are the policy form's own (forms.BODY_PATHS and its fields' labels) and the body's
choice labels (body.LABELS), so a row names a field as the author saw it when editing."""

from __future__ import annotations

import re
from dataclasses import dataclass

from analysis.compare import router_name
from console.format import GIB, gib_text, window_name
from console.policies.body import END_OF_LIFE_EVENTS, LABELS, empty_body
from console.policies.forms import BODY_PATHS, PolicyForm, serving_text
from console.policies.models import PolicyError, PolicyVersion, VersionState
from console.policies.services import SIGNED, signed_body

NOTHING = "—"


@dataclass(frozen=True)
class Change:
    """One changed leaf of the body: its label, and its value before and now, in words."""

    label: str
    old: str
    new: str


def _label(field: str) -> str:
    """A form field's label without what the page's values say anyway: the unit a value
    was typed in (they are shown as "30 min", "8.00 GiB") and "(optional)"."""
    label = PolicyForm.base_fields[field].label
    return re.sub(r" \((s|GiB|optional)\)$", "", label)


def _seconds(value: float | None) -> str:
    return NOTHING if value is None else window_name(value)


def _gib(value: float | None) -> str:
    return NOTHING if value is None else gib_text(value * GIB)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return NOTHING if value in (None, "") else str(value)


def _format(path: tuple[str, ...], value: object) -> str:
    """A body value as the pages say it, by its place in the body."""
    key = path[-1]
    if key.endswith("_s"):
        return _seconds(value)
    if key == "size_gib":
        return _gib(value)
    if key == "enabled":
        return "on" if value else "off"
    if path[0] == "failure":
        return LABELS[key].get(value, _text(value))
    return _text(value)


def _leaf(body: dict, path: tuple[str, ...]) -> object:
    """The value at `path`; where the body lacks it (the disk contract is None without a
    disk or remote tier; tiers.encrypt_at_rest came after bodies that were signed without
    it) the value a new body starts with (body.empty_body), so absence is no change."""
    value, default = body, empty_body()
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
        default = default[part]
    return default if value is None else value


def _listed(label: str, old: list[str], new: list[str]) -> list[Change]:
    """A list's items added and removed, one row each way (order is not a change)."""
    rows = []
    removed = [item for item in old if item not in new]
    added = [item for item in new if item not in old]
    if added:
        rows.append(Change(f"{label}: added", NOTHING, "; ".join(added)))
    if removed:
        rows.append(Change(f"{label}: removed", "; ".join(removed), NOTHING))
    return rows


def _end_of_life(old: list[dict], new: list[dict]) -> list[Change]:
    """Events added and removed, and a kept event's purge deadline changed."""
    before = {item["event"]: item.get("deadline_s") for item in old}
    after = {item["event"]: item.get("deadline_s") for item in new}

    def said(event: str, deadline) -> str:
        return f"{END_OF_LIFE_EVENTS.get(event, event)} (purge within {_seconds(deadline)})"

    label = "End-of-life events"
    rows = _listed(
        label,
        [said(e, d) for e, d in before.items() if e not in after],
        [said(e, d) for e, d in after.items() if e not in before],
    )
    for event, deadline in after.items():
        if event in before and before[event] != deadline:
            name = END_OF_LIFE_EVENTS.get(event, event)
            rows.append(
                Change(
                    f"{label}: {name}, purge within", _seconds(before[event]), _seconds(deadline)
                )
            )
    return rows


def _settings(route: str, settings: dict | None) -> str:
    """A route's serving settings as the form writes them: "kv_dtype=fp8 tp=2"."""
    return serving_text({route: settings}).partition(" ")[2] if settings else NOTHING


def _serving(old: dict, new: dict) -> list[Change]:
    """Each route whose serving settings changed."""
    label = _label("serving")
    return [
        Change(
            f"{label}: {route}", _settings(route, old.get(route)), _settings(route, new.get(route))
        )
        for route in dict.fromkeys([*old, *new])
        if old.get(route) != new.get(route)
    ]


def _evidence(old: dict, new: dict) -> list[Change]:
    """The analysis relied on, and the benchmark runs cited, by their ids."""
    rows = []
    before, after = old.get("analysis_id"), new.get("analysis_id")
    if before != after:
        rows.append(
            Change(
                _label("analysis"),
                f"analysis #{before}" if before else NOTHING,
                f"analysis #{after}" if after else NOTHING,
            )
        )

    def runs(evidence: dict) -> list[str]:
        return [f"#{r['id']} {r['file']}" for r in evidence.get("benchmark_runs") or []]

    return rows + _listed(_label("bench_runs"), runs(old), runs(new))


def body_changes(old: dict, new: dict) -> list[Change]:
    """Every leaf of the body that differs between `old` and `new`, in the body's order."""
    rows = [
        *_listed(_label("routes"), old.get("routes") or [], new.get("routes") or []),
        *_serving(old.get("serving") or {}, new.get("serving") or {}),
        *_listed(_label("tenants"), old.get("tenants") or [], new.get("tenants") or []),
        *_end_of_life(old.get("end_of_life") or [], new.get("end_of_life") or []),
    ]
    for field, path in BODY_PATHS.items():
        before, after = _leaf(old, path), _leaf(new, path)
        if before != after:
            rows.append(Change(_label(field), _format(path, before), _format(path, after)))
    before, after = old.get("fleet_router"), new.get("fleet_router")
    if before != after:
        default = "the default"
        rows.append(
            Change(
                _label("fleet_router"),
                router_name(before) if before else default,
                router_name(after) if after else default,
            )
        )
    return rows + _evidence(old.get("evidence") or {}, new.get("evidence") or {})


def baseline(version: PolicyVersion) -> PolicyVersion | None:
    """The version `version` is compared with: the approved version of its policy when
    that came before it, else the one it follows (None for a first version). Only earlier
    versions: a later approved one would read as this version's changes backwards."""
    earlier = PolicyVersion.objects.filter(policy_id=version.policy_id, number__lt=version.number)
    approved = earlier.filter(state=VersionState.APPROVED).order_by("-number").first()
    return approved or earlier.order_by("-number").first()


def changes_context(version: PolicyVersion) -> dict:
    """What the pages show of the changes: the baseline, its rows, and why there are none
    when the baseline's signed body was changed after its approval (nothing compared with
    a body that is not the one signed)."""
    base = baseline(version)
    context = {"baseline": base, "changes": [], "baseline_problem": ""}
    if base is None:
        return context
    if base.state in SIGNED:
        try:
            signed_body(base)
        except PolicyError as exc:
            context["baseline_problem"] = str(exc)
            return context
    context["changes"] = body_changes(base.body, version.body)
    return context
