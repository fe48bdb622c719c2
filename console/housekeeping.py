"""Renaming and deleting what users stored (uploads, analyses, benchmark runs): who may,
a rename as a conditional UPDATE, a deletion as a plan (what goes, its files, why it may
not) carried out in one transaction with its audit events, then its files removed. Each
wing says what its objects are (a Kind) and what deleting one takes (its plan)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from django.conf import settings
from django.db import models, transaction
from django.urls import reverse

from console.policies import audit
from console.policies.citations import Citation
from console.roles import can_analyze


class HousekeepingError(Exception):
    """A rename or deletion refused, said in words for the user (nothing was changed)."""


@dataclass(frozen=True)
class Deletion:
    """What deleting one object takes: what goes, in words (the object first), the files
    and folders on disk that go with it, the audit events (action, object, details) that
    record it, and why it may not be deleted now ("" when it may)."""

    rows: list[str]
    paths: list[Path]
    events: list[tuple[str, models.Model, dict]]
    refusal: str = ""

    @cached_property
    def sizes(self) -> tuple[int, int]:
        """(files, bytes) under `paths`."""
        return tree_size(self.paths)

    @property
    def files(self) -> int:
        return self.sizes[0]

    @property
    def bytes(self) -> int:
        return self.sizes[1]


@dataclass(frozen=True)
class Kind:
    """One kind of object users rename and delete, as the views and the audit trail name it."""

    model: type[models.Model]
    noun: str  # "upload": what the pages call one
    action: str  # the audit actions' prefix: "upload" -> "upload.rename", "upload.delete"
    field: str  # the field holding its name
    field_label: str  # that field's label on the form
    page: str  # the URL name of its page (one argument: its id)
    urls: str  # the prefix of its rename and delete URL names: "upload" -> "upload_rename"
    describe: Callable[[models.Model], str]  # one in words: "the upload “day”"
    plan: Callable[[models.Model], Deletion]
    gone_to: Callable[[models.Model], str]  # where to go once it is deleted (a URL)

    @property
    def max_length(self) -> int:
        return self.model._meta.get_field(self.field).max_length

    def name_of(self, obj: models.Model) -> str:
        return getattr(obj, self.field)

    def page_url(self, obj: models.Model) -> str:
        return reverse(self.page, args=[obj.pk])

    def url(self, what: str, obj: models.Model) -> str:
        return reverse(f"{self.urls}_{what}", args=[obj.pk])


def may_rename(user) -> bool:
    """Any analyst renames, as any analyst edits a draft policy."""
    return can_analyze(user)


def may_delete(user, obj: models.Model) -> bool:
    """Only the analyst who created it (or an administrator) deletes it, as only its
    creator deletes a draft policy: renaming gives no right to delete."""
    if not can_analyze(user):
        return False
    return user.is_superuser or (obj.created_by_id is not None and obj.created_by_id == user.pk)


def who_may_delete(kind: Kind, obj: models.Model) -> str:
    """The 403's words for anyone else."""
    if obj.created_by is None:
        return (f"This {kind.noun} was stored without an account (or its account is gone): "
                "only an administrator may delete it.")  # fmt: skip
    return (f"Only {obj.created_by.get_username()}, who stored this {kind.noun}, or an "
            "administrator may delete it.")  # fmt: skip


def evidence_refusal(subject: str, cited: list[Citation]) -> str:
    """Why `subject` may not be deleted: the versions relying on it, each named."""
    if not cited:
        return ""
    subject = subject[0].upper() + subject[1:]
    return (f"{subject} is not deleted: {'; '.join(str(c) for c in cited)} relies on it as "
            "evidence. A policy's evidence stays as long as the policy does: a draft can be "
            "pointed at other evidence, or deleted, first; a version under review or signed "
            "keeps what it was reviewed and signed on.")  # fmt: skip


def rename(kind: Kind, *, obj: models.Model, new_name: str, user) -> None:
    """Rename (the form validated `new_name`), recorded in the audit trail with the old and
    the new name; refused if it was renamed meanwhile (the page showed another name)."""
    if not may_rename(user):
        raise HousekeepingError(f"Only analysts may rename this {kind.noun}.")
    old = kind.name_of(obj)
    with transaction.atomic():
        rows = kind.model.objects.filter(pk=obj.pk, **{kind.field: old})
        if not rows.update(**{kind.field: new_name}):
            raise HousekeepingError(f"The {kind.noun} was renamed or deleted meanwhile; "
                                    "nothing was changed.")  # fmt: skip
        audit.record(actor=user, action=f"{kind.action}.rename", obj=obj,
                     details={"old_name": old, "new_name": new_name})  # fmt: skip
    setattr(obj, kind.field, new_name)


def delete(kind: Kind, *, obj: models.Model, user) -> list[str]:
    """Delete the object and what its plan says goes with it, each recorded in the audit
    trail in the same transaction; then its files. Returns what could not be removed from
    disk, in words (nothing, normally)."""
    if not may_delete(user, obj):
        raise HousekeepingError(who_may_delete(kind, obj))
    with transaction.atomic():
        # locked: a claim of its job (an UPDATE) waits until the row is gone, then finds none
        locked = kind.model.objects.select_for_update().filter(pk=obj.pk).first()
        if locked is None:
            raise HousekeepingError(f"The {kind.noun} was deleted meanwhile.")
        plan = kind.plan(locked)
        if plan.refusal:
            raise HousekeepingError(plan.refusal)
        for action, subject, details in plan.events:
            audit.record(actor=user, action=action, obj=subject, details=details)
        locked.delete()
    # after the rows: a file is never gone while a row still names it
    return remove_paths(plan.paths)


def _data_roots() -> list[Path]:
    return [Path(settings.MEDIA_ROOT).resolve(), Path(settings.ARTIFACT_ROOT).resolve()]


def _inside_data(path: Path) -> bool:
    """Inside kvscope's own data folders (never one of them, never anything else: a path
    stored in a row is removed only where kvscope writes)."""
    resolved = path.resolve()
    return any(resolved != root and resolved.is_relative_to(root) for root in _data_roots())


def remove_paths(paths: Iterable[Path]) -> list[str]:
    """Remove files and folders (a folder with everything in it); returns what was left,
    and why."""
    problems = []
    for path in paths:
        if not _inside_data(path):
            problems.append(f"{path} was left alone: it is outside kvscope's data folders.")
            continue
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:
            problems.append(f"{path} could not be removed: {exc.strerror or exc}.")
    return problems


def tree_size(paths: Iterable[Path]) -> tuple[int, int]:
    """How many files, and how many bytes, the paths hold (folders counted through)."""
    files = size = 0
    for path in paths:
        found = path.rglob("*") if path.is_dir() else [path]
        for item in found:
            if item.is_file():
                files += 1
                size += item.stat().st_size
    return files, size


def existing(paths: Iterable[Path]) -> list[Path]:
    """The paths that exist, each once, without those inside another one of them."""
    present = sorted({p for p in paths if p.exists()}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in present:
        if not any(path.is_relative_to(outer) for outer in kept):
            kept.append(path)
    return kept
