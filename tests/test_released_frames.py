"""Memory past instantiation (issue 35, docs/scale.md "A blown-up sheet row"): the pipeline runner lets go of a
stage's frames once every later stage that reads them is written, and a table read after that is loaded again from
the content store."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
from prefect import flow

from pbbq.flows.build_inputs import BuildInputs
from pbbq.flows.runner import PipelineRunner
from pbbq.tasks.core.artifacts import StageOutput
from pbbq.tasks.core.run_folder import RunFolder
from pbbq.tasks.core.stage import Parameters, Pipeline, Stage, Table
from pbbq.tasks.core.stored import LazyTables

VALUES = pa.schema([("value", pa.int64())])


def _held(runner: PipelineRunner, folder: str) -> list[str]:
    tables = runner.outputs[folder].tables
    assert isinstance(tables, LazyTables)
    return tables.in_memory()


def test_a_stage_frames_are_let_go_once_its_readers_are_written(prefect_server: None, tmp_path: Path) -> None:
    runner_of: list[PipelineRunner] = []
    seen: dict[str, list[str]] = {}

    def make() -> StageOutput:
        return StageOutput({"values": pd.DataFrame({"value": range(1000)})}, {"values": VALUES}, {})

    def read(values: pd.DataFrame) -> StageOutput:
        seen["made, while read"] = _held(runner_of[0], "01_make")
        return StageOutput({"values": values.tail(10).reset_index(drop=True)}, {"values": VALUES}, {})

    def last() -> StageOutput:
        seen["made, once read"] = _held(runner_of[0], "01_make")
        seen["read, never read again"] = _held(runner_of[0], "02_read")
        return StageOutput({}, {}, {})

    stages = (
        Stage("01_make", "make", make, inputs={}, outputs={"values": VALUES}),
        Stage("02_read", "read", read, inputs={"values": Table("01_make", "values")}, outputs={"values": VALUES}),
        Stage("03_last", "last", last, inputs={}, outputs={}, cached=False),
    )

    @flow
    def pipeline() -> dict[str, StageOutput]:
        run = RunFolder.create(tmp_path, "run", {})
        runner = PipelineRunner(
            run, tmp_path / "cache", Parameters({}), None, BuildInputs({}, {}, {}, [], {}), {}, Pipeline(stages)
        )
        runner_of.append(runner)
        for stage in stages:  # one at a time, so that each sees the one before written
            runner.submit(stage)
            runner.wait(stage.folder)
        return runner.outputs

    outputs = pipeline()
    assert seen == {"made, while read": ["values"], "made, once read": [], "read, never read again": []}
    assert outputs["01_make"]["values"]["value"].tolist() == list(range(1000))  # loaded again from the store
