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
environment (:data:`pbbq.tasks.evaluation.evaluate.KEY_VARIABLES`). The two steps are stages declared in
:mod:`pbbq.tasks.evaluation.stages` and run by the build's :class:`~pbbq.flows.runner.PipelineRunner` (the same
contract: declared inputs and outputs, the manifest's input hashes, the cache): each unit is cached under
``<outputs>/.cache/eval/units/`` by :func:`pbbq.tasks.evaluation.evaluate.unit_key` (model spec + the data files'
hashes + task files + config + examples selected), so a rerun of the same evaluation calls no model; lm-eval's
own request cache (``<outputs>/.cache/eval/requests/``) keeps every answer as it arrives, so a crashed run
resumes. A release is verified against its manifest before anything runs, and its ``lm_eval/`` task is run only
when it is the one this builder writes (:func:`~pbbq.tasks.evaluation.evaluate.check_release`, ``task_folder``).
This module only wires.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

from ..tasks.core.artifacts import sha256_file
from ..tasks.core.run_folder import RunFolder, new_run_id
from ..tasks.core.stage import Parameters
from ..tasks.evaluation.evaluate import (
    EvaluateError,
    ModelSpec,
    Release,
    check_arguments,
    check_configs,
    check_release,
    lm_eval_version,
    resolve_release,
    task_folder,
    tasks_sha256,
)
from ..tasks.evaluation.metrics import BootstrapParams
from ..tasks.evaluation.sample import Selection, read_config, select_examples
from ..tasks.evaluation.stages import EVALUATION, Units
from .audit.runs import outputs_folder
from .build_inputs import BuildInputs
from .runner import PipelineRunner


def _selection(release: Release, configs: list[str], limit: int | None, seed: int) -> Selection | None:
    """The rows of each config a limited run evaluates (None: every row)."""
    if limit is None:
        return None
    return select_examples({config: read_config(release.folder, config) for config in configs}, limit, seed)


def _survey_table(path: Path | None) -> pd.DataFrame | None:
    """The survey's acceptance per stereotype (parquet or CSV with stereotype_id, acceptance), if there is one."""
    if path is None:
        return None
    table = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    missing = {"stereotype_id", "acceptance"} - set(table.columns)
    if missing:
        raise EvaluateError(f"{path}: the survey table lacks column(s) {sorted(missing)}")
    return table[["stereotype_id", "acceptance"]]


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
    unverified: bool = False,
) -> str:
    """Score ``models`` (``[NAME=]BACKEND:ARGS`` each) on a release (run folder, release folder or Hub dataset)
    for ``configs`` (default: all), ``limit`` examples of each drawn as the module says (default: all); return
    the run folder. A release that is not exactly what its manifest lists is refused unless ``unverified``
    (:func:`~pbbq.tasks.evaluation.evaluate.check_release`)."""
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
    trust = check_release(found, unverified=unverified)
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
        "unverified": unverified,
    }
    run = RunFolder.create(
        root, f"eval-{new_run_id()}" if eval_id is None else eval_id, parameters, id_option="--eval-id"
    )
    logger.info("evaluation %s → %s", run.run_id, run.path)
    with run.recording():
        for warning in trust:
            run.warnings.append(warning)
            logger.warning(warning)
        if (found.folder / "manifest.json").is_file():
            run.record_input("release_manifest", found.folder / "manifest.json", None)
        if survey_path is not None:
            run.record_input("survey", survey_path, None)
        tasks, replaced = task_folder(found, run.path)
        if replaced is not None:
            run.warnings.append(replaced)
            logger.warning(replaced)
        if tasks.is_relative_to(run.path):  # written here for a release that has no task folder of its own
            run.record_tree(tasks)
        hashes = {"release": found.sha256, "tasks": tasks_sha256(tasks)}
        inputs = BuildInputs(
            tables={"release": found, "tasks": tasks, "survey": _survey_table(survey_path)},
            hashes=hashes | ({"survey": sha256_file(survey_path)} if survey_path else {}),
            files={},
            warnings=[],
            fetch_report={},
        )
        units = Units(tuple(specs), tuple(wanted), selection, cache, batch_size, seed)
        runner = PipelineRunner(
            run,
            cache / "prefect-results",
            Parameters({"metrics": params}),
            None,
            inputs,
            {"units": lambda: units},
            EVALUATION,
        )
        stage_outputs = runner.run_all()
        logger.info("model requests: %d", stage_outputs["01_samples"].report["model_requests"])
        metrics = stage_outputs["02_metrics"]
        _artifact("pbbq-table-3", metrics["table3"], "PBBQ Table 3: per model, averaged over categories")
        _artifact("pbbq-table-4", metrics["table4"], "PBBQ Table 4: per category, averaged over models")
        _artifact("pbbq-bbq-scores", metrics["bbq_scores"], "BBQ's s_AMB and s_DIS per model")
    return str(run.path)
