"""The upload form's groups of choices (tool placement, block sizes, trace tails, the raw
file) are fieldsets named by a legend, their help text (and errors) linked to them with
aria-describedby, not a <label for> pointing at no single input."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.urls import reverse

from tests.console.factories import PASSWORD

pytestmark = pytest.mark.django_db

# field -> its label (console/uploads/forms.py), and whether it has help text
GROUPS = {
    "tools_position": ("Tool definitions go", True),
    "block_sizes": ("Block sizes (tokens)", True),
    "trace_tails": ("Pre-hashed traces: a last block with fewer tokens than the block size is",
                    False),
    "retention": ("Raw file", False),
}  # fmt: skip


class _Form(HTMLParser):
    """Every fieldset (its attributes and its legend's text), every label's for=, and the
    ids of the page's elements."""

    def __init__(self) -> None:
        super().__init__()
        self.fieldsets: list[dict] = []
        self.label_for: set[str] = set()
        self.ids: set[str] = set()
        self.in_legend = False

    def handle_starttag(self, tag, attrs) -> None:
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "fieldset":
            self.fieldsets.append({**attrs, "legend": ""})
        elif tag == "legend":
            self.in_legend = True
        elif tag == "label" and attrs.get("for"):
            self.label_for.add(attrs["for"])

    def handle_endtag(self, tag) -> None:
        if tag == "legend":
            self.in_legend = False

    def handle_data(self, data) -> None:
        if self.in_legend:
            self.fieldsets[-1]["legend"] += data


def _form(client, analyst, data=None) -> _Form:
    assert client.login(username=analyst.username, password=PASSWORD)
    url = reverse("upload_new")
    response = client.post(url, data) if data is not None else client.get(url)
    assert response.status_code == 200
    parser = _Form()
    parser.feed(response.content.decode())
    return parser


def _fieldset(form: _Form, legend: str) -> dict:
    (found,) = [f for f in form.fieldsets if " ".join(f["legend"].split()) == legend]
    return found


def test_each_group_of_choices_is_a_fieldset_with_a_legend(client, analyst):
    form = _form(client, analyst)
    for name, (label, has_help) in GROUPS.items():
        fieldset = _fieldset(form, label)
        assert f"id_{name}" not in form.label_for  # no label for a whole group
        if has_help:  # the help text is the fieldset's description, and on the page
            assert fieldset["aria-describedby"] == f"id_{name}_helptext"
            assert f"id_{name}_helptext" in form.ids
        else:
            assert "aria-describedby" not in fieldset
    # a field of one input keeps its label
    assert "id_name" in form.label_for and "id_tokenizer" in form.label_for


def test_a_group_s_error_is_linked_to_its_fieldset(client, analyst):
    # posted without a retention choice (required) and without files
    form = _form(client, analyst, {"name": "x", "format": "auto"})
    fieldset = _fieldset(form, "Raw file")
    assert fieldset["aria-describedby"] == "id_retention_error"
    assert "id_retention_error" in form.ids
