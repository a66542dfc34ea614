"""The engine a flow runs a pipeline with (:class:`PipelineRunner`): each stage a cached Prefect task (inputs +
code) submitted as soon as the stages it reads have finished, so independent stages (names and translate) run side
by side, at most as many at once as the task runner has workers (:func:`parallel_stages`). Each stage writes
``outputs/<run_id>/NN_<stage>/`` and adds itself to the run's manifest, in pipeline order whatever order they
finish in."""

from __future__ import annotations

import dataclasses
import os
import resource
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, wait
from pathlib import Path
from typing import Any

from prefect import get_run_logger
from prefect.context import FlowRunContext
from prefect.futures import PrefectWrappedFuture, as_completed

from ..tasks.core.artifacts import ArtifactStore, StageOutput, json_text
from ..tasks.core.caching import damaged_warning, stage_task
from ..tasks.core.collector import build_collector
from ..tasks.core.progress import StageProgress
from ..tasks.core.run_folder import RunFolder
from ..tasks.core.stage import (
    Input,
    Parameters,
    Pipeline,
    Resource,
    RunValue,
    Sources,
    Stage,
    Table,
    Tables,
    arguments,
    resource_hash,
)
from ..tasks.core.stored import LazyTables, SharedStacks, StoredInput, StoredStage
from ..tasks.llm import LLMClient
from .build_inputs import STAGE_FILES, BuildInputs
from .config import BuildConfig
from .task_runners import STOPS


def _started(future: Future[Any]) -> bool:
    return future.running() or future.done()


def _settle(future: Future[Any], make: Callable[[], Any]) -> None:
    """Set ``future`` to what ``make()`` gives, or to the exception it raises."""
    try:
        future.set_result(make())
    except BaseException as error:  # the flow's wait for the result raises it
        future.set_exception(error)


class PipelineRunner:
    """Runs the stages of a pipeline against one run folder: resolves each stage's declared inputs, submits it
    as a Prefect task, writes its folder and records the hashes of what it read."""

    def __init__(
        self,
        run: RunFolder,
        cache: Path,
        build: BuildConfig | Parameters,
        client: LLMClient | None,
        inputs: BuildInputs,
        run_values: Mapping[str, Callable[[], Any]],
        pipeline: Pipeline,
        progress: StageProgress | None = None,
        max_parallel: int | None = None,
    ) -> None:
        """``build``: the stages' parameters; ``client``: the build's LLM client, for every stage that asks (None for a
        pipeline with no LLM stage); ``inputs``: the loaded build inputs;
        ``run_values``: the values :class:`RunValue` names, each made when a stage asks for it; ``pipeline``: the
        stages it runs; ``progress``:
        where the running stages are shown (default: nowhere); ``max_parallel``: how many stages may run at once
        (default: as many as the flow's task runner has workers, :func:`parallel_stages`)."""
        self.run, self.cache, self.build, self._client = run, cache, build, client
        self.inputs, self.run_values, self.pipeline = inputs, run_values, pipeline
        self.progress = progress
        self.max_parallel = max_parallel or parallel_stages()
        self.outputs: dict[str, StageOutput] = {}
        self.reports: dict[str, dict[str, Any]] = {}
        self.store = ArtifactStore(cache.parent / STAGE_FILES)
        """Where the cached stages' files and frames are kept (beside Prefect's results in ``cache``)."""
        self._pending: dict[str, tuple[Any, dict[str, Any], PrefectWrappedFuture[Any, Any], dict[str, str], float]] = {}
        self.requests: dict[str, list[str]] = {}
        """Per cached stage that sends LLM requests: those its output used, as its cache record kept them."""
        self.timings: list[dict[str, Any]] = []
        """Per stage: wall seconds from its submission to its result, the process's peak RSS once it is
        written, and whether it came from the cache (``timings.json``; not in the manifest: not reproducible)."""
        self._early: list[tuple[frozenset[str], Callable[[], Any], Future[Any]]] = []
        """Work to start in a thread of its own once some stages are written (:meth:`when_written`)."""
        self.stacks = SharedStacks(made=lambda _: self.release_read())
        """The frames of tables read stacked, each made once for the stages that read them (:class:`SharedStacks`);
        once one is made, the tables in it that no stage still to be written reads otherwise are let go."""
        self._stacked: dict[tuple[tuple[str, str], ...], tuple[str, ...]] = {}
        """The tables read stacked (by folder and name) → the key of their frame in :attr:`stacks` (their files'
        hashes, known once a stage that reads them is submitted)."""
        self._release_lock = threading.Lock()

    def client(self) -> LLMClient | None:
        """The build's LLM client (opened when the build starts, its transcript checked then)."""
        return self._client

    def run_all(self) -> dict[str, StageOutput]:
        """Every stage, each submitted once the stages it reads are written, with the garbage collector set for a
        build (:func:`~pbbq.tasks.core.collector.build_collector`); returns their outputs by folder."""
        with build_collector():
            stopped = False
            try:
                for stage in self.pipeline:
                    for folder in sorted(stage.upstream):
                        self.wait(folder)
                    self.submit(stage)
                for stage in self.pipeline:
                    self.wait(stage.folder)
            except STOPS:
                stopped = True  # cancelled: nothing is waited for, the process ends (ended_when_stopped)
                raise
            finally:  # work started early is done before the run is said finished or failed
                started = [future for _, _, future in self._early if _started(future)]
                for _, _, future in self._early:
                    future.cancel()  # one whose stages were never written (a stage failed): never started
                if not stopped:
                    wait(started)
        return self.outputs

    def when_written(self, stages: Iterable[str], make: Callable[[], Any]) -> Future[Any]:
        """``make()`` in a thread of its own as soon as ``stages`` are written, beside the stages still running:
        the run's transcript once the stages that send LLM requests are done (:meth:`make_early`), the part of the
        flow's ``changes`` diff read from the stages up to the examples once those are (:func:`changes_when_done`).
        Parquet, SQLite and Arrow release the GIL: on two cores this work takes the core the whole-table stages
        leave."""
        future: Future[Any] = Future()
        self._early.append((frozenset(stages), make, future))
        self._start_early()
        return future

    def make_early(self, value: str, after: Iterable[str]) -> None:
        """Make the run value ``value`` once the stages ``after`` are written (:meth:`when_written`), rather than
        when a stage asks for it; nothing when no stage takes it. Its function must be safe to call again: the
        stage's own call then waits for it and takes what it made."""
        if any(source == RunValue(value) for stage in self.pipeline for source in stage.inputs.values()):
            self.when_written(after, self.run_values[value])

    def _start_early(self) -> None:
        for stages, make, future in self._early:
            if not _started(future) and stages <= self.outputs.keys() and future.set_running_or_notify_cancel():
                threading.Thread(target=_settle, args=(future, make), name="pbbq-early", daemon=True).start()

    def submit(self, stage: Stage) -> None:
        values = [source for source in stage.inputs.values() if isinstance(source, RunValue)]
        for earlier in self.pipeline[: self.pipeline.index(stage)]:  # the stages its run values are made from
            if any(value.describes(earlier) for value in values):
                self.wait(earlier.folder)
        params = self.build.params(stage.name) if stage.params else None
        tables = {name: source for name, source in stage.inputs.items() if isinstance(source, Table | Tables)}
        kept = {
            name: self.inputs.kept[source.name]
            for name, source in stage.inputs.items()
            if isinstance(source, Input) and source.name in self.inputs.kept
        }
        others = dataclasses.replace(stage, inputs={n: s for n, s in stage.inputs.items() if n not in tables | kept})
        found = arguments(others, params, Sources(self.inputs.tables, self.outputs, self.client, self.run_values))
        recorded = self.recorded(stage, params, found)
        found |= {name: self.stored_input(source, recorded, name) for name, source in tables.items()} | kept
        task = stage_task(stage, params, self.store)
        if stage.cached:
            task = task.with_options(result_storage=self.cache)
        self.free_slot()
        self._pending[stage.folder] = (task, found, task.submit(**found), recorded, time.time())
        if self.progress is not None:
            self.progress.start(stage.folder, self._pending[stage.folder][2].wrapped_future.done)

    def wait(self, folder: str) -> StageOutput:
        """The stage's output, written to its folder once it is done: a stage's files from the artifact store by
        reference (:class:`StoredStage`), its tables loaded only when a stage that runs reads them."""
        if folder in self.outputs:
            return self.outputs[folder]
        stage = next(s for s in self.pipeline if s.folder == folder)
        for earlier in self.pipeline[: self.pipeline.index(stage)]:  # stages are written in pipeline order
            self.wait(earlier.folder)
        task, found, future, recorded, submitted = self._pending.pop(folder)
        result = future.result()
        taken = isinstance(result, StoredStage) and future.state.name == "Cached"  # computed by no process of this run
        damaged = result.damaged(self.store) if taken else []
        if damaged:  # a store file edited, truncated or replaced: removed, and the stage computed again
            self.run.warnings.append(damaged_warning(folder, damaged))
            get_run_logger().warning(self.run.warnings[-1])
        if stage.cached and not (isinstance(result, StoredStage) and result.complete(self.store)):
            # a cache entry of an older format, or whose files were removed from the store: computed again
            self.free_slot()
            future = task.with_options(refresh_cache=True).submit(**found)
            result = future.result()
        if self.progress is not None:
            self.progress.finish(folder)
        done = future.state.timestamp.timestamp() if future.state.timestamp else time.time()
        cached, declared = future.state.name == "Cached", stage.audit_view()
        extra = self.reports.get(folder, {})  # this run's own figures (the crawl's fetch), never cached
        if isinstance(result, StoredStage):
            requests = result.request_ids(self.store)
            if requests is not None:
                self.requests[folder] = requests
            report = {**result.report, **extra}
            key = json_text([result.token, extra])
            record = self.run.link_stage(
                folder,
                result.files,
                self.store,
                report,
                report_key=key,
                inputs=recorded,
                cached=cached,
                declared=declared,
            )
            output = StageOutput(result.tables(self.store), dict(stage.outputs), report)
        else:
            output = dataclasses.replace(result, report={**result.report, **extra})
            record = self.run.write_stage(folder, output, inputs=recorded, cached=cached, declared=declared)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.timings.append({"folder": folder, "seconds": done - submitted, "peak_rss": peak, "cached": record.cached})
        logger = get_run_logger()
        logger.info("%s (%.1f s)", record.summary(), done - submitted)
        for warning in output.report.get("warnings", []):
            logger.warning("%s: %s", folder, warning)
        self.run.warnings += [f"{folder} {warning}" for warning in output.report.get("manifest_warnings", [])]
        emptied = stage.kept_nothing(output.report)
        if emptied:
            self.run.warnings.append(emptied)
            logger.warning(emptied)
        self.outputs[folder] = output
        self.release_read()
        self._start_early()
        return output

    def _stack_held(self, source: Tables) -> bool:
        key = self._stacked.get(_stacked_tables(source))
        return key is not None and key in self.stacks.held()

    def _needs(self, stage: Stage, folder: str, table: str) -> bool:
        """Whether ``stage``, not written yet, may still read the frame ``table`` of ``folder``: as a table of its
        own, or stacked with others into a frame not made yet, or, not submitted yet, through a run value made from
        that stage."""
        for source in stage.inputs.values():
            match source:
                case Table(read, name) if (read, name) == (folder, table):
                    return True
                case Tables() if (folder, table) in _stacked_tables(source) and not self._stack_held(source):
                    return True
                case RunValue() if stage.folder not in self._pending and any(
                    source.describes(s) for s in self.pipeline if s.folder == folder
                ):
                    return True  # made when the stage is submitted
        return False

    def release_read(self) -> None:
        """Let go of every frame in memory that no stage still to be written reads (memory bounded past
        instantiation, issue 35): a written stage's tables once the stages that read them are written, or have the
        frame they read them stacked in; a stacked frame once the stages that read it are written. A table read
        again (by the flow's close) is loaded from the content store."""
        with self._release_lock:
            written = set(self.outputs)
            waiting = [stage for stage in self.pipeline if stage.folder not in written]
            for folder, output in list(self.outputs.items()):
                if isinstance(output.tables, LazyTables):
                    for table in output.tables.in_memory():
                        if not any(self._needs(stage, folder, table) for stage in waiting):
                            output.tables.release(table)
            for tables, key in list(self._stacked.items()):
                if not any(
                    _stacked_tables(s) == tables
                    for stage in waiting
                    for s in stage.inputs.values()
                    if isinstance(s, Tables)
                ):
                    self.stacks.release(key)

    def request_ids(self, stage: Stage) -> Iterable[str]:
        """The LLM requests a finished stage's output used: as its cache record kept them, else from its tables."""
        if stage.folder in self.requests:
            return self.requests[stage.folder]
        return () if stage.request_ids is None else stage.request_ids(self.outputs[stage.folder])

    def free_slot(self) -> None:
        """Wait until fewer than ``max_parallel`` submitted stages are still running. Each running stage holds its
        input frames and what it computes, so a stage waits for a slot before it is submitted: on a 2-core
        machine eight translate stages at once (GIL-bound) take as long as two at a time, with four times the
        memory."""
        running = [future for *_, future, _, _ in self._pending.values() if not future.wrapped_future.done()]
        while len(running) >= self.max_parallel:
            finished = next(as_completed([*running]))
            running = [future for future in running if future is not finished and not future.wrapped_future.done()]

    def stored_input(self, source: Table | Tables, recorded: Mapping[str, str], name: str) -> StoredInput:
        """A stage's argument of earlier stages' tables, by the hashes of their files in this run (the cache key
        takes these instead of serializing the tables again) and their tables, loaded only if the stage runs; tables
        read stacked are stacked once for every stage that reads them so."""
        if isinstance(source, Table):
            return StoredInput(((recorded[name], self.outputs[source.folder].tables, source.name),))
        parts = tuple((recorded[label], self.outputs[t.folder].tables, t.name) for label, t in source.tables.items())
        stacked = StoredInput(parts, stacked=True, stacks=self.stacks)
        self._stacked[_stacked_tables(source)] = tuple(stacked.cache_identity())
        return stacked

    def recorded(self, stage: Stage, params: Any, arguments: Mapping[str, Any]) -> dict[str, str]:
        """The hashes of the stage's inputs for the manifest, from its declaration: an input file's, another
        stage's table's, a loaded resource's, a run file's (the LLM client and computed values are in the
        parameters and the tables they come from)."""
        recorded: dict[str, str] = {}
        for name, source in stage.inputs.items():
            match source:
                case Input(input_name) if input_name in self.inputs.hashes:
                    recorded[name] = self.inputs.hashes[input_name]
                case Table(folder, table):
                    recorded[name] = self.run.artifact_hash(folder, table)
                case Tables(tables):
                    recorded |= {label: self.run.artifact_hash(t.folder, t.name) for label, t in tables.items()}
                case Resource(_, when) if when(params):
                    recorded[name] = resource_hash(arguments[name])
                case RunValue() if isinstance(arguments[name], Path) and arguments[name].is_file():
                    recorded[name] = self.run.sha256_of(arguments[name])
        return recorded


def _stacked_tables(source: Tables) -> tuple[tuple[str, str], ...]:
    """The tables ``source`` stacks, by folder and name, in its order."""
    return tuple((table.folder, table.name) for table in source.tables.values())


def parallel_stages() -> int:
    """How many stages run at once by default on the running flow's task runner: a Dask cluster's worker threads,
    otherwise the CPUs this process may run on (Prefect's thread pool has no bound of its own, and a stage's pandas
    work holds the GIL, so more stages than CPUs only hold more frames at once)."""
    context = FlowRunContext.get()
    client = getattr(context.task_runner, "client", None) if context else None  # a DaskTaskRunner's, started
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    return usable_cpus()


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity where the system has one (a container or ``taskset`` limits
    it; ``os.cpu_count`` counts the whole machine), else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
