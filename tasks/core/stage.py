"""The stage contract (docs/architecture.md §1, §9): what a stage declares, so that the flow, the manifest, the
configuration, the audit and the dataset card read it from one place.

A stage is a plain function over tables that returns a :class:`~pbbq.tasks.core.artifacts.StageOutput`. Its
:class:`Stage` declaration says where its folder is, which configuration section holds its parameters (a
dataclass), where each of its arguments comes from (an input file, another stage's table, a prompt file, the LLM
client), which tables it writes with which schema, which of them hold its drops (rows with a ``reason``), the
words an audit uses for its rows and the funnel steps it adds. ``flows/pipeline.py`` lists the stages in order
(``PIPELINE``); ``flows/build_pbbq.py`` runs the list. Adding a stage is one module and one entry there.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa

from .artifacts import StageOutput, count_reasons


@dataclass(frozen=True)
class Input:
    """A build input (``[inputs]`` of the configuration, or the crawl's fetched posts), as loaded."""

    name: str


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
class Client:
    """The build's LLM client, opened once by the runner; None when ``when(params)`` is false."""

    when: Callable[[Any], bool] = _always


@dataclass(frozen=True)
class RunValue:
    """A value of this run the runner makes (the publish stage's folder, the run's manifest): ``name`` is one
    of the runner's ``run_values``."""

    name: str


Source = Input | Table | Tables | Report | Resource | Client | RunValue


def resource_hash(value: Any) -> str:
    """How a loaded resource is recorded in the manifest: its own ``sha256`` or the hash of its text."""
    digest = getattr(value, "sha256", None)
    return str(digest) if digest is not None else hashlib.sha256(str(value).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline, declared."""

    folder: str
    """Its folder in the run, numbered in pipeline order: ``02_survey``."""
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
        its drop tables and the words for its counts."""
        return {"drops": list(self.drops), "words": list(self.words)}

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
