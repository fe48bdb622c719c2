"""The upload form and Retry, through the real views (issue #12): a pre-hashed trace keeps
its own block size unless the user ticks another; a contradiction names the size that
fits (and, when one size fits every line, fails the upload even if some lines also fit the
one ticked) and Retry can change the sizes; a failed ingest shows the counts its status showed;
too many files and over-long file names are form errors, never a bare 400 or a 500."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import orjson
import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from analysis import analyze, ingest
from bench.generate import chat_requests, mooncake_requests, write_jsonl
from console.engine import analysis_params, ingest_options
from console.models import Analysis, Upload
from console.uploads.analyses import (
    DEFAULT_PARAMS,
    FIRST_ANALYSIS_BLOCK_TOKENS,
    first_analysis_block_size,
)
from console.uploads.forms import BLOCK_SIZES_HELP, FORMAT_OWN
from console.uploads.services import upload_retry
from tests.console.factories import FIT_512, PASSWORD
from tests.console.waiting import finished, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _rows(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _fits(row: dict, size: int) -> bool:
    blocks = len(row["hash_ids"])
    return (blocks - 1) * size < row["input_length"] <= blocks * size


def _login(client, user) -> None:
    assert client.login(username=user.username, password=PASSWORD)


def _post_upload(client, files, **extra):
    data = {"name": "trace day", "files": files, "format": "auto",
            "block_sizes": [str(FORMAT_OWN)], "retention": "delete", **extra}  # fmt: skip
    return client.post(reverse("upload_new"), data)


def _retried_at_512(client, failed: Upload) -> Upload:
    """Retry the failed upload with 512 ticked (the form's POST) and wait for its outcome."""
    response = client.post(reverse("upload_retry", args=[failed.pk]),
                           {"sizes_shown": "1", "block_sizes": ["512"]})  # fmt: skip
    assert response.status_code == 302
    return wait_for(finished(Upload, failed.pk))


def _facts(page: str) -> dict[str, str]:
    """The details box (dl.facts) as {term: value}."""
    box = re.search(r'<dl class="facts">(.*?)</dl>', page, re.S).group(1)
    return dict(re.findall(r"<dt>(.*?)</dt><dd[^>]*>(.*?)</dd>", box, re.S))


def _checked_sizes(page: str) -> list[str]:
    return re.findall(r'<input type="checkbox" name="block_sizes" value="(\d+)"[^>]*checked', page)


def test_the_form_offers_the_formats_own_block_size_by_default(client, analyst):
    _login(client, analyst)
    page = client.get(reverse("upload_new")).content.decode()
    assert _checked_sizes(page) == [str(FORMAT_OWN)]  # the only one ticked
    assert "The format&#x27;s own (chat 256, Mooncake 512 …)" in page
    assert (
        "256 tokens for chat logs" in BLOCK_SIZES_HELP and "512 for pre-hashed" in BLOCK_SIZES_HELP
    )
    assert BLOCK_SIZES_HELP.replace("'", "&#x27;") in page


def test_a_trace_uploaded_with_the_form_defaults_is_read_at_its_own_512(client, analyst, trace):
    _login(client, analyst)
    with open(trace, "rb") as fh:
        response = _post_upload(client, [fh])
    assert response.status_code == 302
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    assert upload.status == "done", upload.message
    assert upload.block_sizes == []  # the format's own: stored as no explicit size
    assert upload.available_block_sizes == [512] and upload.source_format == "mooncake"
    assert upload.requests == len(_rows(trace)) == 2000 and upload.skipped_lines == 0
    analysis = Analysis.objects.get(upload=upload)
    assert analysis.block_tokens == 512
    direct = analyze(ingest([trace], ingest_options()), analysis_params(**DEFAULT_PARAMS))
    assert analysis.report["recommendation"] == direct.to_dict()["recommendation"]
    assert analysis.report["distinct_blocks"] == direct.distinct_blocks


def test_a_trace_read_at_256_fails_naming_512_and_retry_with_512_reads_it(
    client, analyst, long_prompts
):
    rows = _rows(long_prompts)
    assert not any(_fits(row, 256) for row in rows) and all(_fits(row, 512) for row in rows)
    _login(client, analyst)
    with open(long_prompts, "rb") as fh:
        _post_upload(client, [fh], block_sizes=["256"])  # ticked: overrides the trace's own
    failed = wait_for(finished(Upload, Upload.objects.get().pk))
    assert failed.status == "failed" and failed.block_sizes == [256]
    first = rows[0]
    # (which name the file has in it is the ingest's: the stored one, or the user's)
    assert failed.message.startswith("no usable request in ")
    assert failed.message.split(" (line 1: ", 1)[1] == (
        f"{len(first['hash_ids'])} hash_ids contradict input_length {first['input_length']} "
        f"at 256 tokens per block); hash_ids contradict input_length on {len(rows):,} lines "
        f"{FIT_512}"
    )
    # the bytes are readable at 512: kept a day for Retry, though retention said delete
    assert failed.raw_paths and all(Path(p).exists() for p in failed.raw_paths)
    assert failed.keep_raw_until == timezone.localdate() + dt.timedelta(days=1)

    # the details box shows what the status showed, and the table of skipped lines
    status = client.get(reverse("upload_status", args=[failed.pk])).json()
    assert (status["requests"], status["skipped"]) == (0, len(rows))
    page = client.get(reverse("upload_detail", args=[failed.pk])).content.decode()
    facts = _facts(page)
    assert (facts["Requests read"], facts["Lines skipped"]) == ("0", f"{len(rows):,}")
    assert facts["Block sizes"] == "256 (chosen)"  # no stream was stored
    assert f"{len(rows):,} lines skipped — see why" in page
    assert (f"{len(first['hash_ids'])} hash_ids contradict input_length "
            f"{first['input_length']} at 256 tokens per block") in page  # fmt: skip
    # Retry offers the block sizes again, prefilled with those chosen
    assert "Retry the ingest" in page and _checked_sizes(page) == ["256"]

    done = _retried_at_512(client, failed)
    assert done.status == "done", done.message
    assert done.block_sizes == [512] and done.available_block_sizes == [512]
    assert (done.requests, done.skipped_lines, done.errors) == (len(rows), 0, [])
    assert Analysis.objects.get(upload=done).block_tokens == 512
    page = client.get(reverse("upload_detail", args=[done.pk])).content.decode()
    assert (_facts(page)["Requests"], _facts(page)["Lines skipped"]) == (f"{len(rows):,}", "0")


def test_a_split_trace_read_at_256_keeps_its_file_and_retry_with_512_reads_it(
    client, analyst, long_prompts, settings
):
    """The same over a split ingest: each part counts its own contradictions, so the
    advice is put together from all of them (not lost, with the raw file along with it)."""
    from analysis.readers import split_lines

    settings.KVSCOPE_INGEST_PARTS = 3  # every upload of one plain file is split
    settings.KVSCOPE_PARALLEL_MIN_BYTES = 1
    rows = _rows(long_prompts)
    data = long_prompts.read_bytes()
    per_part = [data[r.start : r.end].count(b"\n") for r in split_lines(long_prompts, 3)]
    assert len(per_part) == 3 and len(set(per_part)) > 1  # each part's own count differs
    _login(client, analyst)
    with open(long_prompts, "rb") as fh:
        _post_upload(client, [fh], block_sizes=["256"])
    failed = wait_for(finished(Upload, Upload.objects.get().pk))
    assert failed.ingest_parts == 3
    assert failed.status == "failed" and failed.block_sizes == [256]
    assert failed.message.endswith(f"hash_ids contradict input_length on {len(rows):,} lines "
                                   f"{FIT_512}")  # fmt: skip
    assert failed.message.count("they fit") == 1
    assert failed.raw_paths and all(Path(p).exists() for p in failed.raw_paths)
    assert failed.keep_raw_until == timezone.localdate() + dt.timedelta(days=1)
    page = client.get(reverse("upload_detail", args=[failed.pk])).content.decode()
    assert "Retry the ingest" in page and _checked_sizes(page) == ["256"]

    done = _retried_at_512(client, failed)
    assert done.status == "done", done.message
    assert done.block_sizes == [512] and done.available_block_sizes == [512]
    assert (done.requests, done.skipped_lines, done.errors) == (len(rows), 0, [])


@pytest.mark.parametrize("parts", [1, 3], ids=["one pass", "split in 3"])
def test_a_trace_partly_readable_at_256_fails_naming_512_and_retry_with_512_reads_it(
    client, analyst, shared_head, settings, parts
):
    """Once a partial upload analysed from the short prompts that happen to fit 256 (a
    biased sample), with its raw file deleted: now a failure that keeps it for Retry."""
    if parts > 1:
        settings.KVSCOPE_INGEST_PARTS = parts
        settings.KVSCOPE_PARALLEL_MIN_BYTES = 1
    rows = _rows(shared_head)
    bad = sum(not _fits(row, 256) for row in rows)
    assert len(rows) == 1500 and all(_fits(row, 512) for row in rows)
    assert 0 < bad < len(rows) and bad <= settings.KVSCOPE_MAX_BAD_LINES  # short prompts fit
    _login(client, analyst)
    with open(shared_head, "rb") as fh:
        _post_upload(client, [fh], block_sizes=["256"])
    failed = wait_for(finished(Upload, Upload.objects.get().pk))
    assert failed.ingest_parts == parts
    assert failed.status == "failed" and failed.block_sizes == [256], failed.message
    assert failed.message.endswith(
        f"was made at another block size than 256 tokens: an analysis of the "
        f"{len(rows) - bad:,} requests that also fit 256 would be biased; hash_ids contradict "
        f"input_length on {bad:,} lines {FIT_512}"
    )
    assert failed.message.count("they fit") == 1
    assert not Analysis.objects.filter(upload=failed).exists()
    # the bytes are readable at 512: kept a day for Retry, though retention said delete
    assert failed.raw_paths and all(Path(p).exists() for p in failed.raw_paths)
    assert failed.keep_raw_until == timezone.localdate() + dt.timedelta(days=1)
    assert (failed.skipped_lines, len(failed.errors)) == (bad, bad)
    status = client.get(reverse("upload_status", args=[failed.pk])).json()
    assert (status["requests"], status["skipped"]) == (len(rows) - bad, bad)
    page = client.get(reverse("upload_detail", args=[failed.pk])).content.decode()
    assert "Retry the ingest" in page and _checked_sizes(page) == ["256"]

    done = _retried_at_512(client, failed)
    assert done.status == "done", done.message
    assert done.block_sizes == [512] and done.available_block_sizes == [512]
    assert (done.requests, done.skipped_lines, done.errors, done.notes) == (len(rows), 0, [], [])
    assert Analysis.objects.get(upload=done).block_tokens == 512


def test_an_error_budget_stop_shows_the_requests_read_and_the_lines_skipped(
    client, analyst, tmp_path
):
    budget = settings.KVSCOPE_MAX_BAD_LINES  # the worker's own too: 10,000
    rows = list(mooncake_requests(budget * 2, seed=13))  # 512-token blocks, 3 or more each
    for i in range(0, len(rows), 3):  # a third are short prompts: they also fit 256
        rows[i] |= {"input_length": 100, "hash_ids": rows[i]["hash_ids"][:1]}
    log = tmp_path / "big-trace.jsonl"
    write_jsonl(iter(rows), log)
    stop = [i for i, row in enumerate(rows) if not _fits(row, 256)][budget]  # the last read
    read = sum(_fits(row, 256) for row in rows[:stop])
    _login(client, analyst)
    with open(log, "rb") as fh:
        _post_upload(client, [fh], block_sizes=["256"])
    failed = wait_for(finished(Upload, Upload.objects.get().pk))
    assert failed.status == "failed"
    assert failed.message.startswith(
        f"stopped after {budget + 1:,} bad lines, past the budget of {budget:,} (the last: "
        f"line {stop + 1}: "
    )
    assert failed.message.endswith(f"on {budget + 1:,} lines {FIT_512}")
    status = client.get(reverse("upload_status", args=[failed.pk])).json()
    assert (status["requests"], status["skipped"]) == (read, budget + 1)
    page = client.get(reverse("upload_detail", args=[failed.pk])).content.decode()
    facts = _facts(page)
    assert (facts["Requests read"], facts["Lines skipped"]) == (f"{read:,}", f"{budget + 1:,}")
    assert f"{budget + 1:,} lines skipped — see why" in page


def test_retry_with_nothing_ticked_is_a_field_error_and_queues_nothing(
    client, analyst, long_prompts
):
    _login(client, analyst)
    with open(long_prompts, "rb") as fh:
        _post_upload(client, [fh], block_sizes=["256", "64"])
    failed = wait_for(finished(Upload, Upload.objects.get().pk))
    assert failed.status == "failed" and failed.block_sizes == [64, 256]
    # a trace has one size: the smallest ticked, as the help text says
    assert failed.message.endswith("at 64 tokens per block; they fit 512: retry with 512, "
                                   "or leave the block size to the format")  # fmt: skip
    response = client.post(reverse("upload_retry", args=[failed.pk]), {"sizes_shown": "1"})
    assert response.status_code == 400
    page = response.content.decode()
    assert re.search(r'id="id_block_sizes_error"><p class="error" role="alert">Tick the '
                     r"format&#x27;s own or at least one block size.</p>", page)  # fmt: skip
    again = Upload.objects.get(pk=failed.pk)
    assert (again.status, again.finished_at, again.block_sizes) == (
        "failed", failed.finished_at, [64, 256])  # fmt: skip


def test_retry_with_the_formats_own_stores_no_explicit_size(long_prompts):
    from console.uploads.services import upload_create

    created = upload_create(name="t", sources=[long_prompts], block_sizes=[128])
    upload = wait_for(finished(Upload, created.pk))
    assert upload.status == "failed" and upload.block_sizes == [128]
    assert upload.message.endswith(
        "at 128 tokens per block; they fit 512: retry with 512, or leave the block size to "
        "the format"
    )
    upload_retry(upload=upload, block_sizes=[])
    done = wait_for(finished(Upload, upload.pk))
    assert done.status == "done" and done.block_sizes == [] and done.available_block_sizes == [512]
    assert done.requests == len(_rows(long_prompts))


def test_the_first_analysis_runs_on_256_if_ticked_else_the_formats_own_else_the_first():
    assert FIRST_ANALYSIS_BLOCK_TOKENS == 256
    assert first_analysis_block_size([16, 64, 256, 512], "chat") == 256
    assert first_analysis_block_size([64, 128], "chat") == 64
    assert first_analysis_block_size([512], "mooncake") == 512
    assert first_analysis_block_size([256], "mooncake") == 256
    assert first_analysis_block_size([128, 512], "mooncake") == 512
    assert first_analysis_block_size([128, 1024], "mooncake") == 128


def test_the_formats_own_and_sizes_of_ones_own_together_are_a_field_error(
    client, analyst, chat_log
):
    # both ticked used to key at the sizes alone, the format's own dropped unsaid
    _login(client, analyst)
    with open(chat_log, "rb") as fh:
        response = _post_upload(client, [fh], block_sizes=[str(FORMAT_OWN), "64"])
    assert response.status_code == 200 and not Upload.objects.exists()
    errors = response.context["form"].errors["block_sizes"]
    assert errors == [
        "Tick the format's own or sizes of your own, not both: untick “The format's own” "
        "to key at 64, or untick those sizes."
    ]


def test_a_chat_upload_without_256_runs_its_first_analysis_on_the_smallest(
    client, analyst, chat_log
):
    _login(client, analyst)
    with open(chat_log, "rb") as fh:
        _post_upload(client, [fh], block_sizes=["128", "64"])
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    assert upload.available_block_sizes == [64, 128]
    assert Analysis.objects.get(upload=upload).block_tokens == 64
    page = client.get(reverse("upload_detail", args=[upload.pk])).content.decode()
    assert re.search(r'<option value="64" selected>', page)  # the re-analysis form's default


def test_a_running_upload_shows_its_live_counts_in_the_details_box(client, analyst):
    _login(client, analyst)
    upload = Upload.objects.create(name="busy", status="running", stage="reading",
                                   requests_done=16_000, skipped_so_far=12)  # fmt: skip
    page = client.get(reverse("upload_detail", args=[upload.pk])).content.decode()
    facts = _facts(page)
    assert (facts["Requests"], facts["Lines skipped"]) == ("16,000", "12")
    assert "data-live-requests" in page and "data-live-skipped" in page  # progress.js updates


def _named(name: str, content: bytes = b'{"timestamp": 1, "messages": []}\n') -> io.BytesIO:
    """A file for the test client to send under `name` (any length: it is never on disk)."""
    fh = io.BytesIO(content)
    fh.name = name
    return fh


def test_more_files_than_the_limit_is_a_form_error_not_a_bare_400(client, analyst):
    _login(client, analyst)
    limit = settings.KVSCOPE_UPLOAD_MAX_FILES
    assert limit == 100  # documented in settings, RELIABILITY.md and on the form
    assert f"and {limit} files per upload" in client.get(reverse("upload_new")).content.decode()
    files = [_named(f"part-{i:03d}.jsonl") for i in range(limit + 1)]
    response = _post_upload(client, files, name="many parts")
    assert response.status_code == 200
    page = response.content.decode()
    assert re.search(r'id="id_files_error"><p class="error" role="alert">At most 100 files per '
                     r"upload; 101 were chosen\.", page)  # fmt: skip
    assert 'value="many parts"' in page  # what was valid is kept
    assert not Upload.objects.exists()


def test_the_file_limit_keeps_the_files_before_it_whole(
    client, analyst, settings, chat_log, tmp_path
):
    settings.KVSCOPE_UPLOAD_MAX_FILES = 2
    _login(client, analyst)
    data = chat_log.read_bytes()
    other = tmp_path / "other.jsonl"  # other request ids: no line of it is a repeat
    rows = chat_requests(80, seed=9, documents=4, doc_words=(100, 300))
    write_jsonl(({**row, "id": f"b-{row['id']}"} for row in rows), other)
    response = _post_upload(
        client, [_named("a.jsonl", data), _named("b.jsonl", other.read_bytes())]
    )
    assert response.status_code == 302  # at the limit: accepted, both stored whole
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    assert upload.raw_names == ["a.jsonl", "b.jsonl"]
    assert (upload.requests, upload.skipped_lines) == (120 + 80, 0)
    response = _post_upload(client, [_named(f"{c}.jsonl", data) for c in "abc"])
    assert "At most 2 files per upload; 3 were chosen." in response.content.decode()
    assert Upload.objects.count() == 1


def test_files_past_the_limit_still_count_against_the_size_cap(client, analyst, settings):
    settings.KVSCOPE_UPLOAD_MAX_FILES = 1
    settings.KVSCOPE_UPLOAD_MAX_BYTES = 10_000
    _login(client, analyst)
    big = _named("b.jsonl", b'{"timestamp": 1, "messages": []}\n' * 1000)  # 33 kB, dropped
    response = _post_upload(client, [_named("a.jsonl"), big])
    assert response.status_code == 200
    assert "The upload is larger than the limit of 9.8 KiB." in response.content.decode()
    assert not Upload.objects.exists()


def test_evidence_uploads_past_the_file_limit_are_a_form_error(client, analyst, settings):
    settings.KVSCOPE_UPLOAD_MAX_FILES = 1
    _login(client, analyst)
    files = [_named("a.json", b"{}"), _named("b.json", b"{}")]
    response = client.post(reverse("evidence_list"), {"files": files})
    assert response.status_code == 200
    assert "At most 1 file per upload; 2 were chosen." in response.content.decode()


def test_an_over_long_file_name_is_cut_safely_keeping_its_extension(client, analyst, chat_log):
    _login(client, analyst)
    name = "x" * 300 + ".jsonl"
    response = _post_upload(client, [_named(name, chat_log.read_bytes())])
    assert response.status_code == 302
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    assert upload.status == "done", upload.message
    assert upload.raw_names == ["x" * 249 + ".jsonl"] and len(upload.raw_names[0]) == 255


def test_an_over_long_extension_is_a_form_error_not_a_500(client, analyst):
    _login(client, analyst)
    response = _post_upload(client, [_named("log." + "y" * 300)], name="long")
    assert response.status_code == 200
    page = response.content.decode()
    assert re.search(r'id="id_files_error"><p class="error" role="alert">log\.y{15}: not a log '
                     r"file name \(expected \.jsonl", page)  # fmt: skip
    assert not Upload.objects.exists()
