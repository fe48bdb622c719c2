"""The peer tools kvscope's figures are checked against, each installed once in a
virtualenv of its own under $KVSCOPE_PEER_VENVS (default ~/.cache/kvscope-peers), never in
the project's. A test that needs one skips, saying why, only when that virtualenv cannot be
made or the package cannot be installed (no package index)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def peer_python(name: str, package: str) -> Path:
    """The Python of the virtualenv `name` holding `package` (a pip requirement, pinned):
    made and installed once, then reused. Built beside its final place and renamed there,
    so a failed or concurrent build never leaves a half-made one to be reused. (Run the
    peer as a module with it: a renamed venv's scripts point at the folder it was built
    in.)"""
    root = Path(os.environ.get("KVSCOPE_PEER_VENVS") or Path.home() / ".cache" / "kvscope-peers")
    venv = root / name
    if (venv / "installed").is_file():
        return venv / "bin" / "python"
    root.mkdir(parents=True, exist_ok=True)
    building = root / f"{name}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    python = building / "bin" / "python"
    for command in (
        [sys.executable, "-m", "venv", str(building)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", package],
    ):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            reason = (done.stderr or done.stdout).strip().splitlines()[-3:]
            pytest.skip(f"cannot install {package}: `{' '.join(command)}` failed: "
                        + " / ".join(reason))  # fmt: skip
    (building / "installed").write_text(package + "\n")
    try:
        building.rename(venv)
    except OSError:  # another run finished first: use its copy
        shutil.rmtree(building, ignore_errors=True)
    return venv / "bin" / "python"
