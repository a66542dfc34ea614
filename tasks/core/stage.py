"""The stage contract (docs/architecture.md §1, §9): what a stage declares, so that the flow, the manifest, the
configuration, the audit and the dataset card read it from one place.

A stage is a plain function over tables that returns a :class:`~pbbq.tasks.core.artifacts.StageOutput`. Its
:class:`Stage` declaration says where its folder is, which configuration section holds its parameters (a
dataclass), where each of its arguments comes from (an input file, another stage's table, a prompt file, the LLM
client), which tables it writes with which schema, which of them hold its drops (rows with a ``reason``), the
words an audit uses for its rows and the funnel steps it adds. Each stage module ends with its declaration
(``STAGE``); a :class:`Pipeline` is the stages in order, a value that ``flows/pipeline.py`` builds (``PIPELINE``) and
passes to the runner, the configuration and the tests. Adding a stage is one module and one entry there; adding an
input file is one :class:`Input`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .artifacts import StageOutput, count_reasons
from .schemas import NAMES_SUFFIX


@dataclass(frozen=True)
class Input:
    """A build input file, as loaded: where the configuration names it, how it is read and checked, and the inputs
    its check refers to (a template's stereotype must be in the questionnaire). The configuration's ``[inputs]``
    keys, the manifest's input hashes and the loading follow from the inputs the pipeline's stages declare
    (:meth:`Pipeline.inputs`, :func:`load_inputs`): a new input file is one declaration."""

    name: str
    """Its name in the manifest and in :class:`Sources`."""
    load: Callable[..., Any] | None = None
    """``load(path, *loaded needs)``: the checked table (an :class:`~pbbq.tasks.core.inputs.InputError` naming
    the file and row otherwise); None for an input the flow makes itself (the crawl's fetched posts, the release an
    evaluation scores)."""
    needs: tuple[Input, ...] = ()
    """The inputs ``load`` checks this one against, loaded first."""
    optional: bool = False
    """Whether the configuration may leave it out (``load`` then gets None for its path)."""
    section: str = "inputs"
    """The configuration section naming its file: ``[inputs]``, or a stage's own (the crawl's lexicon)."""
    key: str = ""
    """Its key in ``section`` (default: its name)."""

    @property
    def config_key(self) -> str:
        return self.key or self.name


@dataclass(frozen=True)
class Table:
    """A table another stage of this run wrote: ``Table("02_survey", "stereotypes")``."""

    folder: str
    name: str


@dataclass(frozen=True)
class Tables:
    """Tables of several stages stacked into one (the examples of every config), each recorded by its label."""

    tables: Mapping[str, Table]


@dataclass(frozen=True)
class Report:
    """A value computed from another stage's report (``compute(report)``)."""

    folder: str
    compute: Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Separable:
    """How a stage's work splits by a key column (a template's rows are made from that template alone), so that a
    build in which one template changed computes that template's rows only (docs/architecture.md §9). The stage
    is ``whole(part(**arguments, **spread(**arguments, **local(**arguments))), **arguments)`` (``arguments``: the
    split tables and ``given``, the stage's other arguments as one object, when it declares :attr:`given`): ``part``
    does the work per key, ``whole`` what needs every row (a check across templates, the report). The runner keeps each
    key's part in the content store, by the hash of that key's rows of the split tables (and of the spread ones),
    the other arguments and the code, and calls ``part`` once, on the rows of the keys it has not kept (``local``
    likewise; :func:`pbbq.tasks.core.separated.separated`)."""

    key: str
    """The column the split tables and every table of a part hold: ``template_id``."""
    split: tuple[str, ...]
    """The arguments (tables of earlier stages) split by ``key``; the others go whole to every part."""
    part: Callable[..., Mapping[str, pd.DataFrame]]
    """The tables of the keys its split arguments hold, each row with its key."""
    whole: Callable[..., StageOutput]
    """``whole(parts, **arguments)``: the stage's output from the parts of every key, each table concatenated in
    key order; the same as from ``part`` of every key at once (the tests hold each stage to it)."""
    spread: Callable[..., Mapping[str, pd.DataFrame]] | None = None
    """``spread(**arguments)``: tables made from every key's rows, a row per key that needs it, given to ``part``
    as arguments of their names and split by ``key`` with the split tables (the translate stage's segments: a
    question several templates ask is a row of each, with the entities of every one of them), so that a part is
    kept by what it reads of the rows across keys too; None: ``part`` reads its keys' rows alone."""
    local: Callable[..., Mapping[str, pd.DataFrame]] | None = None
    """``local(**arguments)``: what ``spread`` reads of each key, made from that key's rows alone (each row with its
    key), given to ``spread`` as arguments of their names; kept per key as the parts are, so that a build in which
    one key changed makes its local tables only and ``spread`` combines them (the names stage: the groups each
    template names, whose union per category its spread is). None: ``spread`` reads the split tables whole."""
    given: Callable[..., Any] | None = None
    """The stage's parameter object: a frozen dataclass whose fields are the stage's arguments other than the split
    tables (its parameters, the LLM client, the tables every key reads whole), made once per run from them; every
    hook takes it as its one argument ``given`` beside the tables it is handed, so the stage's long signature is
    written once, on the stage function. None: every hook takes every argument by name."""

    def hook_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """What every hook takes besides its tables, from the stage's ``arguments``: ``given``, or them all."""
        if self.given is None:
            return dict(arguments)
        return {"given": self.given(**{name: value for name, value in arguments.items() if name not in self.split})}


def _always(params: Any) -> bool:
    return True


@dataclass(frozen=True)
class Resource:
    """A file the program ships (a prompt bundle), loaded by ``load``; ``default`` when ``when(params)`` is
    false, so that a feature left off keeps it out of the stage's cache key."""

    load: Callable[[], Any]
    when: Callable[[Any], bool] = _always
    default: Any = ""


@dataclass(frozen=True)
class Declared:
    """A value of the pipeline's own declarations (its configs', :class:`ReleaseConfig`), given as it is: code, which
    the build's code hash covers, not an input the manifest records."""

    value: Any


@dataclass(frozen=True)
class Client:
    """The build's LLM client, opened once by the runner; None when ``when(params)`` is false."""

    when: Callable[[Any], bool] = _always


def every_stage(stage: Stage) -> bool:
    """Every earlier stage: what a value of the run so far (its manifest, its transcript) is made from."""
    return True


@dataclass(frozen=True)
class RunValue:
    """A value of this run the runner makes (the publish stage's folder, the run's manifest): ``name`` is one
    of the runner's ``run_values``."""

    name: str
    describes: Callable[[Stage], bool] = every_stage
    """The earlier stages it is made from: the stage that takes it is submitted once they are written (the
    statistics' extra funnel steps, from the stages that count their own, need not wait for diversity)."""


@dataclass(frozen=True)
class ReleaseConfig:
    """A config the pipeline publishes, declared once (docs/architecture.md, "Adding a release config"): where its
    examples are, their language, what the dataset card says it holds, and the config its examples are made from.
    Its place among :attr:`Pipeline.configs` is its order in the run (the tables stacked, the instance-level
    diversity, the audit's charts and their colours); its name gives its lm-eval tasks (``pbbq_<name>``)."""

    examples: Table
    language: str
    """The language code of its examples (``fa``)."""
    description: str
    """What the dataset card says it holds."""
    made_from: str | None = None
    """The config whose examples its own are made from (``fa`` for ``fa-names`` and ``en``); None: the source."""
    names: bool = False
    """Whether its examples are name-proxy variants of :attr:`made_from`'s (the evaluation's ε_c pairs the two)."""


@dataclass(frozen=True)
class Configs:
    """The examples of every config the pipeline publishes (:attr:`Pipeline.configs`), stacked into one table; or,
    with ``names``, the configs' names; with ``declared``, their declarations. The pipeline turns it into
    :class:`Tables` (or a :class:`Resource`), so that a stage reading every config does not name the stages that
    write them."""

    names: bool = False
    declared: bool = False


SEED = (0, 2**32 - 1)
"""The range of a seed parameter (numpy's seeds are 32-bit)."""


def listed(column: pd.Series) -> Iterable[str]:
    """The values of a column of lists, flattened (the LLM requests of a stage's rows)."""
    return column.explode().dropna()


def ordered(frame: pd.DataFrame, keys: Sequence[tuple[Any, ...]], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """``frame``'s rows in the order of their ``keys`` (one per row): how a stage split by key (:class:`Separable`)
    puts its parts' rows in the order the stage gives on whole tables. ``columns``: those only, each taken on its
    own, so that the frame returned holds nothing of the columns left out (a frame's columns of one dtype share
    one array, and a frame of some of them can be a view of it)."""
    rows = sorted(range(len(keys)), key=keys.__getitem__)
    if columns is None:
        return frame.take(rows).reset_index(drop=True)
    return pd.DataFrame({column: frame[column].array.take(rows) for column in columns})


def rows_of(frame: pd.DataFrame, positions: Sequence[int] | np.ndarray) -> pd.DataFrame:
    """The rows of ``frame`` at ``positions`` (ascending), with their index: a slice, which copies nothing, when they
    are one block (a config's rows of the stacked examples are), taken otherwise."""
    if len(positions) and positions[-1] - positions[0] + 1 == len(positions):
        return frame.iloc[positions[0] : positions[-1] + 1]
    return frame.take(positions)


Source = Input | Table | Tables | Report | Resource | Declared | Client | RunValue | Configs


def resource_hash(value: Any) -> str:
    """How a loaded resource is recorded in the manifest: its own ``sha256`` or the hash of its text."""
    digest = getattr(value, "sha256", None)
    return str(digest) if digest is not None else hashlib.sha256(str(value).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline, declared."""

    folder: str
    """Its folder in the run, numbered by the step it does (docs/architecture.md §9): ``02_survey``."""
    name: str
    """Its name in reports, and the configuration section of its parameters: ``survey_filter``."""
    run: Callable[..., StageOutput]
    """The plain function; called with keyword arguments, one per entry of ``inputs`` (and ``params``)."""
    inputs: Mapping[str, Source]
    outputs: Mapping[str, pa.Schema]
    """Every table it writes, with its schema (checked on write)."""
    params: type | None = None
    """The dataclass of its parameters, read from configuration section ``[name]``; passed as ``params``."""
    ranges: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """The allowed range (inclusive; None: unbounded) of its numeric parameters, checked when the
    configuration is read."""
    drops: tuple[str, ...] = ()
    """The tables among ``outputs`` that hold its dropped rows, each with a ``reason`` column."""
    words: tuple[str, str, str] = ("rows", "rows", "dropped")
    """What an audit calls its rows in, its rows out and its drops."""
    funnel: Mapping[str, str] = field(default_factory=dict)
    """Its steps of the funnel (``09_statistics/funnel``) and their label in the dataset card: step → label."""
    counts: Callable[[StageOutput], Mapping[str, int]] | None = None
    """How it counts its funnel steps from its output; the steps it leaves out (all, without it) the statistics
    stage counts (PBBQ's own steps, :func:`pbbq.tasks.statistics.funnel`). A stage that counts its own comes
    before statistics."""
    cached: bool = True
    """False for a stage with side effects (publish): always run, never taken from the cache."""
    request_ids: Callable[[StageOutput], Iterable[str]] | None = None
    """The LLM requests its output used, for the run's transcript."""
    artifacts: Mapping[str, tuple[str, tuple[str, ...] | None, str]] = field(default_factory=dict)
    """Prefect table artifacts: key → (table, its columns or None for all, description)."""
    per: Separable | None = None
    """How its work splits by a key (None: it runs on whole tables)."""
    imports: tuple[str, ...] = ()
    """The heavy libraries it imports when it runs (statsmodels, hazm): a build whose inputs changed loads them
    ahead, beside the stages before it (:func:`pbbq.tasks.imports.preload`)."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.drops) - set(self.outputs))
        if unknown:
            raise ValueError(f"stage {self.folder}: drop table(s) {', '.join(unknown)} are not among its outputs")
        if "params" in self.inputs:
            raise ValueError(f"stage {self.folder}: 'params' is the parameters' argument, not an input")

    @property
    def upstream(self) -> set[str]:
        """The folders of the stages whose tables or reports it reads."""
        found: set[str] = set()
        for source in self.inputs.values():
            if isinstance(source, Table | Report):
                found.add(source.folder)
            elif isinstance(source, Tables):
                found |= {table.folder for table in source.tables.values()}
        return found

    def audit_view(self) -> dict[str, Any]:
        """What the run's manifest says of the stage, so that an audit reads it without importing the stages:
        its name, its drop tables, the words for its counts and the tables it stacks (the configs' examples), as
        ``[label, path]`` pairs in their order."""
        stacked = {
            name: [[label, f"{t.folder}/{t.name}"] for label, t in source.tables.items()]
            for name, source in self.inputs.items()
            if isinstance(source, Tables)
        }
        return {"name": self.name, "drops": list(self.drops), "words": list(self.words)} | (
            {"stacks": stacked} if stacked else {}
        )

    def kept_nothing(self, report: Mapping[str, Any]) -> str | None:
        """The run's warning when the stage had rows in and kept none (a gate that stopped everything: every stage
        reading it then gets empty tables), naming its drops per reason; None otherwise."""
        counts = report.get("counts", {})
        if not counts.get("in") or counts.get("out") != 0:
            return None
        reasons = report.get("dropped", {}).get("by_reason", {})
        why = f" ({self.words[2]}: {', '.join(f'{r} {n}' for r, n in reasons.items())})" if reasons else ""
        return f"{self.folder} kept nothing: {counts['in']} {self.words[0]}, 0 {self.words[1]}{why}"

    def funnel_counts(self, output: StageOutput) -> dict[str, int]:
        """Its funnel steps with their counts in this run."""
        counts = self.counts(output) if self.counts else {}
        return {step: int(counts[step]) for step in self.funnel if step in counts}


def _resolve(source: Source, configs: Mapping[str, ReleaseConfig]) -> Source:
    if not isinstance(source, Configs):
        return source
    if source.declared:
        return Declared(dict(configs))
    return Resource(partial(tuple, configs)) if source.names else Tables(examples_of(configs))


def examples_of(configs: Mapping[str, ReleaseConfig]) -> dict[str, Table]:
    """Each config's table of examples, in the configs' order."""
    return {name: config.examples for name, config in configs.items()}


@dataclass(frozen=True)
class Pipeline:
    """The stages of a build in order, each reading only stages before it, and the tables that hold the examples
    of each config it publishes (what a :class:`Configs` input reads): an immutable value, passed to whatever runs,
    configures or audits it."""

    stages: tuple[Stage, ...]
    configs: Mapping[str, ReleaseConfig] = field(default_factory=dict)
    """Every config it publishes, declared (:class:`ReleaseConfig`), in the order the configs are built."""

    def __post_init__(self) -> None:
        resolved = tuple(
            dataclasses.replace(stage, inputs={n: _resolve(s, self.configs) for n, s in stage.inputs.items()})
            for stage in self.stages
        )
        object.__setattr__(self, "stages", resolved)
        for name, config in self.configs.items():
            if config.made_from is not None and config.made_from not in self.configs:
                raise ValueError(f"pipeline: config {name} is made from {config.made_from}, not a config it publishes")
            if config.names and name != f"{config.made_from}{NAMES_SUFFIX}":
                raise ValueError(f"pipeline: name-proxy config {name} must be called {config.made_from}{NAMES_SUFFIX}")
        seen: set[str] = set()
        for stage in resolved:
            if stage.folder in seen:
                raise ValueError(f"pipeline: stage folder {stage.folder} appears twice")
            if not stage.upstream <= seen:
                later = ", ".join(sorted(stage.upstream - seen))
                raise ValueError(f"pipeline: stage {stage.folder} reads {later}, not a stage before it")
            unsplit = (
                [name for name in stage.per.split if not isinstance(stage.inputs.get(name), Table)] if stage.per else []
            )
            if unsplit:
                raise ValueError(f"pipeline: stage {stage.folder} splits {', '.join(unsplit)}, not a table it reads")
            seen.add(stage.folder)

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    def __getitem__(self, index: slice) -> tuple[Stage, ...]:
        return self.stages[index]

    def index(self, stage: Stage) -> int:
        return self.stages.index(stage)

    def inserted(self, stage: Stage, before: str) -> Pipeline:
        """The pipeline with ``stage`` added before the stage in folder ``before``."""
        at = next(i for i, s in enumerate(self.stages) if s.folder == before)
        return dataclasses.replace(self, stages=(*self.stages[:at], stage, *self.stages[at:]))

    def folder(self, name: str) -> str:
        """The folder of the stage called ``name`` (``Stage.name``)."""
        found = next((stage.folder for stage in self.stages if stage.name == name), None)
        if found is None:
            raise KeyError(f"pipeline has no stage {name!r}")
        return found

    def inputs(self) -> tuple[Input, ...]:
        """Every input file its stages declare, each after those it is checked against (``Input.needs``)."""
        found: dict[str, Input] = {}

        def add(source: Input) -> None:
            for need in source.needs:
                add(need)
            found.setdefault(source.name, source)

        for stage in self.stages:
            for source in stage.inputs.values():
                if isinstance(source, Input):
                    add(source)
        return tuple(found.values())


@dataclass(frozen=True)
class Parameters:
    """Stage parameters by configuration section, for a pipeline run without a build configuration (the
    evaluation's): what the runner asks of a configuration."""

    sections: Mapping[str, Any]

    def params(self, section: str) -> Any:
        return self.sections[section]


def load_inputs(inputs: Iterable[Input], paths: Mapping[str, Path]) -> dict[str, Any]:
    """Each input loaded from its file in ``paths`` (by name; an optional one left out gets None), after the
    inputs it is checked against; those the build makes itself (no ``load``) are left to it."""
    loaded: dict[str, Any] = {}
    for source in inputs:
        if source.load is not None:
            needed = [loaded[need.name] for need in source.needs]
            loaded[source.name] = source.load(paths.get(source.name), *needed)
    return loaded


@dataclass(frozen=True)
class Sources:
    """Where a run finds what stages declare: the loaded build inputs, the outputs of the stages run so far, the
    LLM client (opened on first use) and the run's own values."""

    tables: Mapping[str, Any]
    outputs: Mapping[str, StageOutput]
    client: Callable[[], Any]
    run_values: Mapping[str, Callable[[], Any]] = field(default_factory=dict)


def arguments(stage: Stage, params: Any, sources: Sources) -> dict[str, Any]:
    """The stage's keyword arguments: each declared input found in ``sources``, and ``params``."""
    found: dict[str, Any] = {} if params is None else {"params": params}
    for name, source in stage.inputs.items():
        match source:
            case Input(input_name):
                found[name] = sources.tables[input_name]
            case Table(folder, table):
                found[name] = sources.outputs[folder][table]
            case Tables(tables):
                frames = [sources.outputs[table.folder][table.name] for table in tables.values()]
                found[name] = pd.concat(frames, ignore_index=True)
            case Report(folder, compute):
                found[name] = compute(sources.outputs[folder].report)
            case Resource(load, when, default):
                found[name] = load() if when(params) else default
            case Declared(value):
                found[name] = value
            case Client(when):
                found[name] = sources.client() if when(params) else None
            case RunValue(value_name):
                found[name] = sources.run_values[value_name]()
    return found


def finish(stage: Stage, output: StageOutput, params: Any) -> StageOutput:
    """What the contract adds to every stage's output: the tables checked against the declaration, and the
    report's common part (its stage name, its parameters, counts in and out, drops per reason), filled in
    where the stage did not give it."""
    missing = sorted(set(stage.outputs) - set(output.tables))
    extra = sorted(set(output.tables) - set(stage.outputs))
    if missing or extra:
        raise ValueError(f"stage {stage.folder}: tables {missing} missing, {extra} not declared")
    report = dict(output.report)
    report.setdefault("stage", stage.name)
    if params is not None:
        report.setdefault("parameters", _parameters(params))
    if stage.drops and "dropped" not in report:
        reasons = pd.concat([output.tables[name]["reason"] for name in stage.drops], ignore_index=True)
        report["dropped"] = {"total": len(reasons), "by_reason": count_reasons(reasons)}
    report.setdefault("dropped", {"total": 0, "by_reason": {}})
    return dataclasses.replace(output, report=report, schemas={**stage.outputs, **output.schemas})


def _parameters(params: Any) -> dict[str, Any]:
    as_report = getattr(params, "as_report", None)
    return as_report() if as_report else dataclasses.asdict(params)
