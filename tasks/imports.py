"""Heavy libraries imported when first needed, one thread at a time.

The stages import scipy, statsmodels, scikit-learn, matplotlib, hazm, sacrebleu and the LLM SDKs inside the
functions that use them, so a rebuild that takes every stage from the cache never loads them. Prefect runs tasks
in threads, and two threads importing one package whose submodules import each other (scipy's ``spatial`` and
``optimize``, reached from statsmodels in one stage and scikit-learn in another) can meet in CPython's import
deadlock avoidance, which hands one of them a half-initialised module: ``ImportError: cannot import name
'minkowski' from partially initialized module 'scipy.spatial.distance'``. Every import made inside a function of
``tasks/`` or ``flows/audit/`` therefore sits in ``with one_import_at_a_time():`` (tests/test_rebuild_imports.py
checks the source for it).

Importing the stages' libraries once, up front, in the flow would need no lock, but every build would pay for them:
measured in the flow's process on a busy 2-core machine (issue 38), statsmodels took 10.0 s, hazm 3.3 s,
matplotlib 1.7 s and sacrebleu 0.7 s, while a rebuild of the sample taking every stage from the cache ran its
flow in 2.6 s and loads none of them. So the imports stay lazy, and the lock stays.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

_IMPORTING = threading.RLock()
_COUNTING = threading.Lock()
_waiting = 0
"""Threads waiting in :func:`one_import_at_a_time`: a preload gives way to them."""
_GIVE_WAY = 0.005
"""Seconds a preload sleeps while a stage waits to import."""


@contextmanager
def one_import_at_a_time() -> Iterator[None]:
    """Hold the process's lazy-import lock while the block imports (re-entrant: an import may import)."""
    global _waiting
    with _COUNTING:
        _waiting += 1
    try:
        _IMPORTING.acquire()
    finally:
        with _COUNTING:
            _waiting -= 1
    try:
        yield
    finally:
        _IMPORTING.release()


def preload(modules: Iterable[str]) -> threading.Thread:
    """Import ``modules`` in order in a thread of their own, each under the lazy-import lock: a build whose inputs
    changed will run stages that import them, and the imports (a second or more: scipy's through statsmodels,
    hazm's) then overlap the build's start (its calls to the Prefect server) instead of waiting in the stage. A
    stage that needs to import meanwhile goes first: the preload waits before its next module while one does."""

    def load() -> None:
        for module in dict.fromkeys(modules):
            while _waiting:
                time.sleep(_GIVE_WAY)
            with _IMPORTING:
                try:
                    importlib.import_module(module)
                except Exception:  # the stage that imports it reports it, where it fails
                    continue

    thread = threading.Thread(target=load, name="pbbq-preload", daemon=True)
    thread.start()
    return thread
