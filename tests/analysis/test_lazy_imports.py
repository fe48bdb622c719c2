"""The engine's packages import a public name's module on first use (analysis.lazy), so a
process that names one constant does not pay for numba and pyarrow."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.golden.cases import shared_trace

ROOT = Path(__file__).resolve().parents[2]
LAZY_PACKAGES = ("analysis", "analysis.ingest", "analysis.readers", "analysis.metrics")
HEAVY = ("numba", "pyarrow", "tiktoken", "tokenizers")


def _modules_after(code: str) -> set[str]:
    """The top-level packages a fresh interpreter holds after running `code`."""
    result = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return {name.split(".")[0] for name in result.stdout.split()}


def test_naming_a_constant_or_the_parameters_loads_no_kernel_library():
    loaded = _modules_after(
        "from analysis.params import SCOPES, AnalysisParams\n"
        "from analysis.ingest import DEFAULT_BLOCK_TOKENS, FORMATS\n"
        "from analysis.readers import TOOLS_POSITIONS\n"
        "from analysis import IngestOptions, UnusableInput\n"
        "AnalysisParams().validate()"
    )
    assert "analysis" in loaded
    assert sorted(loaded & set(HEAVY)) == []


def test_running_the_engine_loads_what_it_needs():
    loaded = _modules_after(
        "from analysis import AnalysisParams, IngestOptions, analyze, ingest\n"
        f"s = ingest([{str(shared_trace())!r}], "
        "IngestOptions(hash_key=b'k' * 32))\n"
        "assert analyze(s, AnalysisParams()).requests == 3993"
    )
    assert {"numba", "pyarrow"} <= loaded


def _typed_names(package: str) -> dict[str, str]:
    """name -> module of the package's `if TYPE_CHECKING:` imports (what type checkers see)."""
    init = ROOT / package.replace(".", "/") / "__init__.py"
    typed: dict[str, str] = {}
    for node in ast.walk(ast.parse(init.read_text())):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                typed |= {alias.name: imp.module for alias in imp.names}
    return typed


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_exported_name_is_its_modules_object_and_typed_alike(package):
    module = importlib.import_module(package)
    typed = _typed_names(package)
    assert sorted(module.__all__) == sorted(typed)  # type checkers see what runs
    for name, home in typed.items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


def test_ingest_is_the_function_even_when_its_package_was_imported_first():
    # `analysis.ingest` names a subpackage and the function: importing the subpackage
    # binds the package attribute, which must not hide the function
    code = (
        "import analysis.ingest.options\n"
        "import analysis\n"
        "from analysis import ingest\n"
        "from analysis.ingest.run import ingest as run_ingest\n"
        "assert ingest is run_ingest, ingest\n"
        "assert analysis.ingest is run_ingest\n"
        "from analysis.ingest import splittable, DEFAULT_BLOCK_TOKENS\n"
        "assert DEFAULT_BLOCK_TOKENS['mooncake'] == 512"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
