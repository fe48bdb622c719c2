"""The defaults exist once: every place that builds analysis parameters where the user gave
nothing ends at AnalysisParams() (the model's profile compared too).

Each source is a function returning the AnalysisParams that place would analyse with; a
new place (a form, an automatic first analysis, a policy re-run) is one more entry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from analysis import AnalysisParams
from console.engine import analysis_params
from console.management.commands.analyze import Command, params_from_options
from console.policies.body import empty_body
from console.policies.services import rerun_params
from console.uploads.analyses import DEFAULT_PARAMS
from console.uploads.analysis_forms import AnalysisForm


def _command_line() -> AnalysisParams:
    """manage.py analyze LOG --json OUT, with no other option."""
    parser = Command().create_parser("manage.py", "analyze")
    opts = vars(parser.parse_args(["day.jsonl", "--json", "out.json"]))
    return params_from_options(opts)


def _engine_doorway() -> AnalysisParams:
    """console.engine.analysis_params() with no argument."""
    return analysis_params()


def _analysis_form() -> AnalysisParams:
    """The analysis form posted as it opens: every field at its initial value."""
    blank = AnalysisForm(block_sizes=[256])
    data = {}
    for name, field in blank.fields.items():
        value = blank.get_initial_for_field(field, name)
        if value is not None and name != "model_config":
            data[name] = value
    data["block_tokens"] = 256
    form = AnalysisForm(data, block_sizes=[256])
    assert form.is_valid(), form.errors
    return analysis_params(**form.params())


def _first_analysis() -> AnalysisParams:
    """The analysis every upload gets when its ingest finishes."""
    return analysis_params(**DEFAULT_PARAMS)


SOURCES: dict[str, Callable[[], AnalysisParams]] = {
    "command line": _command_line,
    "engine doorway": _engine_doorway,
    "analysis form": _analysis_form,
    "first analysis": _first_analysis,
}


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_no_choice_gives_the_engine_defaults(source):
    # dataclass equality: every field, the model's KV profile included
    assert source() == AnalysisParams()


def test_a_policy_rerun_changes_only_the_policys_lifetime_and_scope():
    """A policy linked to the first analysis re-runs it with the engine's defaults but for
    the policy's own lifetime and sharing scope."""
    body = dict(empty_body(), lifetime_s=900, scope="tenant")
    params = analysis_params(**rerun_params(DEFAULT_PARAMS, body))
    assert params == dataclasses.replace(AnalysisParams(), lifetime_s=900.0, scope="tenant")
