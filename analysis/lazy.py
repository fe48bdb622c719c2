"""A package's public names, each imported from its module on first use (PEP 562).

Importing `analysis.params` runs `analysis/__init__.py` first: with eager imports there, a
constant cost the whole engine (numba, pyarrow, every kernel's module), about half a
second of every process that names one constant — Django's start-up, `manage.py analyze
--help`, a page. A package built with `lazy_exports` imports a name's module when the
name is first read, and keeps it, so `from analysis import analyze` costs what it did.
Type checkers read the package's `if TYPE_CHECKING:` imports instead.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, modules: Mapping[str, tuple[str, ...]], *, over_submodules: tuple[str, ...] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`__getattr__`, `__dir__` and `__all__` for `package`, whose public names are
    `modules[module]` for each module path.

    `over_submodules` names a public name that is also a submodule's (`analysis.ingest`: the
    function and its package). Importing a submodule binds its name on the package, which
    would hide the public one; so each is imported now (its own names should be lazy, so
    that is cheap) and its binding dropped, and the name resolves here as any other."""
    home = {name: module for module, names in modules.items() for name in names}
    for name in over_submodules:
        importlib.import_module(f"{package}.{name}")
        delattr(sys.modules[package], name)

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # read once: later reads skip this
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(home))

    return __getattr__, __dir__, sorted(home)
