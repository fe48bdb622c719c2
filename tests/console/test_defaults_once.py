"""The defaults exist once: every place that builds analysis parameters where the user gave
nothing ends at AnalysisParams() (the model's profile compared too).

Each source is a function returning the AnalysisParams that place would analyse with; a
new place (a form, an automatic first analysis, a policy re-run) is one more entry.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analysis import AnalysisParams
from console.engine import analysis_params
from console.management.commands.analyze import Command, params_from_options


def _command_line() -> AnalysisParams:
    """manage.py analyze LOG --json OUT, with no other option."""
    parser = Command().create_parser("manage.py", "analyze")
    opts = vars(parser.parse_args(["day.jsonl", "--json", "out.json"]))
    return params_from_options(opts)


def _engine_doorway() -> AnalysisParams:
    """console.engine.analysis_params() with no argument."""
    return analysis_params()


SOURCES: dict[str, Callable[[], AnalysisParams]] = {
    "command line": _command_line,
    "engine doorway": _engine_doorway,
}


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_no_choice_gives_the_engine_defaults(source):
    # dataclass equality: every field, the model's KV profile included
    assert source() == AnalysisParams()
