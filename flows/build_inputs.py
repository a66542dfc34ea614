"""A build's inputs: every input file its stages declare, loaded and checked once (kept in the content store by
the key that determines its table), and the crawl's sources fetched."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..tasks.core.artifacts import ArtifactStore, json_text, sha256_bytes, sha256_file
from ..tasks.core.code_hash import code_hashes_kept, stage_code_hash
from ..tasks.core.inputs import instruction_like
from ..tasks.core.run_folder import check_run_id, refuse_kept_run
from ..tasks.core.stage import (
    Input,
    Pipeline,
)
from ..tasks.core.stored import KeptInput
from ..tasks.crawl.fetch import fetch_sources
from ..tasks.imports import preload
from ..tasks.text.languages import using
from .audit.runs import outputs_folder
from .config import BuildConfig


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


def check_build_inputs(build: BuildConfig, outputs: str | None, run_id: str | None = None) -> None:
    """What ``pbbq build`` does before it starts the flow: every input checked as the flow checks it
    (:func:`load_build_inputs`, the crawl's sources not fetched), so that a bad input is one line, with no Prefect
    flow run and no run folder. Each check is kept in the content store, where the flow finds it (an input is read
    once more only by a stage that runs), and the libraries of the stages a changed input will run start
    loading (:func:`preload_for_changed_inputs`). A ``run_id`` whose run is kept is refused first."""
    root = outputs_folder(outputs)
    if run_id is not None:
        refuse_kept_run(root / check_run_id(run_id))
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
