"""Python's cyclic garbage collector while a build runs (docs/architecture.md §9, "Speed").

A build holds its stages' tables while later stages read them: hundreds of thousands of container objects (list
cells, dicts of reports) that live for much of the run. With CPython's default thresholds (700, 10, 10) a
paper-scale build ran 15 full collections, each walking all of them: 6.6 s of its 39 s of stage compute, and 1.5 s
more in young collections (``benchmarks/build_paper_scale.py``, measured with ``gc.callbacks``). So, while a build
runs:

- what a stage returns is moved out of the collector's generations once the stage is finished
  (:func:`keep_long_lived`, ``gc.freeze``): it lives until the build ends, and reference counting still frees
  whatever of it is dropped earlier; only a reference cycle among those objects waits for the build's end;
- young collections run less often (:data:`BUILD_THRESHOLDS`), since a stage makes its rows in bursts of
  thousands of small objects that all survive.

When the build ends, the thresholds are restored and the frozen objects returned to the collector
(``gc.unfreeze``), so that a process running many builds (a test session, a worker) collects them as before.
Builds running at once in one process share the setting: the first to start sets it, the last to end restores it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

BUILD_THRESHOLDS = (10_000, 10, 10)
"""Generation 0 collected every 10,000 net allocations instead of 700; generations 1 and 2 as by default."""

_lock = threading.Lock()
_builds = [0]
_restore: list[tuple[int, ...]] = []


@contextmanager
def build_collector() -> Iterator[None]:
    """The collector as a build wants it, for the ``with`` block: :data:`BUILD_THRESHOLDS`, and
    :func:`keep_long_lived` freezing; on leaving, the process's thresholds again and nothing frozen."""
    with _lock:
        if not _builds[0]:
            _restore[:] = [gc.get_threshold()]
            gc.set_threshold(*BUILD_THRESHOLDS)
        _builds[0] += 1
    try:
        yield
    finally:
        with _lock:
            _builds[0] -= 1
            if not _builds[0]:
                gc.set_threshold(*_restore.pop())
                gc.unfreeze()


def keep_long_lived() -> None:
    """After a stage (or the build's inputs) is made: move every object the collector tracks now out of its
    generations, so the collections that follow do not walk them again. Only inside :func:`build_collector`:
    elsewhere (a Dask worker's process, a stage called directly) it does nothing."""
    if _builds[0]:  # full collections took 8 of 39 s of a paper-scale build before, 1.8 s with it (655f355)
        gc.freeze()
