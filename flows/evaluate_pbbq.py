"""The evaluate-pbbq flow (PBBQ §4; docs/architecture.md, the evaluate stage): a release and models → per-sample
results → PBBQ's Tables 3–4, BBQ's bias scores, ε_c and the KL to the survey.

A run writes ``outputs/<eval_id>/`` with the build's conventions (a manifest with every artifact's sha256, the
inputs' hashes, the parameters, the code version; ``pbbq audit`` reads it):

- ``01_samples/samples.parquet``: one row per model, config and example (:data:`pbbq.tasks.evaluation.metrics.SAMPLES`);
  the report lists every unit (model × config) with its cache key, whether it was cached, its request count and
  lm-eval's own aggregates of the task;
- ``02_metrics/``: ``scores`` (every metric per model, config and category, with intervals), ``table3``,
  ``table4``, ``bbq_scores``, ``error_retention``, ``kl`` and ``kl_by_stereotype`` as parquet (and CSV),
  ``tables.md`` (the papers' layout) and the plots.

``limit`` evaluates that many examples of each config, drawn by :func:`pbbq.tasks.evaluation.sample.select_examples`
(stratified by category, context condition and question polarity, seeded by ``seed``; the ``fa-names`` rows are
variants of the ``fa`` rows drawn, so that ε_c is computed); the report of ``01_samples`` says what they cover.

A model spec's secret arguments (``api_key=…``) are dropped and named in a warning; the keys come from the
environment (:data:`pbbq.tasks.evaluation.evaluate.KEY_VARIABLES`). Units are cached under
``<outputs>/.cache/eval/units/`` by :func:`pbbq.tasks.evaluation.evaluate.unit_key` (model spec + release hash + task
files + config + examples selected): a rerun of the same evaluation calls no model. lm-eval's own request cache
(``<outputs>/.cache/eval/requests/``) keeps every answer as it arrives, so a crashed run resumes. This module
only wires; the work is in :mod:`pbbq.tasks.evaluation.evaluate`, :mod:`pbbq.tasks.evaluation.metrics` and
:mod:`pbbq.tasks.evaluation.reports`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from ..tasks.core.artifacts import RunFolder, StageOutput, atomic_write_bytes, new_run_id, parquet_bytes, write_json
from ..tasks.core.schemas import to_arrow
from ..tasks.evaluation.evaluate import (
    EvaluateError,
    ModelSpec,
    Release,
    UnitResult,
    check_arguments,
    check_configs,
    lm_eval_version,
    resolve_release,
    run_unit,
    task_folder,
    tasks_sha256,
    unit_key,
)
from ..tasks.evaluation.metrics import (
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
from ..tasks.evaluation.reports import (
    BBQ_TABLE,
    TABLE3,
    TABLE4,
    bbq_table,
    plot_accuracy,
    plot_bias_by_category,
    reports_markdown,
    table3,
    table4,
)
from ..tasks.evaluation.sample import Selection, read_config, select_examples
from .audit.runs import outputs_folder


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


def _selection(release: Release, configs: list[str], limit: int | None, seed: int) -> Selection | None:
    """The rows of each config a limited run evaluates (None: every row)."""
    if limit is None:
        return None
    return select_examples({config: read_config(release.folder, config) for config in configs}, limit, seed)


def _survey_table(path: Path | None) -> tuple[pd.DataFrame | None, str | None]:
    """The survey's acceptance per stereotype (parquet or CSV with stereotype_id, acceptance), or why not."""
    if path is None:
        return None, "KL not computed: no survey table (pass --survey, or evaluate a build's run folder)"
    table = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    missing = {"stereotype_id", "acceptance"} - set(table.columns)
    if missing:
        raise EvaluateError(f"{path}: the survey table lacks column(s) {sorted(missing)}")
    return table[["stereotype_id", "acceptance"]], None


def _metrics_stage(
    samples: pd.DataFrame, survey: pd.DataFrame | None, notes: list[str], params: BootstrapParams
) -> StageOutput:
    scores = score_table(samples, params)
    categories = category_table(samples, params)
    t3, t4, bbq = table3(scores), table4(categories), bbq_table(scores)
    epsilon = error_retention(samples, params)
    if epsilon.empty:
        notes.append("ε_c not computed: it needs results on both fa and fa-names for a model")
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
    schemas = {
        "scores": SCORES,
        "table3": TABLE3,
        "table4": TABLE4,
        "bbq_scores": BBQ_TABLE,
        "error_retention": ERROR_RETENTION,
        "kl": KL,
        "kl_by_stereotype": KL_STEREOTYPES,
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
        schemas=schemas,
        report=report,
        csv=("table3", "table4", "bbq_scores", "error_retention", "kl"),
        files=files,
    )


def _artifact(key: str, frame: pd.DataFrame, description: str) -> None:
    create_table_artifact(key=key, table=frame.astype(str).to_dict(orient="records"), description=description)


@flow(name="evaluate-pbbq")
def evaluate_pbbq(
    release: str,
    models: list[str],
    configs: list[str] | None = None,
    limit: int | None = None,
    eval_id: str | None = None,
    outputs: str | None = None,
    survey: str | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    batch_size: int = 8,
) -> str:
    """Score ``models`` (``[NAME=]BACKEND:ARGS`` each) on a release (run folder, release folder or Hub dataset)
    for ``configs`` (default: all), ``limit`` examples of each drawn as the module says (default: all); return
    the run folder."""
    specs = [ModelSpec.parse(model) for model in models]
    check_arguments(specs, limit)
    logger = get_run_logger()
    for spec in specs:
        if spec.dropped:
            logger.warning(
                "model %s: %s dropped from its spec (a key would reach logs and Prefect's database); lm-eval reads "
                "the key from %s",
                spec.name,
                ", ".join(spec.dropped),
                spec.key_variable,
            )
    params = BootstrapParams(n=bootstrap, seed=seed)
    root = outputs_folder(outputs)
    cache = root / ".cache" / "eval"
    found: Release = resolve_release(release, cache / "releases")
    wanted = check_configs(found, configs)
    selection = _selection(found, wanted, limit, seed)
    survey_path = Path(survey) if survey else found.survey
    parameters = {
        "release": found.source,
        "release_folder": str(found.folder),
        "release_manifest_sha256": found.manifest_sha256,
        "release_sha256": found.sha256,
        "models": [spec.display for spec in specs],
        "configs": wanted,
        "limit": limit,
        "bootstrap": {"n": params.n, "seed": params.seed, "confidence": params.confidence},
        "batch_size": batch_size,
        "lm_eval": lm_eval_version(),
        "survey": str(survey_path) if survey_path else None,
    }
    run = RunFolder.create(root, f"eval-{new_run_id()}" if eval_id is None else eval_id, parameters)
    logger.info("evaluation %s → %s", run.run_id, run.path)
    with run.recording():
        if (found.folder / "manifest.json").is_file():
            run.record_input("release_manifest", found.folder / "manifest.json", None)
        if survey_path is not None:
            run.record_input("survey", survey_path, None)
        survey_table, survey_note = _survey_table(survey_path)
        tasks = task_folder(found, run.path)
        tasks_hash = tasks_sha256(tasks)
        if tasks.is_relative_to(run.path):  # written here for a release that has no task folder of its own
            run.record_tree(tasks)
        parts, units = [], []
        for spec in specs:
            request_cache = cache / "requests" / hashlib.sha256(spec.spec.encode()).hexdigest()[:16]
            for config in wanted:
                docs = selection.docs[config] if selection else None
                key = unit_key(spec, found, tasks_hash, config, docs)
                path = cache / "units" / f"{key}.parquet"
                result = _read_unit(path)
                cached = result is not None
                if result is None:
                    result = evaluate_unit(spec, config, tasks, docs, request_cache, batch_size, seed)
                    about = {"model": spec.display, "config": config, "release_sha256": found.sha256}
                    _write_unit(path, result, about)
                parts.append(result.samples.assign(model=spec.name))
                units.append(
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
        samples = pd.concat(parts, ignore_index=True)
        samples_report = {
            "stage": "samples",
            "counts": {"in": len(samples), "out": len(samples)},
            "dropped": {"total": 0, "by_reason": {}},
            "units": units,
            "selection": selection.report if selection else None,
            "model_requests": sum(unit["requests"] for unit in units if not unit["cached"]),
            "unparseable": int((samples["choice"] < 0).sum()),
        }
        run.write_stage(
            "01_samples",
            StageOutput(tables={"samples": samples}, schemas={"samples": SAMPLES}, report=samples_report),
            inputs={"release": found.sha256, "tasks": tasks_hash},
            cached=all(unit["cached"] for unit in units),
        )
        notes = [survey_note] if survey_note else []
        metrics = _metrics_stage(samples, survey_table, notes, params)
        run.write_stage(
            "02_metrics", metrics, inputs={"samples": run.artifact_hash("01_samples", "samples")}, cached=False
        )
        logger.info("model requests: %d", samples_report["model_requests"])
        _artifact("pbbq-table-3", metrics["table3"], "PBBQ Table 3: per model, averaged over categories")
        _artifact("pbbq-table-4", metrics["table4"], "PBBQ Table 4: per category, averaged over models")
        _artifact("pbbq-bbq-scores", metrics["bbq_scores"], "BBQ's s_AMB and s_DIS per model")
    return str(run.path)
