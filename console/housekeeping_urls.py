"""The rename and delete pages of every kind of object (console.housekeeping_views),
under each object's own address."""

from __future__ import annotations

from django.urls import path

from console.housekeeping_views import KINDS, delete_view, rename_view

# each kind's address prefix, as its own page's address (console.urls)
PREFIXES = {"upload": "uploads", "analysis": "analyses", "evidence_run": "evidence/runs"}

urlpatterns = [
    route
    for kind in KINDS.values()
    for route in (
        path(f"{PREFIXES[kind.urls]}/<int:pk>/rename/", rename_view, {"kind": kind},
             name=f"{kind.urls}_rename"),
        path(f"{PREFIXES[kind.urls]}/<int:pk>/delete/", delete_view, {"kind": kind},
             name=f"{kind.urls}_delete"),
    )
]  # fmt: skip
