"""Loading the analysis kernels before there is work for them.

The first call of any numba function in a process costs about 0.3 s however small its
input: numba builds its typing and lowering registries, then loads the function from its
on-disk cache. A command-line process pays it once; `manage.py analyze` pays it while
worker processes read a big log (ingest/processes.py), instead of after."""

from __future__ import annotations

import numpy as np


def warm_kernels() -> None:
    """Import every analysis module and call one kernel on a two-value input."""
    import analysis.metrics.orchestrate  # noqa: F401  every kernel's module, numba with them
    from analysis.reuse import dense_ids

    dense_ids(np.zeros(2, dtype=np.uint64))  # the registries, and the first kernel the
    # analysis calls, for its own argument types (a stream's uint64 keys, int32 codes)
