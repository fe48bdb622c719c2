"""Roles are Django groups: analyst (uploads, analyses), approver (signs off policies),
auditor (reads everything, changes nothing). Superusers may do everything."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

from console.web import record_forbidden

ANALYST, APPROVER, AUDITOR = "analyst", "approver", "auditor"
ROLES = (ANALYST, APPROVER, AUDITOR)
# permissions each role's group holds (app_label.codename)
ROLE_PERMISSIONS = {
    ANALYST: ["console.analyze_upload"],
    APPROVER: ["console.approve_policy"],
    AUDITOR: [],
}


def ensure_roles(group_model=None, permission_model=None) -> None:
    """Create the role groups with their permissions (idempotent). Takes the historical
    models inside a migration; the real ones otherwise."""
    if group_model is None or permission_model is None:
        from django.contrib.auth.models import Group, Permission

        group_model, permission_model = Group, Permission
    for role, perms in ROLE_PERMISSIONS.items():
        group, _ = group_model.objects.get_or_create(name=role)
        for dotted in perms:
            app_label, codename = dotted.split(".")
            group.permissions.add(
                permission_model.objects.get(content_type__app_label=app_label, codename=codename)
            )


def roles_of(user) -> set[str]:
    if not user.is_authenticated:
        return set()
    if user.is_superuser:
        return set(ROLES)
    return set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))


def can_read(user) -> bool:
    return bool(roles_of(user))


def can_analyze(user) -> bool:
    """The analyst's rights, all under console.analyze_upload: upload logs, run analyses,
    draft and submit policies."""
    return user.is_authenticated and (user.is_superuser or user.has_perm("console.analyze_upload"))


def can_approve(user) -> bool:
    return user.is_authenticated and (user.is_superuser or user.has_perm("console.approve_policy"))


def _role_required(allowed: Callable[[Any], bool], refusal: str) -> Callable:
    """A view decorator: signed in (else the sign-in page), and allowed(user) (else 403,
    saying `refusal`, and recorded in the audit trail)."""

    def decorate(view: Callable) -> Callable:
        @login_required
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not allowed(request.user):
                record_forbidden(request, refusal)
                raise PermissionDenied(refusal)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


# signed in and holding a role (any role may read)
reader_required = _role_required(can_read, "Your account has no role yet: ask an administrator.")
# signed in as an analyst: may upload logs and run analyses
analyst_required = _role_required(can_analyze, "Only analysts can upload logs and run analyses.")
