"""Where a build's stages run (Prefect's thread pool or Dask, :func:`task_runner`) and how a build stopped from
outside ends (:class:`StageThreads`, :func:`ended_when_stopped`)."""

from __future__ import annotations

import faulthandler
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from prefect.context import FlowRunContext
from prefect.exceptions import TerminationSignal
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from ..tasks.text.languages import serve_in_this_process

TASK_RUNNERS = ("threads", "dask")


STOPS = (KeyboardInterrupt, TerminationSignal)
"""What stops a build from outside: SIGINT, and SIGTERM as Prefect raises it in the flow (``kill``, ``timeout``, a
machine shutting down, Prefect's cancellation of the flow run, which sends it)."""


STOP_GRACE = 5.0
"""Seconds a stopped build's process has, once its run is marked ``incomplete``, to report its end to Prefect
before it is ended whatever its stages are doing (:func:`ended_when_stopped`)."""


class StageThreads(ThreadPoolTaskRunner):
    """Prefect's thread pool, except that a flow stopped from outside (:data:`STOPS`) does not wait for the stages
    still running when it ends: a thread cannot be interrupted, and Prefect's pool waits for its threads
    (``ThreadPoolExecutor.shutdown(wait=True)``), so a build stopped in a stage deep in work ran on until the stage
    ended. A flow that failed still waits for them, as before."""

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        executor = self._executor
        if executor is not None and exc_type is not None and issubclass(exc_type, STOPS):
            self._executor = None  # Prefect's own exit would wait for the running stages
            executor.shutdown(wait=False, cancel_futures=True)
        super().__exit__(exc_type, exc_value, traceback)


@contextmanager
def ended_when_stopped(grace: float = STOP_GRACE) -> Iterator[None]:
    """A build terminated (SIGTERM) ends its process within ``grace`` seconds, whatever its stages are doing. Python
    runs a signal's handler in the main thread only, and nothing stops a stage's thread: the run is marked
    ``incomplete`` (:meth:`RunFolder.recording`), the flow reports its end to Prefect without waiting for the
    stages (:class:`StageThreads`), and if the process is still there ``grace`` seconds later (the interpreter
    too waits for the threads at its exit), faulthandler's watchdog ends it (exit code 1). The watchdog is a C
    thread: it fires even while a stage holds the GIL in a long call into pandas or pyarrow. An interrupt (SIGINT)
    stops the flow the same way but leaves the process to its caller (``pbbq build`` ends it; a notebook's kernel
    lives on)."""
    try:
        yield
    except TerminationSignal:
        nowhere = open(os.devnull, "w")  # noqa: SIM115  (faulthandler keeps it: the stacks stay off the terminal)
        faulthandler.dump_traceback_later(grace, exit=True, file=nowhere)
        raise


def task_runner(name: str = "threads", address: str | None = None, workers: int | None = None) -> TaskRunner[Any]:
    """Where the stages run: Prefect's thread pool (the default; one paper-scale build fits one machine), or
    Dask (``pip install -e ".[dask]"``): the cluster at ``address``; a local cluster of ``workers`` worker
    processes of one thread each (the stages' LLM client goes to a worker as its configuration and response store
    file, :meth:`pbbq.tasks.llm.LLMClient.__getstate__`); or, without either, a local one of two single-threaded
    workers in this process."""
    if name == "threads":
        if workers is not None:
            raise ValueError("--dask-workers needs --task-runner dask")
        return StageThreads()
    if name != "dask":
        raise ValueError(f"task runner {name!r} is not one of {', '.join(TASK_RUNNERS)}")
    if address and workers is not None:
        raise ValueError("--dask-workers makes a local cluster: leave it out with --dask-address")
    if workers is not None and workers < 1:
        raise ValueError(f"--dask-workers {workers} must be at least 1")
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        raise ValueError('task runner dask needs the dask extra: pip install -e ".[dask]"') from None
    if address:
        return DaskTaskRunner(address=address)
    if workers is not None:
        return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True})
    return DaskTaskRunner(cluster_kwargs={"n_workers": 2, "threads_per_worker": 1, "processes": False})


def share_languages(folders: tuple[Path, ...]) -> None:
    """The build's own languages (``[languages] modules``) on the flow's Dask workers too: every worker, and every
    one that joins later, loads them (:func:`serve_in_this_process`) before it runs a stage, since a worker in
    another process gets no context from the flow's (a remote cluster needs the files at the same paths)."""
    context = FlowRunContext.get()
    runner = context.task_runner if context else None
    client = getattr(runner, "client", None)  # a DaskTaskRunner's (the thread pool has none)
    if folders and client is not None:
        client.register_worker_callbacks(partial(serve_in_this_process, folders))
