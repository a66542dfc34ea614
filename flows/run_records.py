"""What a build records of runs beside its stages: the last run's stage times, the killed runs' crashed flow runs,
the flow's table artifacts and its ``changes`` diff against the previous run."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from prefect import get_run_logger
from prefect.artifacts import create_table_artifact
from prefect.client.orchestration import get_client
from prefect.exceptions import ObjectNotFound
from prefect.states import Crashed

from .audit.diff import STAGES_COMPARED, changes_since_previous, stage_changes
from .audit.runs import previous_completed
from .pipeline import translate_stages
from .runner import PipelineRunner


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


def table_artifacts(runner: PipelineRunner) -> None:
    """The flow's table artifacts its stages declare (``Stage.artifacts``), from their outputs."""
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
    translating = (stage.name for stage in translate_stages(runner.pipeline))
    read = {*STAGES_COMPARED, *translating, *(path.split("/")[0] for path in tables.values())}
    folders = [stage.folder for stage in runner.pipeline]
    last = max(i for i, stage in enumerate(runner.pipeline) if stage.name in read or stage.folder in read)
    compared = runner.when_written(folders[: last + 1], partial(stage_changes, previous, run, examples=tables))
    return lambda: changes_since_previous(run, stages=(previous, compared.result()))
