"""The audit trail exported from its page and checked offline: manage.py verify_audit
--file follows the file's chain without the database and names what was changed, removed,
reordered, cut or unanchored — in the JSON and in the CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.http import StreamingHttpResponse
from django.urls import reverse

from console.models import AuditEvent, AuditHead, JobStatus, Upload
from console.policies import audit
from console.policies.chain import CONTENT_FIELDS
from console.policies.services import policy_create
from tests.console.factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain_pks(client, analyst) -> list[int]:
    """Seven events: three of kind "upload" (one by "-mallory", a name a spreadsheet would
    take for a formula), three of kind "policy", then the client's sign-in (kind "auth").
    Each export from the page adds its own "download.audit" event, which the file's head
    ends at."""
    mallory = make_user("-mallory", "analyst")
    upload = Upload.objects.create(name="day", status=JobStatus.DONE, created_by=analyst)
    policy_create(name="p1", user=analyst)
    audit.record(actor=mallory, action="upload.rename", obj=upload,
                 details={"old_name": "=1+1", "new_name": "day", "ratio": 0.1})  # fmt: skip
    policy_create(name="p2", user=analyst)
    audit.record(actor=analyst, action="upload.rename", obj=upload,
                 details={"old_name": "day", "new_name": "héllo ✓"})  # fmt: skip
    policy_create(name="p3", user=analyst)
    audit.record(actor=None, action="upload.delete", obj=upload, details={"bytes": 10})
    client.force_login(analyst)  # recorded: auth.sign_in
    return list(AuditEvent.objects.order_by("pk").values_list("pk", flat=True))


def _export(client, fmt: str, tmp_path: Path, **filters) -> Path:
    response = client.get(reverse("audit_export", args=[fmt]), filters)
    assert response.status_code == 200 and isinstance(response, StreamingHttpResponse)
    assert response["Content-Disposition"].startswith('attachment; filename="kvscope-audit-')
    path = tmp_path / f"audit.{fmt}"
    path.write_bytes(b"".join(response.streaming_content))
    return path


def _verify_offline(path: Path, django_db_blocker) -> str:
    """verify_audit --file with every database access refused; its output."""
    out = io.StringIO()
    with django_db_blocker.block():
        with pytest.raises(RuntimeError, match="Database access not allowed"):
            AuditEvent.objects.count()  # (the block holds)
        call_command("verify_audit", "--file", str(path), stdout=out)
    return out.getvalue()


def _fails_offline(path: Path, django_db_blocker) -> str:
    with django_db_blocker.block(), pytest.raises(CommandError) as raised:
        call_command("verify_audit", "--file", str(path), stdout=io.StringIO())
    return str(raised.value)


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_an_export_verifies_offline(client, analyst, chain_pks, tmp_path, fmt, django_db_blocker):
    path = _export(client, fmt, tmp_path, kind="upload")
    head = AuditHead.objects.get()
    download = AuditEvent.objects.get(action="download.audit")
    assert head.last_id == download.pk > chain_pks[-1]  # the head ends at the download
    assert download.details == {"kind": "upload"} and download.object_id == fmt
    out = _verify_offline(path, django_db_blocker)
    # the 7 and the download; 3 of kind "upload"
    assert "audit file intact: 8 events (3 with content)" in out
    assert f"audit head (as the file records it): 8 events, last #{download.pk} " \
        f"sha256 {head.last_hash}" in out  # fmt: skip
    whole = _export(client, fmt, tmp_path)  # no filter: every event with its content
    assert "audit file intact: 9 events (9 with content)" in _verify_offline(
        whole, django_db_blocker
    )


def test_the_json_holds_the_chain_the_selection_and_the_head(client, analyst, chain_pks, tmp_path):
    data = orjson.loads(_export(client, "json", tmp_path, kind="policy", actor="ana").read_bytes())
    head = AuditHead.objects.get()
    assert data["format"] == "kvscope-audit/1"
    assert data["filter"] == {"actor": "ana", "kind": "policy"}
    assert data["head"] == {"events": 8, "last_id": head.last_id, "last_hash": head.last_hash}
    download = AuditEvent.objects.get(action="download.audit")  # a link: not "policy"
    assert [e["pk"] for e in data["events"]] == [*chain_pks, download.pk]
    rows = {e.pk: e for e in AuditEvent.objects.all()}
    for event in data["events"]:
        row = rows[event["pk"]]
        assert (event["prev_hash"], event["hash"]) == (row.prev_hash, row.hash)
        if row.action.startswith("policy."):  # selected: the content as hashed
            assert set(event) == {"pk", "prev_hash", "hash", *CONTENT_FIELDS}
            assert event["at"] == row.at.isoformat() and event["details"] == row.details
        else:
            assert set(event) == {"pk", "prev_hash", "hash"}


def _json_tamper(path: Path, change: Callable[[dict], None]) -> None:
    data = orjson.loads(path.read_bytes())
    change(data)
    path.write_bytes(orjson.dumps(data))


def _csv_tamper(path: Path, change: Callable[[dict], None]) -> None:
    """The CSV changed as the JSON would be: its head line, its rows as events."""
    lines = path.read_text().splitlines(keepends=True)
    header = orjson.loads(lines[0][2:]) if lines[0].startswith("# ") else None
    rows = list(csv.reader(lines[1:] if header is not None else lines))
    columns, body = rows[0], rows[1:]
    data = {"head": header and header["head"], "events": body}
    change(data)
    out = io.StringIO()
    if data.get("head") is not None:
        out.write("# " + orjson.dumps({**header, "head": data["head"]}).decode() + "\r\n")
    csv.writer(out).writerows([columns, *data["events"]])
    path.write_text(out.getvalue())


def _alter(data: dict) -> None:
    event = data["events"][1]
    if isinstance(event, dict):
        event["details"]["new_name"] = "forged"
    else:
        event[6] = event[6].replace('"day"', '"forged"')  # the details cell


def _swap(data: dict) -> None:
    events = data["events"]
    events[2], events[3] = events[3], events[2]


FAULTS = {
    # what was done to the file -> (its change, the event named (by index), what is said)
    "altered": (_alter, 1, "its content does not match its hash (the event was changed)"),
    "deleted": (lambda d: d["events"].pop(2), 3, "the event after #{1} is not in the file "
                "(it was removed"),
    "reordered": (_swap, 3, "#{2}, the event after #{1}, comes later in the file (the events "
                  "were reordered)"),
    "truncated": (lambda d: d["events"].__delitem__(slice(4, None)), None,
                  "the newest 4 events are missing after #{3}: the head records 8 events "
                  "ending at #{7}"),  # the 7 and the export's own download event
    "head removed": (lambda d: d.update(head=None), None, "the chain has 8 events but its "
                     "head anchor is missing"),
}  # fmt: skip


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_a_tampered_file_fails_naming_the_event_and_the_fault(
    client, analyst, chain_pks, tmp_path, fmt, fault, django_db_blocker
):
    path = _export(client, fmt, tmp_path, kind="upload")  # events 1, 3, 5 with content
    change, broken, words = FAULTS[fault]
    (_json_tamper if fmt == "json" else _csv_tamper)(path, change)
    every = list(AuditEvent.objects.order_by("pk").values_list("pk", flat=True))
    message = _fails_offline(path, django_db_blocker)
    numbers = dict(enumerate(every))  # the fixture's 7, then the export's download
    expected = words.replace("#{", "#{n").format(**{f"n{i}": pk for i, pk in numbers.items()})
    assert expected in message
    if broken is None:
        assert "broken after" in message
    else:
        assert f"broken at event {chain_pks[broken]} " in message
    assert str(path) in message


def test_a_link_changed_into_content_or_a_bad_file_is_refused_with_its_line(
    client, analyst, chain_pks, tmp_path, django_db_blocker
):
    path = _export(client, "csv", tmp_path, kind="policy")
    lines = path.read_bytes().decode().splitlines(keepends=True)
    lines[3] = lines[3].replace(",no\r\n", ",yes\r\n")  # event 2 claims a content it lacks
    path.write_text("".join(lines))
    assert _fails_offline(path, django_db_blocker).endswith(
        "line 4: its details are not JSON (Input is a zero-length, empty document)"
    )
    lines[3] = lines[3].replace(f"{chain_pks[1]},", "two,", 1)
    path.write_text("".join(lines))
    assert f"{path}: line 4: its pk 'two' is not a whole number" in _fails_offline(
        path, django_db_blocker
    )
    path.write_text("".join([lines[0], "pk,hash\r\n"]))
    assert "line 2: the columns are not pk, at, actor_name" in _fails_offline(
        path, django_db_blocker
    )
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "kvscope-audit/1",\n "events": [}')
    assert f"{broken}: line 2: not JSON" in _fails_offline(broken, django_db_blocker)
    broken.write_text('{"format": "something else", "events": []}')
    assert "not a kvscope audit export" in _fails_offline(broken, django_db_blocker)
    assert "cannot be read" in _fails_offline(tmp_path / "missing.json", django_db_blocker)


def test_without_a_file_the_database_is_checked_as_before(chain_pks):
    out = io.StringIO()
    call_command("verify_audit", stdout=out)
    assert out.getvalue().endswith(f"audit chain intact: {len(chain_pks)} events\n")  # all 7
