"""The house rules of #13, checked on the code itself (read as text, nothing imported):
no import circle, no import hidden inside a function to dodge one, no module over 400
lines, no function over 60 lines unless it is a literal layout named here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("analysis", "console")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# declarations, not logic (say which and why, e.g. one argparse option after another)
LITERAL_LAYOUTS: set[str] = set()
# imports that must wait for run time, each for a reason that is not a circle
LATE_IMPORTS = {
    # the auth app's models exist only once Django is set up; roles.py is imported before
    "console/roles.py:ensure_roles",
    # Django's place for what must load once the apps are: every Celery task, by name
    "console/apps.py:ConsoleConfig.ready",
    # the WSGI entry point cleans up after a crash once Django is set up, not at import
    "console/wsgi.py:_purge_crash_leftovers",
    # Celery's app for whoever asks, not at import: a settings-only command needs none
    "console/__init__.py:__getattr__",
    # the engine's kernels (numba, pyarrow) once there is work: `analyze --help` needs none
    "console/management/commands/analyze.py:read_logs",
    "console/management/commands/analyze.py:Command.handle",
    # the reading half of the engine in the worker, the merging half in the caller once
    # it waits for them: the workers start before either is imported (ingest/processes.py)
    "analysis/ingest/processes.py:_start",
    "analysis/ingest/processes.py:_read_part",
    "analysis/ingest/processes.py:PendingIngest.result",
    # importing every kernel's module is what a warm-up is for
    "analysis/metrics/warm.py:warm_kernels",
}


def _sources() -> dict[str, Path]:
    """Module name -> file, migrations aside."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "migrations" in rel.parts:
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


SOURCES = _sources()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_imports(tree: ast.Module, name: str, is_package: bool) -> set[str]:
    """The project modules a module imports when it is imported (not under TYPE_CHECKING,
    not inside a function)."""
    found: set[str] = set()
    package = name if is_package else name.rpartition(".")[0]

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node):
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                    base = f"{base}.{node.module}" if node.module else base
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If | ast.Try | ast.With):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, field, []):
                        visit(child.body if isinstance(child, ast.ExceptHandler) else [child])

    visit(tree.body)
    return {m for m in found if m in SOURCES and m != name}


def _graph() -> dict[str, set[str]]:
    return {
        name: _module_imports(ast.parse(path.read_text()), name, path.name == "__init__.py")
        for name, path in SOURCES.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the modules along it, or None. A package's __init__ that
    imports its own submodules is how a package exports them, not a circle: edges from a
    package to its submodules are left out."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if target.startswith(node + "."):
                continue
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_circle_and_passes_a_package_exporting_its_parts():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"p": {"p.x"}, "p.x": {"q"}, "q": set()}) is None


def test_no_import_circle():
    assert _cycle(_graph()) is None


def _functions(tree: ast.Module):
    """(qualified name, node) of every function and method, nested ones included."""

    def walk(node: ast.AST, prefix: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    yield name, child
                yield from walk(child, name + ".")

    yield from walk(tree, "")


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_modules_and_functions_stay_small(name):
    path = SOURCES[name]
    rel = path.relative_to(ROOT).as_posix()
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{rel}: over {MAX_MODULE_LINES} lines"
    for qualname, node in _functions(ast.parse(text)):
        where = f"{rel}:{qualname}"
        length = node.end_lineno - node.lineno + 1
        if where not in LITERAL_LAYOUTS:
            assert length <= MAX_FUNCTION_LINES, f"{where}: {length} lines"
        late = [n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)]
        project = [n for n in late if (getattr(n, "module", None) or n.names[0].name)
                   .split(".")[0] in PACKAGES]  # fmt: skip
        if where not in LATE_IMPORTS:
            assert not project, f"{where}: imports the project inside a function"
