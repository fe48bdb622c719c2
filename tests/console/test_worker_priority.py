"""A worker yields the cores to the pages: its processes run at a lower CPU priority
(KVSCOPE_WORKER_NICE), inherited by its pool. Needs a real broker (the second CI run)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.console.own_worker import own_worker
from tests.console.waiting import BROKER_MODE, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not BROKER_MODE, reason="needs a real broker and workers"),
]


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # gone meanwhile
                continue
            # the fields after the command name, which may hold spaces, are ") S ppid ..."
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize(("nice", "lower_by"), [(None, 10), ("3", 3), ("0", 0)])
def test_a_worker_and_its_pool_run_below_the_web(tmp_path, nice, lower_by):
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    env = {} if nice is None else {"KVSCOPE_WORKER_NICE": nice}
    with own_worker(f"nice{lower_by}", "kvscope-nice", tmp_path, pool="prefork", **env) as proc:
        pool = wait_for(lambda: len(_children(proc.pid)) >= 2 and _children(proc.pid))
        expected = min(ours + lower_by, 19)
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == expected
        assert [os.getpriority(os.PRIO_PROCESS, child) for child in pool] == [expected] * len(pool)
