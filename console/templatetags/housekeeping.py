"""The rename-or-delete panel on an upload's, an analysis's or a benchmark run's page:
`{% housekeeping_panel obj %}` (nothing for anyone who may not rename)."""

from __future__ import annotations

from django import template

from console.housekeeping import may_delete, may_rename, who_may_delete
from console.housekeeping_forms import RenameForm
from console.housekeeping_views import kind_of

register = template.Library()


@register.inclusion_tag("housekeeping/_panel.html", takes_context=True)
def housekeeping_panel(context, obj) -> dict:
    user = context["request"].user
    if not may_rename(user):
        return {"hidden": True}
    kind = kind_of(obj)
    return {
        "kind": kind,
        "form": RenameForm(kind=kind, current=kind.name_of(obj)),
        "rename_url": kind.url("rename", obj),
        "delete_url": kind.url("delete", obj),
        "may_delete": may_delete(user, obj),
        "who_may_delete": who_may_delete(kind, obj),
        "csrf_token": context.get("csrf_token"),
    }
