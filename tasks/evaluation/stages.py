"""The evaluation's two stages, declared like the build's (docs/architecture.md §9) and run by the same runner:
``01_samples`` (every model on every config, through lm-eval) and ``02_metrics`` (PBBQ §4's tables from them).

The samples stage runs every time (``cached=False``): each unit (model × config) is cached on its own, under
``<outputs>/.cache/eval/units/`` by :func:`~pbbq.tasks.evaluation.evaluate.unit_key`, so that a run with one model
more calls only that model, and lm-eval's request cache keeps every answer as it arrives (a crashed run resumes).
The metrics stage is cached by the runner on its inputs and code, as a build's stages are.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ..core.artifacts import StageOutput, atomic_write_bytes, parquet_bytes, write_json
from ..core.schemas import to_arrow
from ..core.stage import Input, Pipeline, RunValue, Stage, Table
from .evaluate import ModelSpec, Release, UnitResult, run_unit, tasks_sha256, unit_key
from .metrics import (
    ERROR_RETENTION,
    KL,
    KL_STEREOTYPES,
    SAMPLES,
    SCORES,
    BootstrapParams,
    category_table,
    error_retention,
    kl_to_survey,
    score_table,
)
from .reports import (
    BBQ_TABLE,
    EPSILON_NEEDS,
    TABLE3,
    TABLE4,
    bbq_table,
    plot_accuracy,
    plot_bias_by_category,
    reports_markdown,
    table3,
    table4,
)
from .sample import Selection


@dataclass(frozen=True)
class Units:
    """What the samples stage evaluates: every model on every config (the rows ``selection`` draws, or all), with
    lm-eval's settings and where the units and lm-eval's requests are cached."""

    models: tuple[ModelSpec, ...]
    configs: tuple[str, ...]
    selection: Selection | None
    cache: Path
    batch_size: int
    seed: int


def _read_unit(path: Path) -> UnitResult | None:
    meta = path.with_suffix(".json")
    if not (path.is_file() and meta.is_file()):
        return None
    info = json.loads(meta.read_text(encoding="utf-8"))
    return UnitResult(pd.read_parquet(path), info["aggregates"], 0)


def _write_unit(path: Path, result: UnitResult, about: dict[str, Any]) -> None:
    """The unit's samples, then its metadata: the metadata file's presence says the unit is complete."""
    atomic_write_bytes(path, parquet_bytes(to_arrow(result.samples, SAMPLES, "samples")))
    write_json(path.with_suffix(".json"), {**about, "aggregates": result.aggregates, "requests": result.requests})


@task(name="evaluate-unit", cache_policy=NO_CACHE)
def evaluate_unit(
    model: ModelSpec,
    config: str,
    tasks: Path,
    docs: list[int] | None,
    request_cache: Path,
    batch_size: int,
    seed: int,
) -> UnitResult:
    """One model on one config through lm-eval (a Prefect task, so the UI shows each unit)."""
    return run_unit(model, config, tasks, docs=docs, request_cache=request_cache, batch_size=batch_size, seed=seed)


def samples(release: Release, tasks: Path, units: Units) -> StageOutput:
    """Every unit's per-sample results, from its cache or from lm-eval; the report lists each unit with its cache
    key, whether it was cached, its request count and lm-eval's own aggregates of the task."""
    logger = get_run_logger()
    tasks_hash = tasks_sha256(tasks)
    parts: list[pd.DataFrame] = []
    listed: list[dict[str, Any]] = []
    for spec in units.models:
        request_cache = units.cache / "requests" / hashlib.sha256(spec.spec.encode()).hexdigest()[:16]
        for config in units.configs:
            docs = units.selection.docs[config] if units.selection else None
            key = unit_key(spec, release, tasks_hash, config, docs)
            path = units.cache / "units" / f"{key}.parquet"
            result = _read_unit(path)
            cached = result is not None
            if result is None:
                fresh = evaluate_unit(spec, config, tasks, docs, request_cache, units.batch_size, units.seed)
                _write_unit(path, fresh, {"model": spec.display, "config": config, "release_sha256": release.sha256})
                # read back as a rerun reads it, so that both give the samples table the same bytes (and the
                # metrics stage the same cache key)
                result = UnitResult(pd.read_parquet(path), fresh.aggregates, fresh.requests)
            parts.append(result.samples.assign(model=spec.name))
            listed.append(
                {
                    "model": spec.name,
                    "config": config,
                    "task": spec.task(config),
                    "key": key,
                    "cached": cached,
                    "samples": len(result.samples),
                    "requests": result.requests,
                    "lm_eval_aggregates": result.aggregates,
                }
            )
            how = "cached" if cached else f"{result.requests} requests"
            logger.info("%s on %s: %d samples (%s)", spec.name, config, len(result.samples), how)
    table = pd.concat(parts, ignore_index=True)
    report = {
        "stage": "samples",
        "counts": {"in": len(table), "out": len(table)},
        "dropped": {"total": 0, "by_reason": {}},
        "units": listed,
        "selection": units.selection.report if units.selection else None,
        "model_requests": sum(unit["requests"] for unit in listed if not unit["cached"]),
        "unparseable": int((table["choice"] < 0).sum()),
    }
    return StageOutput(tables={"samples": table}, schemas={"samples": SAMPLES}, report=report)


NO_SURVEY = "KL not computed: no survey table (pass --survey, or evaluate a build's run folder)"


def metrics(samples: pd.DataFrame, survey: pd.DataFrame | None, params: BootstrapParams) -> StageOutput:
    """PBBQ's Tables 3 and 4, BBQ's bias scores, ε_c and the KL to the survey (when there is one), with their
    intervals, as parquet and CSV, ``tables.md`` and the plots."""
    notes = [NO_SURVEY] if survey is None else []
    scores = score_table(samples, params)
    categories = category_table(samples, params)
    t3, t4, bbq = table3(scores), table4(categories), bbq_table(scores)
    epsilon = error_retention(samples, params)
    if epsilon.empty:
        notes.append(f"ε_c not computed: {EPSILON_NEEDS}")
    if survey is not None:
        kl, kl_detail = kl_to_survey(samples, survey, params)
    else:
        kl, kl_detail = pd.DataFrame(columns=KL.names), pd.DataFrame(columns=KL_STEREOTYPES.names)
    files = {"tables.md": reports_markdown(t3, t4, bbq, epsilon, kl, notes).encode("utf-8")}
    for config in sorted(samples["config"].unique()):
        files[f"bias_by_category_{config}.png"] = plot_bias_by_category(scores, config)
        files[f"accuracy_{config}.png"] = plot_accuracy(t3, config)
    tables = {
        "scores": scores,
        "table3": t3,
        "table4": t4,
        "bbq_scores": bbq,
        "error_retention": epsilon,
        "kl": kl,
        "kl_by_stereotype": kl_detail,
    }
    report = {
        "stage": "metrics",
        "counts": {"in": len(samples), "out": len(scores)},
        "dropped": {"total": 0, "by_reason": {}},
        "bootstrap": {"n": params.n, "seed": params.seed, "confidence": params.confidence, "unit": "template"},
        "warnings": notes,
    }
    return StageOutput(
        tables=tables,
        schemas={},
        report=report,
        csv=("table3", "table4", "bbq_scores", "error_retention", "kl"),
        files=files,
    )


SAMPLES_STAGE = Stage(
    "01_samples",
    "samples",
    samples,
    inputs={"release": Input("release"), "tasks": Input("tasks"), "units": RunValue("units")},
    outputs={"samples": SAMPLES},
    cached=False,
)
METRICS_STAGE = Stage(
    "02_metrics",
    "metrics",
    metrics,
    inputs={"samples": Table("01_samples", "samples"), "survey": Input("survey")},
    outputs={
        "scores": SCORES,
        "table3": TABLE3,
        "table4": TABLE4,
        "bbq_scores": BBQ_TABLE,
        "error_retention": ERROR_RETENTION,
        "kl": KL,
        "kl_by_stereotype": KL_STEREOTYPES,
    },
    params=BootstrapParams,
)
EVALUATION = Pipeline((SAMPLES_STAGE, METRICS_STAGE))
"""The evaluation of a release: its samples, then its metrics."""
