"""Where an audit event's objects are now: the page of each upload, analysis, policy
version, policy (its newest version) and benchmark run an event names, looked up for a
whole page of events at once; nothing for an object since deleted (its id stays text)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.urls import reverse

from console.models import Analysis, AuditEvent, BenchRun, DriftCheck, PolicyVersion, Upload
from console.policies.audit_words import ID_KEYS
from console.web import is_id

# object type -> (model, the URL name of its page)
PAGES = {
    "Upload": (Upload, "upload_detail"),
    "Analysis": (Analysis, "analysis_detail"),
    "PolicyVersion": (PolicyVersion, "policy_version"),
    "BenchRun": (BenchRun, "evidence_run"),
    "DriftCheck": (DriftCheck, "policy_drift_check"),
}


def _referenced(events: Iterable[AuditEvent]) -> dict[str, set[int]]:
    """object type -> the ids the events name, as the object or in their details."""
    ids: dict[str, set[int]] = defaultdict(set)
    for event in events:
        if is_id(event.object_id):
            ids[event.object_type].add(int(event.object_id))
        details = event.details if isinstance(event.details, dict) else {}
        for key, object_type in ID_KEYS.items():
            value = details.get(key)
            for i in value if isinstance(value, list) else [value]:
                if isinstance(i, int) and not isinstance(i, bool):
                    ids[object_type].add(i)
    return ids


class ObjectLinks:
    """The pages of the objects a page of events names, by (object type, id)."""

    def __init__(self, events: Iterable[AuditEvent]):
        self._urls: dict[tuple[str, str], str] = {}
        for object_type, ids in _referenced(events).items():
            if object_type == "Policy":  # a policy's page is its newest version's
                newest = (
                    PolicyVersion.objects.filter(policy_id__in=ids)
                    .order_by("policy_id", "number")
                    .values_list("policy_id", "pk")
                )
                for policy_id, version_id in newest:  # the highest number comes last
                    self._urls[("Policy", str(policy_id))] = reverse(
                        "policy_version", args=[version_id]
                    )
            elif object_type in PAGES:
                model, page = PAGES[object_type]
                for pk in model.objects.filter(pk__in=ids).values_list("pk", flat=True):
                    self._urls[(object_type, str(pk))] = reverse(page, args=[pk])

    def url(self, object_type: str, object_id: str) -> str:
        """The object's page, "" when it no longer exists (or kvscope has no page for it)."""
        return self._urls.get((object_type, object_id), "")
