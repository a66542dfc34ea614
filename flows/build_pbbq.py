"""The build-pbbq flow: the PBBQ paper's Figure 1 as a Prefect DAG (docs/architecture.md §1).

The stages are the pipeline the configuration chooses (``flows/pipeline.py``); :class:`PipelineRunner` runs it:
each stage a cached Prefect task (inputs + code) submitted as soon as the stages it reads have finished, so
independent stages (names and translate) run side by side on Prefect's thread runner, at most as many at once as
the task runner has workers (:func:`parallel_stages`). Each stage writes
``outputs/<run_id>/NN_<stage>/`` and adds itself to the run's manifest, in pipeline order whatever order they
finish in. This module only wires.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import json
import logging
import os
import resource
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, wait
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.client.orchestration import get_client
from prefect.context import FlowRunContext
from prefect.exceptions import ObjectNotFound, TerminationSignal
from prefect.futures import PrefectWrappedFuture, as_completed
from prefect.runtime import flow_run
from prefect.states import Crashed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from ..tasks.core.artifacts import ArtifactStore, StageOutput, atomic_write_bytes, json_text, sha256_bytes, sha256_file
from ..tasks.core.caching import (
    KeptInput,
    StoredInput,
    StoredStage,
    code_hashes_kept,
    damaged_warning,
    stage_code_hash,
    stage_task,
)
from ..tasks.core.collector import build_collector
from ..tasks.core.inputs import instruction_like
from ..tasks.core.progress import StageProgress
from ..tasks.core.run_folder import RunFolder, display_path
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
from ..tasks.crawl.fetch import fetch_sources
from ..tasks.imports import preload
from ..tasks.llm import LLMClient, open_llm, usage_summary
from ..tasks.publish import create_release_artifact
from ..tasks.text.languages import serve_in_this_process, using
from .audit.diff import STAGES_COMPARED, changes_since_previous, stage_changes
from .audit.runs import mark_killed_runs, outputs_folder, previous_completed
from .config import BuildConfig, check_store_path, load_config
from .pipeline import extra_funnel, funnel_labels, gate_section

STAND_IN_WARNING = (
    'STAND-IN answers: every LLM answer of this build is placeholder text (--stand-in, [llm] mode = "stand-in", '
    "or a replay of such a build's transcript), "
    "not a model's; its dataset card says so and publish does not upload it"
)
TRANSCRIPT_NOTE = (
    "The LLM answers this PBBQ build used: import it (llm.transcript) and build in replay mode to rebuild it "
    "byte for byte with no API key."
)


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
        self._start_early()
        return output

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
        takes these instead of serializing the tables again) and their tables, loaded only if the stage runs."""
        if isinstance(source, Table):
            return StoredInput(((recorded[name], self.outputs[source.folder].tables, source.name),))
        parts = tuple((recorded[label], self.outputs[t.folder].tables, t.name) for label, t in source.tables.items())
        return StoredInput(parts, stacked=True)

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


def last_computed(run: Path) -> dict[str, float]:
    """Seconds each stage took when the last completed run before ``run`` computed it (its ``timings.json``;
    the stages it took from the cache left out): what the running stages' line compares with."""
    previous = previous_completed(run)
    try:
        stages = json.loads((previous / "timings.json").read_text(encoding="utf-8"))["stages"] if previous else []
        return {str(s["folder"]): float(s["seconds"]) for s in stages if not s["cached"]}
    except (OSError, ValueError, KeyError, TypeError):  # a run from before timings.json, or a damaged one
        return {}


def mark_crashed(killed: list[dict[str, Any]]) -> None:
    """Say that the builds of killed runs crashed: their run folders read ``incomplete`` now, and their Prefect
    flow runs, left Running by a process that could not report its end, become Crashed."""
    logger = get_run_logger()
    with get_client(sync_client=True) as client:
        for manifest in killed:
            logger.warning("run %s: its build was killed; marked incomplete", manifest["run_id"])
            flow_run_id = manifest.get("process", {}).get("flow_run_id")
            if not flow_run_id:
                continue
            try:
                state = client.read_flow_run(flow_run_id).state
            except ObjectNotFound:  # recorded on another Prefect server
                continue
            if state is not None and state.is_running():
                message = f"the process of run {manifest['run_id']} ended without reporting (killed)"
                client.set_flow_run_state(flow_run_id, Crashed(message=message), force=True)


@dataclasses.dataclass(frozen=True)
class BuildInputs:
    """The build's inputs (:class:`Input` names them), the hash each is recorded by, and what the manifest lists of
    them: name → (file, rows), with the loaders' warnings and the crawl's fetch report; ``kept``: the inputs a
    loader reads, by the key that determines their tables (a stage taken from the cache never reads them)."""

    tables: Mapping[str, Any]
    hashes: dict[str, str]
    files: dict[str, tuple[Path, int | None]]
    warnings: list[str]
    fetch_report: dict[str, Any]
    kept: Mapping[str, KeptInput] = dataclasses.field(default_factory=dict)


class InputTables(Mapping[str, Any]):
    """The build inputs' tables by name, a kept input's loaded when first read (:meth:`KeptInput.load`)."""

    def __init__(self, kept: Mapping[str, KeptInput], others: Mapping[str, Any]) -> None:
        self._kept, self._others = kept, others

    def __getitem__(self, name: str) -> Any:
        return self._kept[name].load() if name in self._kept else self._others[name]

    def __iter__(self) -> Iterator[str]:
        return iter([*self._kept, *self._others])

    def __len__(self) -> int:
        return len(self._kept) + len(self._others)


STAGE_FILES = "stage-files"
"""The folder of ``<outputs>/.cache/`` that is the build's content store (:class:`ArtifactStore`): the cached
stages' files and frames, and the instruction-like scan's verdicts on the inputs."""
CRAWLED = "posts"
"""The input the build makes itself when its pipeline declares it: the posts the crawl's sources give (fetched)."""


def load_build_inputs(build: BuildConfig, root: Path, log: Callable[[str], None], *, fetch: bool = True) -> BuildInputs:
    """Every input the build's stages declare, checked (its loader, ``Input.load``, and the instruction-like scan),
    then the crawl's sources fetched when a stage reads its posts (the network: never cached; ``log`` says what it
    fetches). An input whose key (:func:`_input_keys`) an earlier build checked is not read again: its rows and
    warnings are those kept in the content store under that key, its table loaded only when a stage that runs
    reads it (:class:`KeptInput`). A bad input stops the build before anything is fetched or written. ``fetch``
    False: the inputs checked, nothing fetched (:func:`check_build_inputs`)."""
    paths = build.input_paths()
    declared = build.pipeline.inputs()
    files: dict[str, tuple[Path, int | None]] = {name: (path, None) for name, path in paths.items()}
    if build.transcript is not None:
        files["transcript"] = (build.transcript, None)
    hashes = {name: sha256_file(path) for name, (path, _) in files.items()}
    store = ArtifactStore(root / ".cache" / STAGE_FILES)
    keys = _input_keys(declared, hashes)
    kept: dict[str, KeptInput] = {}
    checks: dict[str, str | None] = {}
    for source in declared:  # an input's needs come before it
        if source.load is None:
            continue
        needs = tuple(kept[need.name] for need in source.needs)
        kept[source.name] = KeptInput(keys[source.name], source.load, paths.get(source.name), needs)
        checks[source.name] = store.recall(_checked_key(kept[source.name]))
        if checks[source.name] is None:
            kept[source.name].load()  # not checked before: loaded and checked now
    others: dict[str, Any] = {}
    fetch_report: dict[str, Any] = {}
    if fetch and any(source.name == CRAWLED for source in declared):
        crawled = fetch_sources(build.crawl, root / ".crawl", log=log)
        files |= {name: (path, None) for name, path in crawled.files.items()}
        hashes |= {name: sha256_file(path) for name, path in crawled.files.items()} | {CRAWLED: crawled.sha256}
        others[CRAWLED], fetch_report = crawled.posts, crawled.report
    warnings: list[str] = []
    for name, handle in kept.items():
        checked = json.loads(store.file(checks[name] or _keep_check(handle, name, paths, store)).read_bytes())
        warnings += checked["warnings"]
        if name in paths:
            files[name] = (paths[name], checked["rows"])
    warnings += instruction_like(others, paths, store, _input_keys(declared, hashes))
    return BuildInputs(InputTables(kept, others), hashes, files, warnings, fetch_report, kept)


def check_build_inputs(build: BuildConfig, outputs: str | None) -> None:
    """What ``pbbq build`` does before it starts the flow: every input checked as the flow checks it
    (:func:`load_build_inputs`, the crawl's sources not fetched), so that a bad input is one line, with no Prefect
    flow run and no run folder. Each check is kept in the content store, where the flow finds it (an input is read
    once more only by a stage that runs), and the libraries of the stages a changed input will run start
    loading (:func:`preload_for_changed_inputs`)."""
    root = outputs_folder(outputs)
    with using(build.registry), code_hashes_kept(ArtifactStore(root / ".cache" / STAGE_FILES)):
        inputs = load_build_inputs(build, root, log=logging.getLogger(__name__).info, fetch=False)
    preload_for_changed_inputs(inputs, build.pipeline)


def _checked_key(handle: KeptInput) -> str:
    """What a build's check of an input is kept under in the content store: the input's key."""
    return json_text(["input checked", handle.key])


def _keep_check(handle: KeptInput, name: str, paths: Mapping[str, Path], store: ArtifactStore) -> str:
    """Keep what a build needs of an input it loaded and checked, by the input's key (:func:`_checked_key`): its
    rows and the instruction-like scan's warnings. Returns the kept file's sha256."""
    table = handle.load()
    warnings = instruction_like({name: table}, dict(paths), store, {name: handle.key})
    found = {"rows": None if table is None else len(table), "warnings": warnings}
    return store.remember(_checked_key(handle), store.put(json_text(found).encode("utf-8")))


def _input_keys(declared: Sequence[Input], hashes: Mapping[str, str]) -> dict[str, str]:
    """Per input: what determines its table (its file's hash, None for an optional input left out, or the fetched
    posts' own; the keys of the inputs its loader reads; the loader's code) and the scan's code. It keys the
    stages' cache on the input (:class:`KeptInput`) and what a build keeps of its check."""
    scan = stage_code_hash(instruction_like)
    keys: dict[str, str] = {}
    for source in declared:  # an input's needs come before it
        if source.name in hashes or source.load is not None:
            loader = None if source.load is None else stage_code_hash(source.load)
            payload = [scan, loader, hashes.get(source.name), [keys.get(need.name) for need in source.needs]]
            keys[source.name] = sha256_bytes(json_text(payload).encode("utf-8"))
    return keys


def preload_for_changed_inputs(inputs: BuildInputs, pipeline: Pipeline) -> None:
    """Start loading the heavy libraries (``Stage.imports``) of the stages a changed input will make run: those
    reading an input no earlier build checked (loaded now, :func:`load_build_inputs`) and every stage after them
    that reads theirs (:func:`pbbq.tasks.imports.preload`). A rebuild with nothing changed loads none."""
    changed = {name for name, handle in inputs.kept.items() if handle.loaded()}
    running: set[str] = set()
    for stage in pipeline:
        read = {source.name for source in stage.inputs.values() if isinstance(source, Input)}
        if read & changed or stage.upstream & running:
            running.add(stage.folder)
    modules = [module for stage in pipeline if stage.folder in running for module in stage.imports]
    if modules:
        preload(modules)


def release_values(
    run: RunFolder, build: BuildConfig, client: LLMClient, runner: Callable[[], PipelineRunner]
) -> dict[str, Callable[[], Any]]:
    """What the publish stage gets from the run: its folder, the run's transcript (and its hash, as the run recorded
    it) and the release's copy of the manifest (written when publish asks for them, after every other stage); and
    the funnel's extra steps and labels, from the stages' declarations; the sheet's example cap ([build])."""
    folder = run.path / build.pipeline.folder("publish")
    written = threading.Lock()

    def transcript() -> Path:
        path = run.path / "transcript.jsonl"
        with written:  # made early in a thread of its own (PipelineRunner.make_early) or when publish asks
            if any(f.path == path.name for f in run.files):
                return path
            outputs = runner().outputs
            used = {
                request
                for stage in runner().pipeline
                if stage.request_ids is not None and stage.folder in outputs
                for request in runner().request_ids(stage)
            }
            digest = client.export(used, path, note=TRANSCRIPT_NOTE, kept=runner().store)
            run.record_file(path, rows=len(used), sha256=digest)
        return path

    def manifest() -> Path:
        transcript()
        path = run.write_manifest("built", target=folder / "manifest.json")
        run.record_file(path)
        return path

    return {
        "out_dir": lambda: folder,
        "transcript_path": transcript,
        "transcript_sha256": lambda: run.sha256_of(transcript()),
        "manifest_path": manifest,
        "build_id": lambda: run.run_id,
        "build_config": lambda: display_path(build.path),
        "funnel_labels": lambda: funnel_labels(runner().pipeline),
        "gate": lambda: build.params(gate_section(build.pipeline)),
        "extra_funnel": lambda: extra_funnel(runner().outputs, runner().pipeline),
        "example_cap": build.example_cap,
    }


def release_hashes(published: StageOutput) -> dict[str, str]:
    """The hashes publish took of the release's files, by path in the release folder: the data files' from the
    content store's names, the manifest's and the card's as written, the transcript's as the run recorded it."""
    files = [*published["release_files"].to_dict(orient="records"), *published.report["build_named_files"]]
    return {str(file["path"]): str(file["sha256"]) for file in files}


def _table_artifacts(runner: PipelineRunner) -> None:
    for stage in runner.pipeline:
        for key, (table, columns, description) in stage.artifacts.items():
            frame = runner.outputs[stage.folder][table]
            frame = frame[list(columns)] if columns else frame
            create_table_artifact(key=key, table=frame.astype(str).to_dict(orient="records"), description=description)


def changes_when_done(runner: PipelineRunner, run: Path) -> Callable[[], str]:
    """What makes the flow's ``changes`` artifact (``pbbq diff`` against the previous completed run) once the
    build is done: the parts read from the stages up to the configs' examples (:func:`stage_changes`, most of its
    work) are compared as soon as those stages are written (:meth:`PipelineRunner.when_written`), beside
    diversity and the statistics; the tables of those two at the end."""
    previous = previous_completed(run)
    views = (stage.audit_view() for stage in runner.pipeline)
    stacked = next((view["stacks"]["examples"] for view in views if "examples" in view.get("stacks", {})), None)
    if previous is None or stacked is None:
        return lambda: changes_since_previous(run)
    tables = {label: path for label, path in stacked}
    read = {*STAGES_COMPARED, *(path.split("/")[0] for path in tables.values())}
    folders = [stage.folder for stage in runner.pipeline]
    last = max(i for i, stage in enumerate(runner.pipeline) if stage.name in read or stage.folder in read)
    compared = runner.when_written(folders[: last + 1], partial(stage_changes, previous, run, examples=tables))
    return lambda: changes_since_previous(run, stages=(previous, compared.result()))


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


@flow(name="build-pbbq", task_runner=StageThreads())  # type: ignore[arg-type]  # prefect 3.8 types a runner invariant in its future
def build_pbbq(
    config: str | None = None,
    run_id: str | None = None,
    outputs: str | None = None,
    repo_id: str | None = None,
    dry_run: bool | None = None,
    force_synthetic: bool | None = None,
    stand_in: bool | None = None,
    pipeline: Any = None,
) -> str:
    """Build PBBQ from a configuration (default: the bundled sample) and return the run folder. ``repo_id``,
    ``dry_run`` and ``force_synthetic`` override the configuration's [publish] section; ``stand_in`` answers every
    LLM request with labelled placeholders (``[llm] mode = "stand-in"``, :mod:`pbbq.tasks.llm.stand_in`);
    ``pipeline``: a :class:`~pbbq.tasks.core.stage.Pipeline` to run instead of the one the configuration chooses
    (typed ``Any`` for Prefect: a deployment validates its flow's parameters from the entrypoint's source, where
    an imported class is not defined)."""
    build = load_config(Path(config) if config else None, pipeline).with_publish(repo_id, dry_run, force_synthetic)
    if stand_in:
        build = build.with_stand_in()
    share_languages(build.languages)
    root = outputs_folder(outputs)
    mark_crashed(mark_killed_runs(root))
    store = ArtifactStore(root / ".cache" / STAGE_FILES)
    for leftover in store.remove_leftovers():  # a killed build's half-written files
        get_run_logger().info("removed %s, left by a killed build", leftover)
    started = time.perf_counter()
    with using(build.registry), ended_when_stopped(), code_hashes_kept(store):
        inputs = load_build_inputs(build, root, log=get_run_logger().info)  # a bad input: no run folder is made
        preload_for_changed_inputs(inputs, build.pipeline)
        run = RunFolder.create(root, run_id, build.parameters(), process={"flow_run_id": str(flow_run.id)})
        llm = build.llm
        if not llm.store_path.is_absolute():  # not configured: one response store per outputs folder
            llm = dataclasses.replace(llm, store_path=root / ".cache" / "llm" / "responses.sqlite")
        get_run_logger().info("run %s → %s", run.run_id, run.path)
        with run.recording(STOPS), StageProgress(last_computed(run.path)) as progress:
            check_store_path(llm.store_path, build.path)  # this run's own folder is a run folder now
            client = open_llm(llm, build.transcript)  # a damaged transcript stops the build here, before stage 01
            if client.stand_in:
                run.warnings.append(STAND_IN_WARNING)
                get_run_logger().warning(STAND_IN_WARNING)
            run.warnings += inputs.warnings
            for warning in inputs.warnings:
                get_run_logger().warning("input: %s", warning)
            for name, (path, rows) in inputs.files.items():
                run.record_input(name, path, rows, sha256=inputs.hashes[name])
            runner = PipelineRunner(
                run,
                root / ".cache" / "prefect-results",
                build,
                client,
                inputs,
                release_values(run, build, client, lambda: runner),
                build.pipeline,
                progress=progress,
                max_parallel=build.running.max_parallel_stages,
            )
            if CRAWLED in inputs.tables:
                runner.reports[build.pipeline.folder("crawl")] = inputs.fetch_report
            runner.make_early("transcript_path", after=(s.folder for s in build.pipeline if s.request_ids is not None))
            changes = changes_when_done(runner, run.path)
            runner.run_all()
            published = runner.outputs[build.pipeline.folder("publish")]
            release = published.report
            run.record_tree(Path(release["folder"]), known=release_hashes(published))
            create_release_artifact(release)
            logger = get_run_logger()
            for line in usage_summary({r.folder: r.report for r in run.stages}):
                logger.info("LLM %s", line)
            logger.info("release: %s", release["link"])
            _table_artifacts(runner)
            run.write_manifest("running")  # the diff reads this run's inputs, code and tables from its manifest
            create_markdown_artifact(key="changes", markdown=changes(), description="pbbq diff against the last run")
            timings = {"flow_seconds": time.perf_counter() - started, "stages": runner.timings}
            atomic_write_bytes(run.path / "timings.json", json_text(timings).encode("utf-8"))
            run.record_file(run.path / "timings.json")  # listed, like every file of the run; its times differ per run
    return str(run.path)
