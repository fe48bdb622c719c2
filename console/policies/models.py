"""Policies, their versions, reviews, sign-offs, and the append-only audit trail."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Policy(models.Model):
    name = models.CharField(max_length=200, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "policies"
        # drafting and submitting a policy is the analyst's right (console.analyze_upload)
        permissions = [("approve_policy", "Can approve retention policies")]

    def __str__(self) -> str:
        return self.name


class VersionState(models.TextChoices):
    DRAFT = "draft", "Draft"
    IN_REVIEW = "in_review", "In review"
    CHANGES_REQUESTED = "changes_requested", "Changes requested"
    APPROVED = "approved", "Approved"
    SUPERSEDED = "superseded", "Superseded"
    RETIRED = "retired", "Retired"


EDITABLE = (VersionState.DRAFT, VersionState.CHANGES_REQUESTED)


class PolicyVersion(models.Model):
    policy = models.ForeignKey(Policy, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    state = models.CharField(max_length=20, choices=VersionState.choices, default="draft")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    body = models.JSONField()  # console.policies.body: what the version says
    # the evidence: the analysis it relies on, and the same re-run with the policy's own
    # lifetime and scope (what the policy costs)
    analysis = models.ForeignKey(
        "console.Analysis", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    constrained_analysis = models.ForeignKey(
        "console.Analysis", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    digest = models.CharField(max_length=64, blank=True)  # set at approval

    class Meta:
        ordering = ["policy", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["policy", "number"], name="one_number_per_policy")
        ]

    def __str__(self) -> str:
        return f"{self.policy.name} v{self.number}"

    @property
    def editable(self) -> bool:
        return self.state in EDITABLE


class Review(models.Model):
    """One step of the review chain: submit, request changes, approve, retire."""

    version = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="reviews")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=30)
    comment = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.action} on {self.version}"


class SignOff(models.Model):
    version = models.OneToOneField(PolicyVersion, on_delete=models.PROTECT, related_name="signoff")
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    approver_name = models.CharField(max_length=150)
    at = models.DateTimeField()
    comment = models.TextField()
    digest = models.CharField(max_length=64)  # SHA-256 of the canonical body JSON

    def __str__(self) -> str:
        return f"sign-off of {self.version} by {self.approver_name}"


class AppendOnlyError(Exception):
    pass


class PolicyError(Exception):
    """A transition that is not allowed now, said in words for the user. `field` names
    the form field the message belongs to, when there is one."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class AuditEvent(models.Model):
    """Append-only: each event stores the hash of the previous one (a hash chain), so a
    changed or removed row is detectable (manage.py verify_audit), and AuditHead anchors
    the newest one, so a removed tail is too. Rows cannot be updated or deleted through the
    ORM; triggers refuse UPDATE and DELETE in the database too (PostgreSQL and SQLite) and
    TRUNCATE on PostgreSQL (migrations 0004, 0013; the flush command's exception)."""

    at = models.DateTimeField()
    # no database constraint and no SET NULL: deleting a user must not rewrite audit rows
    # (the trigger would refuse it); actor_name keeps who it was
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=40)
    object_type = models.CharField(max_length=40)
    object_id = models.CharField(max_length=40)
    details = models.JSONField(default=dict)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.action} {self.object_type}:{self.object_id}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise AppendOnlyError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("audit events are append-only")


class AuditHead(models.Model):
    """The chain's anchor: one row holding how many events there are and the last one's
    id and hash, moved forward in the same transaction as every append. A chain that ends
    before the anchor has lost its newest events, which the chain alone cannot show (its
    last remaining event still verifies). In the database it may only move forward by one
    event that exists, and it cannot be deleted (see migration 0013)."""

    events = models.BigIntegerField()
    last_id = models.BigIntegerField()
    last_hash = models.CharField(max_length=64)
    at = models.DateTimeField()

    def __str__(self) -> str:
        return f"audit head: {self.events} events, last #{self.last_id}"


class DriftCheck(models.Model):
    """A deployment checked against an approved version (console.policies.drift): what the
    file was read as and what differed. The uploaded text is not kept, only its SHA-256,
    so the same file can be recognised again."""

    version = models.ForeignKey(
        PolicyVersion, on_delete=models.PROTECT, related_name="drift_checks"
    )
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    uploaded_by_name = models.CharField(max_length=150)
    at = models.DateTimeField(auto_now_add=True)
    file_name = models.CharField(max_length=255)
    format = models.CharField(max_length=30)  # a console.policies.deployed.FORMATS key
    route = models.CharField(max_length=200, blank=True)  # the route asked for, if any
    deployed = models.JSONField()  # the normalized records (Deployed.as_json)
    compliant = models.BooleanField()
    differences = models.JSONField(default=list)  # drift.Difference, as dicts
    notes = models.JSONField(default=list)  # what the file left unchecked
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"drift check of {self.file_name} against {self.version}"

    @property
    def kinds(self) -> list[str]:
        """The kinds of difference found (console.policies.drift.KINDS keys), once each."""
        return sorted({d["kind"] for d in self.differences})
