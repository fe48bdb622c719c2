"""Builders the console's tests share: users with roles, a finished default analysis,
policy versions in a given state, benchmark result files and expected upload messages."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile

from console.models import Analysis, JobStatus, PolicyVersion, Upload
from console.policies.forms import initial_from_body
from console.policies.services import (
    policy_create,
    version_approve,
    version_submit,
    version_update,
)
from console.roles import ensure_roles
from console.uploads.analyses import analysis_create
from console.uploads.analysis_forms import AnalysisForm
from tests.analysis.factories import vllm_result
from tests.console.waiting import settled, wait_for

PASSWORD = "correct-horse-battery-staple"
GIB = 1 << 30
# the tags of a benchmark upload (the form's fields besides the files)
BENCH_TAGS = {"tier": "none", "context_tokens": 8192, "driver": "570.86", "cuda": "12.8",
              "engine": "vllm 0.11", "topology": "GPU0 X NV18"}  # fmt: skip
# how a Mooncake trace read at 256 ends its failure: the size its lines fit
FIT_512 = (
    "at 256 tokens per block; "
    + "they fit 512: retry with 512, or leave the block size to the format"
)


def make_user(username: str, *roles: str) -> User:
    """A user signing in with PASSWORD, in the groups of the roles given."""
    ensure_roles()  # transactional tests flush the groups the migration made
    user = User.objects.create_user(username, password=PASSWORD)
    for role in roles:
        user.groups.add(Group.objects.get(name=role))
    return user


def default_analysis(upload: Upload) -> Analysis:
    """The upload's automatic first analysis, once it is done."""

    def done():
        """the default analysis"""
        return Analysis.objects.filter(upload=upload, status=JobStatus.DONE).first()

    return wait_for(done)


def rerun(analysis: Analysis, user: User, **params) -> Analysis:
    """The analysis re-run through the console with `params` changed (a fleet's: replicas,
    routers, ...), once it is done."""
    params = dict(analysis.params, **params)
    again = analysis_create(upload=analysis.upload, block_tokens=analysis.block_tokens,
                            params=params, user=user)  # fmt: skip
    return wait_for(lambda: Analysis.objects.filter(pk=again.pk, status=JobStatus.DONE).first())


def complete(body: dict) -> dict:
    """A body that passes every check (what a careful author fills in)."""
    body = copy.deepcopy(body)
    body.update(
        routes=body["routes"] or ["llama-3.1-8b"],
        lifetime_s=1800,
        purge_deadline_s=86400,  # no event may take longer than this
        scope="tenant",
    )
    body["end_of_life"] = [
        {"event": "lifetime_expiry", "deadline_s": 60},
        {"event": "tenant_offboarding", "deadline_s": 86400},
    ]
    body["tiers"]["cpu_ram"] = {"enabled": True, "size_gib": 8.0}
    body["failure"] = {
        "ram_full": "evict_lru",
        "worker_exit": "blocks_lost_recompute",
        "load_failure": "recompute",
    }
    body["access"] = {
        "readers": "vllm-engine pods in namespace serving",
        "classification": "confidential",
        "justification": "Hot prompts.",
    }
    return body


def submitted_version(analysis: Analysis, analyst: User) -> PolicyVersion:
    """A new policy "chat EU" with a complete body, submitted for review."""
    version = policy_create(name="chat EU", user=analyst, analysis=analysis)
    version = version_update(
        version=version, body=complete(version.body), user=analyst, analysis=analysis
    )
    version_submit(version=version, user=analyst)
    version.refresh_from_db()
    wait_for(settled)  # its re-run ended (see approved_version)
    return version


def version_in_review(
    analysis: Analysis, author: User, *, editor: User, submitter: User
) -> PolicyVersion:
    """A new policy "p" by author, given a complete body by editor, submitted by submitter."""
    version = policy_create(name="p", user=author, analysis=analysis)
    version = version_update(
        version=version, body=complete(version.body), user=editor, analysis=analysis
    )
    version_submit(version=version, user=submitter)
    wait_for(settled)  # its re-run ended (see approved_version)
    return version


def approved_version(
    analysis: Analysis,
    analyst: User,
    approver: User,
    mutate: Callable[[dict], None] | None = None,
) -> PolicyVersion:
    """A new policy "exported" with a complete body (changed by mutate), signed off."""
    version = policy_create(name="exported", user=analyst, analysis=analysis)
    body = complete(version.body)
    if mutate:
        mutate(body)
    version = version_update(version=version, body=body, user=analyst, analysis=analysis)
    version_submit(version=version, user=analyst)
    version_approve(version=version, user=approver, password=PASSWORD, comment="ok")
    version.refresh_from_db()
    # the policy's re-run ended: on a real worker its events (and its writes) would come
    # in the middle of what the test counts, or deadlock with the teardown's TRUNCATE
    wait_for(settled)
    return version


def check_report(host_available_gib: float | None = None, windows=(300, 3600)) -> dict:
    """The few report fields the policy checks read: the host budget and the windows."""
    host = None
    if host_available_gib is not None:
        host = {"available_bytes": host_available_gib * GIB}
    return {"recommendation": {"host": host}, "windows": [{"window_s": w} for w in windows]}


def form_post(version: PolicyVersion) -> dict:
    """The policy edit form's POST for a version as stored (what a browser sends back)."""
    data = {}
    for key, value in initial_from_body(version.body, version.analysis).items():
        if value is True:
            data[key] = "on"
        elif value not in (None, False, []):
            data[key] = value
    return data


def vllm_file(name: str, **values) -> SimpleUploadedFile:
    """A vLLM result file as the benchmark form receives it (values as vllm_result's)."""
    return SimpleUploadedFile(name, json.dumps(vllm_result(**values)).encode())


def opened_analysis_form(block_tokens: int, **values) -> dict:
    """The analysis form's data as it opens (every field at its initial value, no model
    config file) for a stream of `block_tokens`, with `values` posted over it."""
    blank = AnalysisForm(block_sizes=[block_tokens])
    data = {}
    for name, field in blank.fields.items():
        value = blank.get_initial_for_field(field, name)
        if value is not None and name != "model_config":
            data[name] = value
    return {**data, "block_tokens": block_tokens, **values}


def gib_shown(nbytes: float) -> str:
    """A size as the compare page writes it, worked out here on its own: GiB at any size,
    two decimals with thousands separators from 1 GiB, three significant digits below."""
    value = nbytes / GIB
    return f"{value:,.2f} GiB" if value >= 1 or value == 0 else f"{value:.3g} GiB"
