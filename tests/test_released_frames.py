"""Memory past instantiation (issue 35, docs/scale.md "A blown-up sheet row"): the pipeline runner lets go of a
stage's frames once every later stage that reads them is written (a table read after that is loaded again from
the content store), and stacks tables read stacked once for all the stages that read them so."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from prefect import flow

from pbbq.flows.build_inputs import BuildInputs
from pbbq.flows.runner import PipelineRunner
from pbbq.tasks.core.artifacts import StageOutput
from pbbq.tasks.core.run_folder import RunFolder
from pbbq.tasks.core.stage import Parameters, Pipeline, Stage, Table, Tables
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


def test_tables_read_stacked_are_stacked_once_and_let_go_once_read(prefect_server: None, tmp_path: Path) -> None:
    """Two stages that read the same tables stacked (every config's examples) share one stacked frame, each
    through a copy of its own that its changes never reach the other's; the tables stacked are let go once it is
    made, and it once both are written."""
    runner_of: list[PipelineRunner] = []
    got: dict[str, np.ndarray] = {}
    held: dict[str, list[Any]] = {}
    stacked = Tables({"a": Table("01_a", "values"), "b": Table("02_b", "values")})

    def made_a() -> StageOutput:
        return StageOutput({"values": pd.DataFrame({"value": range(5)})}, {"values": VALUES}, {})

    def made_b(values: pd.DataFrame) -> StageOutput:
        return StageOutput({"values": values + 5}, {"values": VALUES}, {})

    def reader(name: str) -> Callable[[pd.DataFrame], StageOutput]:
        def read(values: pd.DataFrame) -> StageOutput:
            got[name] = values["value"].to_numpy()  # a view of the frame's data, as the stage got it
            held[f"{name}: stacked from"] = _held(runner_of[0], "01_a") + _held(runner_of[0], "02_b")
            values["value"] = values["value"] * 0  # a stage changing its frame changes its own copy only
            return StageOutput({}, {}, {})

        return read

    def last() -> StageOutput:
        held["once read"] = runner_of[0].stacks.held()
        return StageOutput({}, {}, {})

    stages = (
        Stage("01_a", "a", made_a, inputs={}, outputs={"values": VALUES}),
        Stage("02_b", "b", made_b, inputs={"values": Table("01_a", "values")}, outputs={"values": VALUES}),
        Stage("03_first", "first", reader("first"), inputs={"values": stacked}, outputs={}, cached=False),
        Stage("04_second", "second", reader("second"), inputs={"values": stacked}, outputs={}, cached=False),
        Stage("05_last", "last", last, inputs={}, outputs={}, cached=False),
    )

    @flow
    def pipeline() -> None:
        run = RunFolder.create(tmp_path, "run", {})
        runner = PipelineRunner(
            run, tmp_path / "cache", Parameters({}), None, BuildInputs({}, {}, {}, [], {}), {}, Pipeline(stages)
        )
        runner_of.append(runner)
        for stage in stages[:3]:
            runner.submit(stage)
            runner.wait(stage.folder)
        held["between"] = runner.stacks.held()
        for stage in stages[3:]:
            runner.submit(stage)
            runner.wait(stage.folder)

    pipeline()
    assert len(held["between"]) == 1
    assert held["first: stacked from"] == []  # once stacked, read by no stage still to be written but stacked
    assert held["once read"] == []
    assert got["second"].tolist() == list(range(10))  # not the first stage's change
    assert np.shares_memory(got["first"], got["second"])  # stacked once
    assert runner_of[0].stacks.held() == []
