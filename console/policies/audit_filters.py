"""Which audit events a reader asked for: the filter form of the audit page (who, which
object, which kind of action, which days) and the condition it stands for — the same one
the page lists and the export marks as selected."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.db.models import Q
from django.utils import timezone

from console.policies.audit_words import ID_KEYS, object_name, words
from console.policies.models import AuditEvent
from console.web import is_id

# offered even before any event of theirs exists (the others as they appear)
KNOWN_OBJECTS = ("Upload", "Analysis", "Policy", "PolicyVersion", "BenchRun")
KNOWN_KINDS = ("upload", "analysis", "benchmark_run", "policy", "auth")
FIELDS = ("actor", "object_type", "object_id", "kind", "since", "until")


def _distinct(column: str) -> list[str]:
    return list(AuditEvent.objects.order_by().values_list(column, flat=True).distinct())


def kind_of(action: str) -> str:
    """An action's kind, the part before its first dot: "policy.approve" -> "policy"."""
    return action.partition(".")[0]


class AuditFilterForm(forms.Form):
    actor = forms.CharField(
        required=False,
        max_length=150,
        label="Who (account name)",
        # the names that acted so far, suggested as one types (the page's datalist)
        widget=forms.TextInput(attrs={"list": "audit-actors", "autocomplete": "off"}),
    )
    object_type = forms.ChoiceField(required=False, label="Object")
    object_id = forms.CharField(required=False, max_length=18, label="Object number")
    kind = forms.ChoiceField(required=False, label="Kind of action")
    since = forms.DateField(
        required=False, label="From (day)", widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False,
        label="Until (day, included)",
        widget=forms.DateInput(attrs={"type": "date"}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        types = sorted({*KNOWN_OBJECTS, *_distinct("object_type")}, key=object_name)
        self.fields["object_type"].choices = [("", "any"), *((t, object_name(t)) for t in types)]
        kinds = sorted({*KNOWN_KINDS, *map(kind_of, _distinct("action"))})
        self.fields["kind"].choices = [("", "any"), *((k, words(k)) for k in kinds)]
        self.actors = sorted(_distinct("actor_name"))  # suggested as one types

    def clean_object_id(self) -> str:
        value = self.cleaned_data["object_id"].strip()
        if value and not is_id(value):
            raise forms.ValidationError("An object number is digits only, such as 12.")
        return value

    def clean(self) -> dict:
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            raise forms.ValidationError("The first day is after the last one.")
        return data

    def chosen(self) -> dict[str, str]:
        """The filters set, as text (the export file records them): {} for none."""
        out = {}
        for name in FIELDS:
            value = self.cleaned_data.get(name)
            if value not in (None, ""):
                out[name] = value.isoformat() if isinstance(value, dt.date) else str(value)
        return out

    def condition(self) -> Q:
        """The events asked for (days in the configured zone, the last one whole)."""
        data, q = self.cleaned_data, Q()
        if data.get("actor"):
            q &= Q(actor_name=data["actor"])
        if data.get("object_type") and data.get("object_id"):
            q &= _naming(data["object_type"], data["object_id"])
        elif data.get("object_type"):
            q &= Q(object_type=data["object_type"])
        elif data.get("object_id"):
            q &= Q(object_id=data["object_id"])
        if data.get("kind"):
            q &= Q(action=data["kind"]) | Q(action__startswith=f"{data['kind']}.")
        if data.get("since"):
            q &= Q(at__gte=_midnight(data["since"]))
        if data.get("until"):
            q &= Q(at__lt=_midnight(data["until"] + dt.timedelta(days=1)))
        return q


def _naming(object_type: str, object_id: str) -> Q:
    """The events about the object, and those naming it by id in their details: a drift
    check's event is the check's, and names the policy version it was checked against."""
    q = Q(object_type=object_type, object_id=object_id)
    for key, named_type in ID_KEYS.items():
        if named_type == object_type:
            q |= Q(**{f"details__{key}": int(object_id)})
    return q


def _midnight(day: dt.date) -> dt.datetime:
    """The day's first moment in the configured zone (what the page's days are)."""
    return timezone.make_aware(dt.datetime.combine(day, dt.time.min))
