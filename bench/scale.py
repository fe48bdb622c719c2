"""`scale`: a generated trace of about 100 million block references (Mooncake format, the
fleet benchmark's realistic sharing: Zipf-popular shared prefixes plus conversations whose
turns resend their growing history), the whole `manage.py analyze` process on it.

    python -m bench scale --refs 100000000 [--workdir DIR]

Past 20 million references the curve is SHARDS-sampled; `python -m bench mrc
--shards-rate R` checks its error against the exact curve at each rate.
"""

from __future__ import annotations

import json

from bench.fleet import conversation_trace
from bench.harness import MANAGE, ProcessTimer, work_folder


def run(refs: int, workdir: str | None, timer: ProcessTimer) -> None:
    work = work_folder(workdir)
    log = conversation_trace(work, refs, chat_ids=False)
    out = work / f"scale-{refs}.json"
    cmd = [*MANAGE, "analyze", str(log), "--json", str(out)]
    wall, rss, code = timer.best(cmd)
    report = json.loads(out.read_text())
    print(f"scale: {report['requests']:,} requests, {report['block_refs']:,} block references, "
          f"{log.stat().st_size / 1e9:.2f} GB ({log})")  # fmt: skip
    print(
        f"  kvscope analyze, whole process: {wall:.1f} s, peak RSS {rss / 1024:.2f} GB, exit "
        f"{code}; curve {'exact' if report['mrc_exact'] else 'SHARDS'} at rate "
        f"{report['mrc_sampling_rate']:.4f}"
    )
