"""Sign-in throttling: after repeated failures an account (and, more loosely, an address)
is refused for a while, even with the right password. Failures are rows in the database,
so every web process of a deployment sees the same count. Every sign-in, and every one
refused (a wrong password or username, or throttled), is an audit event: the username
tried and the address, never the password."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db import models
from django.dispatch import receiver
from django.utils import timezone

from console.format import moment_text
from console.policies import audit

WRONG_CREDENTIALS = "wrong username or password"  # (or an inactive account: Django's words)
THROTTLED = "throttled"


class SignInFailure(models.Model):
    username = models.CharField(max_length=150, db_index=True)
    address = models.CharField(max_length=64, db_index=True)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        app_label = "console"

    def __str__(self) -> str:
        return f"{self.username} from {self.address} at {moment_text(self.at, seconds=True)}"


def client_address(request) -> str:
    """The client's address. Behind our proxy (KVSCOPE_BEHIND_PROXY) every request comes
    from the proxy, so the address is the last X-Forwarded-For entry: the one the proxy
    added (earlier entries are whatever the client claimed)."""
    if request is None:
        return ""
    if settings.KVSCOPE_BEHIND_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")[-1].strip()
        if forwarded:
            return forwarded[:64]
    return (request.META.get("REMOTE_ADDR") or "")[:64]


def _recent(**which) -> int:
    since = timezone.now() - dt.timedelta(seconds=settings.KVSCOPE_LOGIN_LOCKOUT_SECONDS)
    return SignInFailure.objects.filter(at__gte=since, **which).count()


def throttled(username: str, address: str, what: str = "sign-ins") -> str | None:
    """Why a password check for this account or address is refused now, or None: the
    sign-in form and every re-entered password (approvals, retirements) share the count,
    so a second place to guess never adds tries."""
    minutes = max(1, settings.KVSCOPE_LOGIN_LOCKOUT_SECONDS // 60)
    limit = settings.KVSCOPE_LOGIN_FAILURES
    username = username.lower()
    if username and _recent(username=username) >= limit:
        return f"Too many failed {what} for this account; try again in {minutes} minutes."
    if address and _recent(address=address) >= limit * 4:
        return f"Too many failed {what} from this address; try again in {minutes} minutes."
    return None


def record_failure(username: str, address: str) -> None:
    SignInFailure.objects.create(username=username.lower()[:150], address=address)
    _forget_old_failures()


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's sign-in form, refusing accounts and addresses with too many recent
    failures before it even checks the password."""

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        address = client_address(self.request)
        refused = throttled(username, address)
        if refused:  # the password is not even checked: no user_login_failed signal
            record_refused(username, address, THROTTLED)
            raise forms.ValidationError(refused, code="throttled")
        try:
            return super().clean()
        except forms.ValidationError:
            record_failure(username, address)
            raise


def _forget_old_failures() -> None:
    since = timezone.now() - dt.timedelta(seconds=settings.KVSCOPE_LOGIN_LOCKOUT_SECONDS)
    SignInFailure.objects.filter(at__lt=since).delete()


def record_refused(username: str, address: str, reason: str) -> None:
    """auth.refused: a sign-in refused, named by the username tried (no user row may have
    it); never the password."""
    details = {"username": username[:150], "address": address, "reason": reason}
    audit.record_unless_broken(actor=None, action="auth.refused", object_type="User",
                               object_id=username or "(none)", details=details)  # fmt: skip


@receiver(user_logged_in, dispatch_uid="kvscope.audit.sign_in")
def _signed_in(sender, request, user, **kwargs) -> None:
    audit.record_unless_broken(actor=user, action="auth.sign_in", obj=user,
                               details={"address": client_address(request)})  # fmt: skip


@receiver(user_login_failed, dispatch_uid="kvscope.audit.sign_in_failed")
def _sign_in_failed(sender, credentials: dict, request=None, **kwargs) -> None:
    """Django's signal for credentials authenticate() refused (the sign-in form's and the
    admin's); `credentials` has the password masked already, and only the username is read."""
    record_refused(str(credentials.get("username") or ""), client_address(request),
                   WRONG_CREDENTIALS)  # fmt: skip
