"""Rewrite the golden reports (see tests/golden/__init__.py for when that is right)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.golden.cases import CASES, HASH_KEY, REPO


def main() -> int:
    env = {**os.environ, "KVSCOPE_HASH_KEY": HASH_KEY}
    for case in CASES:
        if case.log is None:
            print(f"{case.name}: its log is not on this machine", file=sys.stderr)
            return 1
        cmd = [sys.executable, "manage.py", "analyze", str(case.log), *case.args]
        subprocess.run([*cmd, "--json", str(case.golden)], cwd=REPO, env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
