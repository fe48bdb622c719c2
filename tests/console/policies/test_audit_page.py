"""The audit page: filters that select exactly the events asked for, details in words with
the objects linked while they exist, times with their zone, pages of 100."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from console.benchmarks.services import bench_runs_create
from console.models import Analysis, AuditEvent, JobStatus, PolicyVersion, Upload
from console.policies import audit
from console.policies.audit_words import action_label, value_text
from console.policies.services import policy_create
from tests.console.factories import BENCH_TAGS, make_user, vllm_file

pytestmark = pytest.mark.django_db

UTC = dt.UTC


@pytest.fixture
def clock(monkeypatch):
    """Django's clock set to a moment of the test's choosing (what audit.record stamps)."""

    def set_to(*when: int) -> dt.datetime:
        moment = dt.datetime(*when, tzinfo=UTC)
        monkeypatch.setattr(timezone, "now", lambda: moment)
        return moment

    return set_to


def _shown(client, **query) -> list[int]:
    """The numbers of the events the page lists, in its order."""
    response = client.get(reverse("audit_log"), query)
    assert response.status_code == 200
    return [int(pk) for pk in re.findall(r'data-event="(\d+)"', response.content.decode())]


@pytest.fixture
def trail(client, clock, analyst):
    """Five events over four days by two people and kvscope itself, the last the
    client's own sign-in."""
    bob = make_user("bob", "analyst")
    upload = Upload.objects.create(name="day one", status=JobStatus.DONE, created_by=analyst)
    clock(2026, 3, 1, 10, 0)
    version = policy_create(name="p1", user=analyst)
    clock(2026, 3, 1, 23, 30)  # 00:30 on 2 March in Berlin
    renamed = audit.record(actor=bob, action="upload.rename", obj=upload,
                           details={"old_name": "day", "new_name": "day one"})  # fmt: skip
    clock(2026, 3, 3, 9, 0)
    signed_in = audit.record(actor=analyst, action="auth.sign_in", obj=analyst, details={})
    clock(2026, 3, 3, 18, 0)
    deleted = audit.record(actor=None, action="upload.delete", obj=upload,
                           details={"name": "day one", "bytes": 1610612736})  # fmt: skip
    clock(2026, 3, 4, 8, 0)
    client.force_login(analyst)  # recorded too: auth.sign_in
    login = AuditEvent.objects.latest("pk")
    assert login.action == "auth.sign_in" and login.pk > deleted.pk
    created = AuditEvent.objects.get(action="policy.create", object_id=str(version.pk))
    return {"created": created.pk, "renamed": renamed.pk, "signed_in": signed_in.pk,
            "deleted": deleted.pk, "upload": upload, "login": login.pk}  # fmt: skip


def test_filters_select_exactly_the_events_asked_for(client, analyst, trail, settings):
    t = trail
    policy_event = t["created"]
    assert _shown(client) == [t["login"], t["deleted"], t["signed_in"], t["renamed"],
                              policy_event]  # fmt: skip
    assert _shown(client, actor="bob") == [t["renamed"]]
    assert _shown(client, actor="system") == [t["deleted"]]
    assert _shown(client, kind="upload") == [t["deleted"], t["renamed"]]
    assert _shown(client, kind="policy") == [policy_event]
    assert _shown(client, object_type="Upload", object_id=str(t["upload"].pk)) == [
        t["deleted"], t["renamed"]]  # fmt: skip
    assert _shown(client, object_type="PolicyVersion") == [policy_event]
    assert _shown(client, actor="ana", kind="auth") == [t["login"], t["signed_in"]]
    # days in the configured zone, the last one whole
    assert _shown(client, since="2026-03-01", until="2026-03-01") == [t["renamed"], policy_event]
    assert _shown(client, since="2026-03-03") == [t["login"], t["deleted"], t["signed_in"]]
    assert _shown(client, until="2026-03-02") == [t["renamed"], policy_event]
    settings.TIME_ZONE = "Europe/Berlin"  # 23:30 UTC on 1 March is 2 March there
    assert _shown(client, since="2026-03-02", until="2026-03-02") == [t["renamed"]]


def test_an_object_filter_also_finds_the_events_naming_it_by_id(client, analyst, trail):
    """A drift check's event is the check's own and names, by id, the version it was
    checked against: filtering by that version lists it; by another version, not."""
    created = AuditEvent.objects.get(pk=trail["created"])
    version = int(created.object_id)
    naming = audit.record(actor=analyst, action="policy.drift_check", obj=trail["upload"],
                          details={"version": version, "compliant": False})  # fmt: skip
    assert _shown(client, object_type="PolicyVersion", object_id=str(version)) == [
        naming.pk, created.pk]  # fmt: skip
    assert _shown(client, object_type="PolicyVersion", object_id=str(version + 1)) == []
    # the type alone still means the events about such objects
    assert _shown(client, object_type="PolicyVersion") == [created.pk]


def test_no_match_and_bad_filters_say_so(client, analyst, trail):
    page = client.get(reverse("audit_log"), {"actor": "nobody"}).content.decode()
    assert "No events match these filters." in page and "data-event=" not in page
    page = client.get(reverse("audit_log"), {"since": "2026-03-03", "until": "2026-03-01"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "The first day is after the last one." in text and "data-event=" not in text
    text = client.get(reverse("audit_log"), {"object_id": "12a"}).content.decode()
    assert "An object number is digits only, such as 12." in text
    text = client.get(reverse("audit_log"), {"since": "yesterday"}).content.decode()
    assert "Enter a valid date." in text
    # an export with filters it cannot apply: the page and its reason, never a file
    response = client.get(reverse("audit_export", args=["json"]), {"object_id": "x"})
    assert response.status_code == 400 and "digits only" in response.content.decode()
    assert client.get(reverse("audit_export", args=["xml"])).status_code == 404


def _details_cells(page: str) -> list[str]:
    return re.findall(r'<dl class="details">(.*?)</dl>', page, re.S)


def test_details_read_as_words_and_objects_link_while_they_exist(client, analyst, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    upload = Upload.objects.create(name="day", status=JobStatus.DONE, created_by=analyst)
    analysis = Analysis.objects.create(upload=upload, block_tokens=256, params={},
                                       status=JobStatus.DONE, created_by=analyst)  # fmt: skip
    gone = Upload.objects.create(name="gone", status=JobStatus.DONE, created_by=analyst)
    version = policy_create(name="p1", user=analyst)
    newer = PolicyVersion.objects.create(policy=version.policy, number=2, author=analyst,
                                         body=version.body)  # fmt: skip
    run = bench_runs_create(files=[vllm_file("w.json")], tags=BENCH_TAGS, user=analyst)[0]
    audit.record(actor=analyst, action="upload.delete", obj=gone,
                 details={"name": "gone", "analyses": [analysis.pk, 99999], "bytes": 1610612736,
                          "raw_names": ["a.jsonl", "b.jsonl"], "files": 3})  # fmt: skip
    gone_pk = gone.pk
    gone.delete()
    audit.record(actor=analyst, action="policy.retire", obj=version.policy,
                 details={"comment": "done", "limits": {"max_gib": 8, "strict": True},
                          "note": None, "some_flag": False})  # fmt: skip
    audit.record(actor=analyst, action="benchmark_run.rename", obj=run,
                 details={"old_name": "w.json", "new_name": "warm"})  # fmt: skip
    audit.record(actor=analyst, action="policy.new_version", obj=newer, details={"from": 1})
    client.force_login(analyst)
    page = client.get(reverse("audit_log")).content.decode()
    cells = _details_cells(page)
    assert len(cells) == 7  # the four above, the creation, the run's upload, the sign-in
    for cell in cells:  # no Python dict or list text anywhere
        assert "{" not in cell and "[" not in cell and "'" not in cell and "&#x27;" not in cell
    deletion = next(c for c in cells if "gone" in c)
    # 1610612736 B = 1.5 × 2^30: 1.50 GiB
    assert "<dt>Size</dt><dd>1.50 GiB</dd>" in deletion
    assert "<dt>Raw files</dt><dd>a.jsonl, b.jsonl</dd>" in deletion
    assert "<dt>Files</dt><dd>3</dd>" in deletion
    analysis_url = reverse("analysis_detail", args=[analysis.pk])
    assert f'<dt>Analyses</dt><dd><a href="{analysis_url}">#{analysis.pk}</a>, #99999</dd>' \
        in deletion  # fmt: skip
    retired = next(c for c in cells if "done" in c)
    assert "<dt>Limits</dt><dd>Max gib: 8; Strict: yes</dd>" in retired
    assert "<dt>Note</dt><dd>—</dd>" in retired and "<dt>Some flag</dt><dd>no</dd>" in retired
    assert "<dt>From version</dt><dd>v1</dd>" in page
    # the objects: the deleted upload as text, a policy by its newest version
    assert f"<td>Upload #{gone_pk}</td>" in page
    assert f'href="{reverse("upload_detail", args=[gone_pk])}"' not in page
    newest = reverse("policy_version", args=[newer.pk])
    assert f'<a href="{newest}">Policy #{version.policy.pk}</a>' in page
    assert f'<a href="{newest}">Policy version #{newer.pk}</a>' in page
    assert f'<a href="{reverse("policy_version", args=[version.pk])}">Policy version ' \
        f"#{version.pk}</a>" in page  # fmt: skip
    assert f'<a href="{reverse("evidence_run", args=[run.pk])}">Benchmark run #{run.pk}</a>' \
        in page  # fmt: skip
    # labels, and the time with its zone: Berlin is CET in winter, CEST in summer
    assert "Policy retired" not in page and "Retired <code" in page
    assert "Renamed a benchmark run <code" in page
    moment = timezone.localtime(AuditEvent.objects.latest("pk").at)
    assert moment.tzname() in ("CET", "CEST")
    assert moment.strftime("%Y-%m-%d %H:%M:%S %Z") in page
    assert "Days are days in Europe/Berlin" in page


def test_unknown_actions_and_values_still_read_as_words():
    assert action_label("benchmark_run.delete", {}) == "Benchmark run: delete"
    assert action_label("auth.sign_in", {"auth.sign_in": "Signed in"}) == "Signed in"
    assert action_label("housekeeping", {}) == "Housekeeping"
    assert value_text({"a_b": [1, 2.5, None], "c": {}}) == "A b: 1, 2.50, —; C: none"
    assert value_text("") == "(empty)" and value_text([]) == "none"
    assert value_text(1234567) == "1,234,567"


def test_pages_of_100_newest_first_keep_the_filters(client, analyst):
    upload = Upload.objects.create(name="u", status=JobStatus.DONE, created_by=analyst)
    pks = [audit.record(actor=analyst, action="upload.rename", obj=upload,
                        details={"n": n}).pk for n in range(105)]  # fmt: skip
    client.force_login(analyst)
    assert _shown(client, kind="upload") == pks[::-1][:100]
    page = client.get(reverse("audit_log"), {"kind": "upload"}).content.decode()
    assert "Page 1 of 2" in page and "105 events match the filters." in page
    assert 'href="?kind=upload&amp;page=2" rel="next">Older events' in page
    assert _shown(client, kind="upload", page="2") == pks[4::-1]
    assert _shown(client, kind="upload", page="99") == pks[4::-1]  # past the end: the last
    downloads = re.search(r"data-audit-downloads>(.*?)</p>", page, re.S).group(1)
    assert f'href="{reverse("audit_export", args=["csv"])}?kind=upload"' in downloads
