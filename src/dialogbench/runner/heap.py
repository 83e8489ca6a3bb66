"""The heap a run's calls allocate against: what was there before the units start is frozen.

CPython's cyclic garbage collector walks every tracked object of the oldest generation on
each full collection. A run holds its dataset, plan, imported libraries and saved records
for its whole life; without this, each full collection during a batch of model calls walks
all of them again (in `benchmarks/bench_model_overhead.py`, two full collections among
2,000 calls at 128-way concurrency cost 0.08 ms of CPU a call, a quarter of the client's).
`gc.freeze()` moves the objects alive now out of the collector's view; `gc.unfreeze()`
gives them back when the units are done, so garbage among them is still collected then.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze the objects alive now for the duration (both steps O(1)); nested uses, or a
    heap someone else froze, stay frozen until the outermost freeze is undone."""
    was_frozen = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        yield
    finally:
        if not was_frozen:
            gc.unfreeze()
