"""manage.py analyze writes the golden reports byte for byte (tests/golden)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.golden.cases import CASES, HASH_KEY

BY_NAME = {case.name: case for case in CASES}


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_the_command_writes_the_golden_report(name, tmp_path, settings):
    case = BY_NAME[name]
    assert case.log is not None, f"{name}: the shared trace is not on this machine"
    settings.KVSCOPE_HASH_KEY = HASH_KEY.encode()
    out = tmp_path / "report.json"
    call_command("analyze", str(case.log), *case.args, "--json", str(out))
    assert out.read_bytes() == case.golden.read_bytes()
