"""The evidence pack (#17): one ZIP per signed version, downloaded through the page,
opened here by hand, and checked by manage.py verify_pack without the database — which
accepts it as built and rejects it with any byte changed."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import orjson
import pytest
from django.core.management import CommandError, call_command
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from console.benchmarks.services import bench_runs_create
from console.models import (
    Analysis,
    AuditEvent,
    AuditHead,
    BenchRun,
    JobStatus,
    PolicyVersion,
    VersionState,
)
from console.policies.body import canonical_json
from console.policies.chain import CONTENT_MISMATCH, PREV_MISMATCH
from console.policies.exports import lmcache_files
from console.policies.pack_check import PackProblem, check_pack
from console.policies.pack_zip import dos_stamp, zip_bytes
from console.policies.services import (
    policy_create,
    policy_retire,
    version_approve,
    version_submit,
    version_update,
)
from console.policies.signed_exports import export_text
from tests.console.factories import BENCH_TAGS, PASSWORD, complete, vllm_file
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[3]


def _signed_version(analysis, analyst, approver) -> tuple[PolicyVersion, BenchRun]:
    """A policy governing two routes (so two LMCache files) citing a benchmark run,
    approved through the services; another policy's events before and after its own."""
    (run,) = bench_runs_create(files=[vllm_file("on.json", ttft=1234.0)],
                               tags={**BENCH_TAGS, "tier": "ram", "ram_gib": 64.0},
                               user=analyst)  # fmt: skip
    version = policy_create(name="chat EU", user=analyst, analysis=analysis)
    policy_create(name="other", user=analyst)  # an event of another policy: a link
    body = dict(complete(version.body), routes=["llama-3.1-8b", "qwen2.5-7b"])
    version = version_update(version=version, body=body, user=analyst, analysis=analysis,
                             bench_runs=[run])  # fmt: skip
    wait_for(lambda: Analysis.objects.filter(pk=version.constrained_analysis_id,
                                             status=JobStatus.DONE).first())  # fmt: skip
    version_submit(version=version, user=analyst)
    version_approve(version=version, user=approver, password=PASSWORD, comment="Matches the DPA.")
    policy_create(name="later", user=analyst)  # after the policy's last event: a link too
    version.refresh_from_db()
    return version, run


def _links(version: PolicyVersion, head_id: int) -> list[AuditEvent]:
    """The events from the policy's first up to the pack's head that are not the policy's
    (the other policies' creations, the re-run's events, sign-ins): links in the pack."""
    versions = [str(pk) for pk in version.policy.versions.values_list("pk", flat=True)]
    ours = Q(object_type="PolicyVersion", object_id__in=versions) | Q(
        object_type="Policy", object_id=str(version.policy_id)
    )
    first = AuditEvent.objects.filter(ours).order_by("pk").first()
    between = AuditEvent.objects.filter(pk__gte=first.pk, pk__lte=head_id)
    return list(between.exclude(ours).order_by("pk"))


def _download(client, user, version) -> bytes:
    client.force_login(user)
    response = client.get(reverse("policy_evidence_pack", args=[version.pk]))
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="chat-eu-v1-evidence.zip"'
    return response.content


def _members(raw: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _verify(tmp_path: Path, raw: bytes, name: str = "pack.zip") -> str:
    path = tmp_path / name
    path.write_bytes(raw)
    out = io.StringIO()
    call_command("verify_pack", str(path), stdout=out)
    return out.getvalue()


def _rejection(tmp_path: Path, raw: bytes) -> str:
    path = tmp_path / "changed.zip"
    path.write_bytes(raw)
    with pytest.raises(CommandError) as refused:
        call_command("verify_pack", str(path))
    message = str(refused.value)
    assert message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


def test_the_pack_holds_what_the_sign_off_rests_on(client, analysis, analyst, approver, auditor):
    version, run = _signed_version(analysis, analyst, approver)
    members = _members(_download(client, auditor, version))  # any reader may download it
    body_bytes = canonical_json(version.body)
    assert members["policy.json"] == body_bytes
    assert (
        members["policy.sha256"]
        == f"{hashlib.sha256(body_bytes).hexdigest()}  policy.json\n".encode()
    )
    assert version.digest == hashlib.sha256(body_bytes).hexdigest()
    for pk in (version.analysis_id, version.constrained_analysis_id):
        assert orjson.loads(members[f"analyses/{pk}.json"]) == Analysis.objects.get(pk=pk).report
    cited = orjson.loads(members[f"benchmarks/{run.pk}.json"])
    assert (cited["raw"], cited["numbers"], cited["tier"]) == (
        run.raw,
        run.numbers,
        "CPU RAM 64 GiB",
    )
    files = lmcache_files(version.body)
    assert len(files) == 2  # qwen keeps other sizes than llama: a file each
    for name, routes in files:
        assert members[f"exports/{name}"].decode() == export_text(
            version, "lmcache", route=routes[0]
        )
    assert members["exports/vllm-serve.sh"].decode() == export_text(version, "vllm")
    assert members["exports/helm-values.yaml"].decode() == export_text(version, "helm")
    signoff = orjson.loads(members["signoff.json"])
    assert (signoff["approver"], signoff["comment"], signoff["digest"]) == (
        "appr", "Matches the DPA.", version.digest)  # fmt: skip
    assert signoff["at"] == timezone.localtime(version.signoff.at).isoformat()
    assert signoff["at"].endswith("+00:00")  # the zone is said (TIME_ZONE = UTC)
    assert [(r["action"], r["actor"]) for r in signoff["reviews"]] == [
        ("submit", "ana"), ("approve", "appr")]  # fmt: skip
    manifest = orjson.loads(members["manifest.json"])
    assert manifest["format"] == "kvscope-evidence/1" and manifest["digest"] == version.digest
    assert {e["name"]: (e["size"], e["sha256"]) for e in manifest["files"]} == {
        name: (len(data), _sha(data)) for name, data in members.items() if name != "manifest.json"
    }
    rest = {k: v for k, v in manifest.items() if k != "sha256"}
    assert manifest["sha256"] == _sha(orjson.dumps(rest, option=orjson.OPT_SORT_KEYS))


def test_the_audit_events_are_the_policys_with_links_up_to_the_head(client, analysis, analyst,
                                                                    approver):  # fmt: skip
    version, _ = _signed_version(analysis, analyst, approver)
    audit = orjson.loads(_members(_download(client, approver, version))["audit.json"])
    ours = AuditEvent.objects.filter(object_type="PolicyVersion", object_id=str(version.pk))
    first = ours.order_by("pk").first()
    head = AuditHead.objects.get()  # now: the download's own event on top of the pack's head
    rows = AuditEvent.objects.filter(pk__gte=first.pk, pk__lt=head.last_id).order_by("pk")
    assert [e["pk"] for e in audit["events"]] == [row.pk for row in rows]
    for event, row in zip(audit["events"], rows, strict=True):
        assert (event["prev_hash"], event["hash"]) == (row.prev_hash, row.hash)
        if row.object_id == str(version.pk) and row.object_type == "PolicyVersion":
            assert (event["at"], event["action"], event["details"]) == (
                row.at.isoformat(), row.action, row.details)  # fmt: skip
        else:  # the other policies' creations: links only
            assert set(event) == {"pk", "prev_hash", "hash"}, event
    actions = [e["action"] for e in audit["events"] if "action" in e]
    assert actions == ["policy.create", "policy.edit", "policy.submit", "policy.approve"]
    links = _links(version, audit["head"]["last_id"])
    assert sum("action" not in e for e in audit["events"]) == len(links)
    # among them "other" and "later", each policy's creation
    assert [r.action for r in links if r.action.startswith("policy.")] == ["policy.create"] * 2
    assert audit["head"]["last_id"] == audit["events"][-1]["pk"] == head.last_id - 1


def test_verify_pack_accepts_it_without_the_database_and_each_download_is_one_event(
    client, analysis, analyst, approver, auditor, tmp_path, django_db_blocker
):
    version, _ = _signed_version(analysis, analyst, approver)
    raw = _download(client, auditor, version)
    (event,) = AuditEvent.objects.filter(action="policy.evidence_pack")
    assert (event.actor_name, event.object_id) == ("aud", str(version.pk))
    members = _members(raw)
    assert event.details == {"manifest_sha256": _sha(members["manifest.json"]),
                             "pack_sha256": _sha(raw), "bytes": len(raw),
                             "digest": version.digest}  # fmt: skip
    with django_db_blocker.block():  # any query would raise
        summary = _verify(tmp_path, raw)
    content_events = 4  # create, edit, submit, approve
    assert (
        summary.strip()
        == (
            f"evidence pack verified: policy 'chat EU' v1, approved by appr at "
            f"{timezone.localtime(version.signoff.at).isoformat()}, sha256 {version.digest}; "
            f"{len(members)} files, {content_events} audit events verified (and "
            f"{len(_links(version, event.pk - 1))} links), ending "
            f"at the head #{event.pk - 1} sha256 {event.prev_hash}\n"
        ).strip()
    )
    again = _download(client, auditor, version)
    assert AuditEvent.objects.filter(action="policy.evidence_pack").count() == 2
    audit = orjson.loads(_members(again)["audit.json"])
    assert [e["action"] for e in audit["events"] if "action" in e][-1] == "policy.evidence_pack"
    with django_db_blocker.block():
        assert f"{content_events + 1} audit events verified" in _verify(tmp_path, again)


def test_verify_pack_rejects_a_byte_changed_in_any_file(client, analysis, analyst, approver,
                                                        tmp_path, django_db_blocker):  # fmt: skip
    version, _ = _signed_version(analysis, analyst, approver)
    raw = _download(client, approver, version)
    members = _members(raw)
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        stamp = dos_stamp(archive.infolist()[0].date_time)
    assert zip_bytes(list(members.items()), stamp) == raw  # the layout is rebuilt exactly
    with django_db_blocker.block():
        for name, data in members.items():
            middle = len(data) // 2
            changed = data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]
            files = [(n, changed if n == name else d) for n, d in members.items()]
            why = _rejection(tmp_path, zip_bytes(files, stamp))
            if name == "manifest.json":
                assert why.startswith("manifest.json: "), why
            else:
                assert why == (f"{name}: its SHA-256 is {_sha(changed)}, but the manifest says "
                               f"{_sha(data)} (the file was changed)")  # fmt: skip
        extra = zip_bytes([*members.items(), ("notes.txt", b"hi")], stamp)
        assert _rejection(tmp_path, extra) == (
            "notes.txt: in the pack but not in the manifest (a file was added)")  # fmt: skip
        fewer = zip_bytes([(n, d) for n, d in members.items() if n != "signoff.json"], stamp)
        assert _rejection(tmp_path, fewer) == (
            "signoff.json: listed in the manifest but missing from the pack")  # fmt: skip


def test_verify_pack_rejects_a_byte_changed_anywhere_in_the_zip(client, analysis, analyst,
                                                               approver, tmp_path):  # fmt: skip
    version, _ = _signed_version(analysis, analyst, approver)
    raw = _download(client, approver, version)
    body = canonical_json(version.body)
    inside = raw.index(body) + len(body) // 2  # a byte of policy.json's content
    flipped = raw[:inside] + bytes([raw[inside] ^ 0x01]) + raw[inside + 1 :]
    assert _rejection(tmp_path, flipped) == (
        "policy.json: its bytes were changed (they do not match the CRC-32 the ZIP records "
        "for it)")  # fmt: skip
    # a file's header time, which zipfile itself never reads: only the rewrite sees it
    assert _rejection(tmp_path, raw[:10] + bytes([raw[10] ^ 0x01]) + raw[11:]) == (
        "the ZIP's own bytes were changed at byte 10 (the header of README.txt), outside "
        "its files' content")  # fmt: skip
    # every byte that is not a file's content: headers, directory, end record
    content = set()
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        infos = archive.infolist()
    for info in infos:  # a stored file's bytes follow its 30-byte header and its name
        start = info.header_offset + 30 + len(info.filename.encode())
        content.update(range(start, start + info.file_size))
    structure = [at for at in range(len(raw)) if at not in content]
    assert len(structure) == sum(30 + 46 + 2 * len(i.filename.encode()) for i in infos) + 22
    for at in structure:  # the command's own check, called directly (a thousand times)
        with pytest.raises(PackProblem):
            check_pack(raw[:at] + bytes([raw[at] ^ 0xFF]) + raw[at + 1 :])


def test_a_draft_has_no_pack(client, analysis, analyst):
    version = policy_create(name="draft only", user=analyst, analysis=analysis)
    client.force_login(analyst)
    response = client.get(reverse("policy_evidence_pack", args=[version.pk]))
    assert response.status_code == 404
    assert "v1 was never approved (it is draft): only a signed-off version has an evidence pack." \
        in response.content.decode()  # fmt: skip
    assert not AuditEvent.objects.filter(action="policy.evidence_pack").exists()
    # and the version page offers no such link
    page = client.get(reverse("policy_version", args=[version.pk])).content.decode()
    assert "data-evidence-pack" not in page


def test_the_command_line_runs_without_a_database(client, analysis, analyst, approver, tmp_path):
    """manage.py verify_pack as an auditor runs it, on a machine whose database cannot even
    be opened: a genuine pack exits 0, a changed one 1 naming the file."""
    version, _ = _signed_version(analysis, analyst, approver)
    raw = _download(client, approver, version)
    page = client.get(reverse("policy_version", args=[version.pk])).content.decode()
    assert reverse("policy_evidence_pack", args=[version.pk]) in page
    good, bad = tmp_path / "good.zip", tmp_path / "bad.zip"
    good.write_bytes(raw)
    members = _members(raw)
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        stamp = dos_stamp(archive.infolist()[0].date_time)
    members["signoff.json"] = members["signoff.json"].replace(b'"appr"', b'"eve!"')
    bad.write_bytes(zip_bytes(list(members.items()), stamp))
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/no/such/dir/db.sqlite3",
               KVSCOPE_DATA_DIR=str(tmp_path / "data"))  # fmt: skip
    env.pop("DJANGO_SETTINGS_MODULE", None)

    def run(path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "manage.py", "verify_pack", str(path)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=120)  # fmt: skip

    ok = run(good)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("evidence pack verified: policy 'chat EU' v1, approved by appr")
    refused = run(bad)
    assert refused.returncode == 1
    assert f"{bad}: signoff.json: its SHA-256 is " in refused.stderr


def _resealed(raw: bytes, name: str, data: bytes) -> bytes:
    """The pack with one file replaced and the manifest written again to match it (what a
    forger would do): only the checks beyond the manifest can catch it."""
    members = _members(raw)
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        stamp = dos_stamp(archive.infolist()[0].date_time)
    members[name] = data
    manifest = orjson.loads(members["manifest.json"])
    for entry in manifest["files"]:
        if entry["name"] == name:
            entry["size"], entry["sha256"] = len(data), _sha(data)
    rest = {k: v for k, v in manifest.items() if k != "sha256"}
    manifest["sha256"] = _sha(orjson.dumps(rest, option=orjson.OPT_SORT_KEYS))
    members["manifest.json"] = orjson.dumps(manifest, option=orjson.OPT_INDENT_2)
    return zip_bytes(list(members.items()), stamp)


def test_a_resealed_pack_is_still_caught_by_the_chain_and_the_signature(
    client, analysis, analyst, approver, tmp_path
):
    version, _ = _signed_version(analysis, analyst, approver)
    raw = _download(client, approver, version)
    members = _members(raw)
    assert _resealed(raw, "README.txt", members["README.txt"]) == raw  # the forger's tool works
    audit = orjson.loads(members["audit.json"])
    events = audit["events"]
    create, link = events[0], next(e for e in events if "action" not in e)
    after_link = events[events.index(link) + 1]

    def audit_with(changed: list) -> bytes:
        return _resealed(raw, "audit.json", orjson.dumps(dict(audit, events=changed)))

    renamed = [dict(create, details=dict(create["details"], policy="chat US")), *events[1:]]
    assert (
        _rejection(tmp_path, audit_with(renamed))
        == f"audit.json: event #{create['pk']}: {CONTENT_MISMATCH}"
    )
    removed = [e for e in events if e is not link]
    assert (
        _rejection(tmp_path, audit_with(removed))
        == f"audit.json: event #{after_link['pk']}: {PREV_MISMATCH}"
    )
    cut, last = events[:-1], events[-2]
    assert _rejection(tmp_path, audit_with(cut)) == (
        f"audit.json: the events end at #{last['pk']} sha256 {last['hash']}, but the head "
        f"recorded is #{audit['head']['last_id']} sha256 {audit['head']['last_hash']}")  # fmt: skip
    approval = next(e for e in events if e.get("action") == "policy.approve")
    unsigned = [{k: e[k] for k in ("pk", "prev_hash", "hash")} if e is approval else e
                for e in events]  # fmt: skip
    assert _rejection(tmp_path, audit_with(unsigned)) == (
        f"audit.json: no policy.approve event of version {version.pk} signing {version.digest}"
    )
    signoff = orjson.loads(members["signoff.json"])
    forged = orjson.dumps(dict(signoff, digest="0" * 64))
    assert _rejection(tmp_path, _resealed(raw, "signoff.json", forged)) == (
        f"signoff.json: signs {'0' * 64}, but policy.json hashes to {version.digest}"
    )
    other = canonical_json(dict(version.body, lifetime_s=7200))
    both = _resealed(_resealed(raw, "policy.json", other), "policy.sha256",
                     f"{_sha(other)}  policy.json\n".encode())  # fmt: skip
    assert _rejection(tmp_path, both) == (
        f"manifest.json: its digest {version.digest} is not the SHA-256 of policy.json "
        f"({_sha(other)})")  # fmt: skip


def test_a_retired_version_keeps_its_pack_with_the_retirement_in_it(
    client, analysis, analyst, approver, tmp_path
):
    version, _ = _signed_version(analysis, analyst, approver)
    policy_retire(policy=version.policy, user=approver, password=PASSWORD, comment="Gone.")
    version.refresh_from_db()
    assert version.state == VersionState.RETIRED
    raw = _download(client, approver, version)
    audit = orjson.loads(_members(raw)["audit.json"])
    retired = [e for e in audit["events"] if e.get("action") == "policy.retire"]
    # the version's transition, then the policy's own event (an object of its own)
    assert [(e["object_type"], e["object_id"]) for e in retired] == [
        ("PolicyVersion", str(version.pk)), ("Policy", str(version.policy_id))]  # fmt: skip
    # create, edit, submit, approve and the two retirements
    head_id = audit["head"]["last_id"]
    assert f"6 audit events verified (and {len(_links(version, head_id))} links)" in _verify(
        tmp_path, raw)  # fmt: skip
