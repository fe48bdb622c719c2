"""The engine imports nothing from Django, Celery or the console (architecture.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "analysis"
FORBIDDEN = ("django", "celery", "console", "kombu")


def test_no_engine_module_imports_web_or_task_code():
    offenders = []
    for path in sorted(ENGINE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            offenders += [
                f"{path.name}:{node.lineno} {name}"
                for name in names
                if name.split(".")[0] in FORBIDDEN
            ]
    assert offenders == []
    assert len(list(ENGINE.glob("*.py"))) > 10  # the scan really saw the engine


def test_importing_and_running_the_engine_loads_no_django():
    code = (
        "import sys, analysis\n"
        "from analysis.profiles import preset\n"
        "assert preset('llama-3.1-8b').kv_bytes_per_token() == 131072\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ENGINE.parent,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
