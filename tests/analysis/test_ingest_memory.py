"""An ingest hands back its memory when it returns: nothing it built waits in a reference
cycle for the collector (the builder's columns are as large as the stream: 1.2 GB held
through a 100-million-reference analysis, until this was so)."""

from __future__ import annotations

import gc

import pytest

from analysis import IngestOptions, ingest

from .conftest import HASH_KEY


def _garbage_of(read) -> list[str]:
    """The type names of what `read()` left in reference cycles."""
    gc.collect()
    gc.disable()
    try:
        stream = read()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return [type(o).__name__ for o in gc.garbage if o is not stream]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.parametrize("shape", ["trace", "chat"])
def test_no_cycle_keeps_the_builder(write_jsonl, trace, shape):
    if shape == "trace":  # the column-wise path
        rows = [trace(1000 * i, [1, 2, 10 + i], 512) for i in range(50)]
    else:
        rows = [{"timestamp": i, "messages": [{"role": "user", "content": f"question {i}"}]}
                for i in range(50)]  # fmt: skip
    log = write_jsonl(rows)
    left = _garbage_of(lambda: ingest([log], IngestOptions(hash_key=HASH_KEY)))
    assert "StreamBuilder" not in left
    assert "_LogReading" not in left
    assert "BlockColumns" not in left
