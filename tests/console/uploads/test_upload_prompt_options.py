"""The upload form's prompt options (#14, metrics.md section 7), through the real views:
the five formats and the four tool placements offered in people's words and stored; a
tokenizer.json stored with the raw files, handed to the ingest as tokenizer_file, deleted
with the raw files (after the ingest, by the purge, when orphaned) and refused when it is
no tokenizer; Retry reads the upload with the same choices; a gateway CSV is let through
the form when its header names request_json."""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone
from tokenizers import Tokenizer, models, pre_tokenizers

from analysis.ingest import FORMATS
from analysis.readers import TOOLS_POSITIONS
from analysis.stream import stream_meta
from console.leftovers import purge_unreferenced_raw
from console.models import Analysis, JobStatus, Upload
from console.sniff import TOKENIZER_MAX_BYTES, tokenizer_refusal
from console.uploads.forms import UploadForm
from console.uploads.outcome import upload_ingest_options
from console.uploads.services import upload_create
from console.uploads.storage import upload_delete_raw
from tests.console.factories import PASSWORD
from tests.console.uploads import agent_log
from tests.console.waiting import finished, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

FORMAT_LABELS = [
    ("auto", "Detect automatically"),
    ("chat", "Chat bodies (OpenAI chat, Anthropic Messages, OpenAI Responses; JSONL)"),
    ("csv", "Gateway CSV (request_json column)"),
    ("mooncake", "Mooncake trace"),
    ("bailian", "Bailian trace"),
]


@pytest.fixture
def tokenizer_json(tmp_path) -> Path:
    """A small word-level Hugging Face tokenizer, built here and saved as tokenizer.json."""
    vocab = {"[UNK]": 0, "weather": 1, "in": 2, "oslo": 3, "?": 4, "hello": 5}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def _login(client, user) -> None:
    assert client.login(username=user.username, password=PASSWORD)


def _post(client, log: Path, tokenizer: Path | None = None, **extra):
    keep = (timezone.localdate() + dt.timedelta(days=7)).isoformat()
    with open(log, "rb") as fh:
        data = {"name": "agents", "files": [fh], "format": "chat", "block_sizes": ["16"],
                "tools_position": "before_last_user", "retention": "keep",
                "keep_until": keep, **extra}  # fmt: skip
        if tokenizer is not None:
            data["tokenizer"] = SimpleUploadedFile(tokenizer.name, tokenizer.read_bytes())
        return client.post(reverse("upload_new"), data)


def test_the_form_offers_the_five_formats_and_the_placements(client, analyst):
    form = UploadForm()
    assert form.fields["format"].choices == FORMAT_LABELS
    assert [name for name, _ in FORMAT_LABELS] == list(FORMATS)  # every format the engine reads
    assert [name for name, _ in form.fields["tools_position"].choices] == list(TOOLS_POSITIONS)
    assert form.fields["tools_position"].initial == "auto"
    _login(client, analyst)
    page = client.get(reverse("upload_new")).content.decode()
    for _, label in FORMAT_LABELS:
        assert f">{label}</option>" in page
    assert 'value="auto" id="id_tools_position_0" checked' in page
    assert "A prefix cache shares only the leading blocks" in page  # why placement matters
    assert 'type="file" name="tokenizer" accept=".json,application/json"' in page
    assert "cl100k_base if none" in page


def test_the_choices_and_the_tokenizer_are_stored_and_reach_the_ingest(
    client, analyst, tmp_path, tokenizer_json, settings
):
    _login(client, analyst)
    response = _post(client, agent_log.write(tmp_path / "agents.jsonl"), tokenizer_json)
    assert response.status_code == 302
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    assert upload.status == JobStatus.DONE, upload.message
    assert (upload.format, upload.tools_position) == ("chat", "before_last_user")
    # stored with the raw files, under a generated name, byte for byte
    stored = Path(upload.tokenizer_path)
    assert stored.parent == Path(upload.raw_paths[0]).parent == Path(settings.MEDIA_ROOT) / "raw"
    assert stored.name.endswith(".tokenizer.json") and stored.name != "tokenizer.json"
    assert stored.read_bytes() == tokenizer_json.read_bytes()
    assert upload.tokenizer_name == "tokenizer.json"
    options = upload_ingest_options(upload)
    assert (options.format, options.tools_position) == ("chat", "before_last_user")
    assert options.tokenizer_file == str(stored)
    # the stream and the report name the file as its user knows it, not as it is stored
    assert options.tokenizer_name == "tokenizer.json"
    name = stream_meta(upload.streams["16"])["tokenizer"]
    assert name.startswith("tokenizer.json (WordLevel") and stored.name not in name
    # the ingest placed the tools where asked
    assert stream_meta(upload.streams["16"])["tools_position"] == "before_last_user"
    report = Analysis.objects.get(upload=upload).report
    assert report["tools"]["position"] == "before_last_user"
    page = client.get(reverse("upload_detail", args=[upload.pk])).content.decode()
    assert "placed just before the last user message" in page
    assert "tokenizer.json (uploaded)" in page

    # deleted with the raw files; the name stays for the page
    log = Path(upload.raw_paths[0])
    upload_delete_raw(upload_id=upload.pk, reason="expired")
    upload.refresh_from_db()
    assert not stored.exists() and not log.exists()
    assert (upload.raw_paths, upload.tokenizer_path, upload.tokenizer_name) == (
        [], "", "tokenizer.json")  # fmt: skip
    page = client.get(reverse("upload_detail", args=[upload.pk])).content.decode()
    assert "tokenizer.json (uploaded, deleted with the raw file)" in page


def test_after_the_ingest_the_tokenizer_goes_with_the_raw_file(
    client, analyst, tmp_path, tokenizer_json, settings
):
    raw = Path(settings.MEDIA_ROOT) / "raw"
    before = set(raw.glob("*"))
    _login(client, analyst)
    _post(client, agent_log.write(tmp_path / "a.jsonl"), tokenizer_json, retention="delete",
          keep_until="")  # fmt: skip
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    assert upload.status == JobStatus.DONE, upload.message
    assert (upload.raw_paths, upload.tokenizer_path, upload.tokenizer_name) == (
        [], "", "tokenizer.json")  # fmt: skip
    assert upload_ingest_options(upload).tokenizer_file is None  # a retry has none to read
    assert set(raw.glob("*")) == before  # neither the log nor the tokenizer is left


def test_retry_reads_the_upload_with_the_same_choices(client, analyst, tmp_path, tokenizer_json):
    _login(client, analyst)
    _post(client, agent_log.write(tmp_path / "a.jsonl"), tokenizer_json, tools_position="first")
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    before = upload_ingest_options(upload)
    Upload.objects.filter(pk=upload.pk).update(status=JobStatus.FAILED)  # as a crash leaves it
    assert client.post(reverse("upload_retry", args=[upload.pk])).status_code == 302
    retried = wait_for(finished(Upload, upload.pk))
    assert retried.status == JobStatus.DONE, retried.message
    assert upload_ingest_options(retried) == before
    assert (before.format, before.tools_position) == ("chat", "first")
    assert before.tokenizer_file == retried.tokenizer_path != ""
    assert stream_meta(retried.streams["16"])["tools_position"] == "first"


def test_retry_is_refused_when_the_tokenizer_is_gone(client, analyst, tmp_path, tokenizer_json):
    _login(client, analyst)
    _post(client, agent_log.write(tmp_path / "a.jsonl"), tokenizer_json)
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    Path(upload.tokenizer_path).unlink()
    Upload.objects.filter(pk=upload.pk).update(status=JobStatus.FAILED)
    response = client.post(reverse("upload_retry", args=[upload.pk]), follow=True)
    assert "The tokenizer.json is gone" in response.content.decode()
    assert Upload.objects.get(pk=upload.pk).status == JobStatus.FAILED


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"vocab: {hello: 1}\n", "tokenizer.json: not a tokenizer.json: it is not JSON"),
        (b"[1, 2, 3]", 'a Hugging Face tokenizer is a JSON object with a "model" entry'),
        (b'{"version": "1.0"}', 'a Hugging Face tokenizer is a JSON object with a "model" entry'),
        # valid JSON with a "model", yet no tokenizer the library reads
        (
            b'{"version": "1.0", "model": {"type": "Unigram"}}',
            "tokenizer.json: not a Hugging Face tokenizer.json (Missing vocab",
        ),
    ],
)
def test_a_file_that_is_no_tokenizer_is_a_form_error(
    client, analyst, tmp_path, settings, content, reason
):
    _login(client, analyst)
    bad = tmp_path / "tokenizer.json"
    bad.write_bytes(content)
    raw = Path(settings.MEDIA_ROOT) / "raw"
    before = set(raw.glob("*"))  # (a real worker's media folder holds other tests' files)
    response = _post(client, agent_log.write(tmp_path / "a.jsonl"), bad)
    assert response.status_code == 200  # the form again, with the reason under the field
    page = response.content.decode().replace("&quot;", '"')
    assert reason in page
    assert 'id="id_tokenizer_error"' in page
    assert not Upload.objects.exists()
    assert set(raw.glob("*")) == before  # nothing stored


def test_a_tokenizer_past_the_size_limit_is_refused_unread():
    def read() -> bytes:
        raise AssertionError("a file past the limit is not read")

    size = TOKENIZER_MAX_BYTES + 1  # 50 MiB and a byte: "50.0 MB", the limit "50 MB"
    reason = tokenizer_refusal("big.json", size, read)
    assert reason == "big.json: 50.0 MB is more than a tokenizer.json holds (at most 50 MB)"
    assert tokenizer_refusal("ok.json", 2, lambda: b'{"model": {}}') is not None  # none


def test_a_real_tokenizer_passes_the_check(tokenizer_json):
    data = tokenizer_json.read_bytes()
    assert tokenizer_refusal("mine.json", len(data), lambda: data) is None


def test_a_tokenizer_that_breaks_at_ingest_fails_as_the_users_input(analyst, tmp_path):
    """A file stored without the form's check (or changed since) is the user's input that
    cannot be read: the upload fails naming the file as uploaded, no internal error."""
    bad = tmp_path / "llama-tokenizer.json"
    bad.write_bytes(b'{"version": "1.0", "model": {"type": "Unigram"}}')
    upload = upload_create(name="agents", sources=[agent_log.write(tmp_path / "a.jsonl")],
                           user=analyst, format="chat", tokenizer=bad)  # fmt: skip
    upload = wait_for(finished(Upload, upload.pk))
    assert upload.status == JobStatus.FAILED
    assert "llama-tokenizer.json: not a Hugging Face tokenizer.json" in upload.message
    assert "internal error" not in upload.message and ".tokenizer.json" not in upload.message


def test_an_orphaned_tokenizer_is_purged_a_referenced_one_kept(settings, analyst, tmp_path):
    raw = Path(settings.MEDIA_ROOT) / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    orphan = raw / f"{uuid.uuid4().hex}.tokenizer.json"  # stored, the row never written
    kept = raw / f"{uuid.uuid4().hex}.tokenizer.json"
    for path in (orphan, kept):
        path.write_text('{"model": {}}')
        then = time.time() - settings.KVSCOPE_ORPHAN_SECONDS - 60
        os.utime(path, (then, then))
    Upload.objects.create(name="kept", created_by=analyst, tokenizer_path=str(kept))
    assert purge_unreferenced_raw() == 1
    assert not orphan.exists() and kept.exists()


def test_a_gateway_csv_passes_the_form_when_it_names_request_json(analyst):
    body = b'timestamp,model_name,request_json\n1,llama,"{""messages"": []}"\n'
    named = UploadForm(
        {"name": "gw", "format": "csv", "block_sizes": ["0"], "tools_position": "auto",
         "retention": "delete"},
        {"files": [SimpleUploadedFile("export.csv", body)]},
    )  # fmt: skip
    assert named.is_valid(), named.errors
    unnamed = UploadForm(
        {"name": "gw", "format": "csv", "block_sizes": ["0"], "tools_position": "auto",
         "retention": "delete"},
        {"files": [SimpleUploadedFile("export.csv", b"ts,body\n1,{}\n")]},
    )  # fmt: skip
    assert not unnamed.is_valid()
    assert unnamed.errors["files"] == [
        "export.csv: a gateway CSV needs a request_json column holding each request's body; "
        "its header is 'ts,body'"
    ]
