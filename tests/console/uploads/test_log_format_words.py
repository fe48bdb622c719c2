"""What the reader read, in people's words on every page (#14 review): a gateway CSV is
"gateway CSV" (its report says "chat", as a JSONL log's), a Bailian trace "Bailian
trace" (its stream kind says "mooncake"), on the uploads list, the upload's page and the
analysis page; an upload stored before Upload.log_format falls back on its stream kind;
the analysis form's block size before the streams exist is the format's own."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from console.models import Upload
from console.uploads.analyses import default_block_size
from console.uploads.services import upload_create
from tests.analysis.factories import as_gateway_csv
from tests.console.factories import PASSWORD, default_analysis
from tests.console.uploads import agent_log

pytestmark = pytest.mark.django_db(transaction=True)


class _Texts(HTMLParser):
    """The text of every element (of text alone) whose start tag carries `attribute`
    (`name` or `name="value"`), in page order."""

    def __init__(self, attribute: str) -> None:
        super().__init__()
        name, _, value = attribute.partition("=")
        self.name, self.value = name, value.strip('"') or None
        self.inside, self.texts = False, []

    def handle_starttag(self, tag, attrs) -> None:
        if any(k == self.name and self.value in (None, v) for k, v in attrs):
            self.inside = True
            self.texts.append("")

    def handle_endtag(self, tag) -> None:
        self.inside = False

    def handle_data(self, data) -> None:
        if self.inside:
            self.texts[-1] += data


def _texts(client, url: str, attribute: str) -> list[str]:
    response = client.get(url)
    assert response.status_code == 200
    parser = _Texts(attribute)
    parser.feed(response.content.decode())
    return [" ".join(text.split()) for text in parser.texts]


def _bailian(path):
    """Three lines of a Bailian trace, a conversation of two turns and one alone (the
    release's fields: 16-token blocks, seconds, the parent chain)."""
    rows = [
        {"chat_id": 1, "parent_chat_id": -1, "timestamp": 1.0, "input_length": 40,
         "output_length": 7, "type": "text", "turn": 1, "hash_ids": [11, 12, 13]},
        {"chat_id": 2, "parent_chat_id": 1, "timestamp": 2.0, "input_length": 56,
         "output_length": 7, "type": "text", "turn": 2, "hash_ids": [11, 12, 14, 15]},
        {"chat_id": 3, "parent_chat_id": -1, "timestamp": 3.0, "input_length": 20,
         "output_length": 7, "type": "search", "turn": 1, "hash_ids": [21, 22]},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize(
    ("kind", "log_format", "source_format", "words"),
    [("csv", "csv", "chat", "gateway CSV"), ("bailian", "bailian", "mooncake", "Bailian trace")],
)
def test_every_page_names_what_was_read(client, analyst, tmp_path, kind, log_format,
                                        source_format, words):  # fmt: skip
    if kind == "csv":
        log = as_gateway_csv(agent_log.write(tmp_path / "agents.jsonl"), tmp_path / "gw.csv")
    else:
        log = _bailian(tmp_path / "bailian.jsonl")
    upload = upload_create(name=kind, sources=[log], user=analyst, block_sizes=[16])
    analysis = default_analysis(upload)
    upload.refresh_from_db()
    assert (upload.log_format, upload.source_format) == (log_format, source_format)
    assert client.login(username=analyst.username, password=PASSWORD)
    assert _texts(client, reverse("home"), "data-log-format") == [words]
    assert _texts(client, reverse("upload_detail", args=[upload.pk]), "data-log-format") == [
        words]  # fmt: skip
    page = reverse("analysis_detail", args=[analysis.pk])
    # (the report itself says "chat" for the CSV: its report is a JSONL log's)
    assert analysis.report["log_format"] == ("chat" if kind == "csv" else "bailian")
    assert _texts(client, page, 'data-metric="log_format"') == [words]


def test_an_upload_stored_before_the_field_falls_back_on_its_stream_kind(client, analyst):
    for name, source_format in (("old chat", "chat"), ("old trace", "mooncake")):
        Upload.objects.create(name=name, created_by=analyst, status="done",
                              source_format=source_format)  # fmt: skip
    assert client.login(username=analyst.username, password=PASSWORD)
    # newest first: the trace, then the chat log
    assert _texts(client, reverse("home"), "data-log-format") == [
        "Mooncake trace", "chat bodies (JSONL)"]  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "block_tokens"),
    [
        ({"format": "bailian"}, 16),  # chosen, not read yet: the release's 16-token blocks
        ({"log_format": "bailian", "source_format": "mooncake"}, 16),  # read: not 512
        ({"format": "mooncake"}, 512),  # Mooncake's own
        ({"format": "csv"}, 256),  # chat bodies: LMCache's 256-token chunk
        ({"format": "auto"}, 256),  # unknown until read: the chat default
    ],
)
def test_the_block_size_before_the_streams_is_the_format_s_own(analyst, fields, block_tokens):
    upload = Upload.objects.create(name="u", created_by=analyst, **fields)
    assert upload.streams == {}
    assert default_block_size(upload) == block_tokens


def test_the_empty_list_and_the_tokenizer_help_name_the_formats(client, analyst):
    assert client.login(username=analyst.username, password=PASSWORD)
    home = " ".join(client.get(reverse("home")).content.decode().split())
    for words in ("chat bodies as JSONL", "a gateway CSV export", "Mooncake or Bailian trace"):
        assert words in home
    form = client.get(reverse("upload_new")).content.decode()
    # a trace has no text to count: the tokenizer applies to chat bodies alone
    assert 'id="id_tokenizer_helptext">Chat bodies only (a pre-hashed trace has no text' in form
