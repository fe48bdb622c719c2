"""The rename form (a name: not empty, not longer than its field holds, not the same) and
the deletion's confirmation (a box to tick: nothing is deleted on one click)."""

from __future__ import annotations

from django import forms

from console.housekeeping import Kind

# the rename form's prefix: its field keeps its own id beside the other forms of a page
RENAME_PREFIX = "rename"


class RenameForm(forms.Form):
    def __init__(self, *args, kind: Kind, current: str, **kwargs):
        super().__init__(*args, prefix=RENAME_PREFIX, initial={"name": current}, **kwargs)
        self.current = current
        self.what = what = kind.field_label.lower()
        self.fields["name"] = forms.CharField(
            label=f"New {what}" if current else kind.field_label,
            max_length=kind.max_length,
            error_messages={"required": f"Give the {kind.noun} a {what}: it cannot be empty."},
        )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if name == self.current:
            raise forms.ValidationError(f"That is its {self.what} already: nothing to change.")
        return name


class DeleteForm(forms.Form):
    confirm = forms.BooleanField(
        error_messages={"required": "Tick the box to confirm; nothing was deleted."}
    )

    def __init__(self, *args, kind: Kind, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields[
            "confirm"
        ].label = f"Yes, delete this {kind.noun} and everything listed above, for good"
