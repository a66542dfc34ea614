"""The sample's stages run in this process, without Prefect (the stage functions and the sample's transcript in
replay mode): the arguments of a stage of the sample build, for the tests of stages that split by template."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from pbbq.flows.build_inputs import load_build_inputs
from pbbq.flows.config import load_config
from pbbq.tasks.core.artifacts import ArtifactStore, StageOutput
from pbbq.tasks.core.caching import stage_task
from pbbq.tasks.core.stage import Sources, Stage, arguments, finish
from pbbq.tasks.core.stored import StoredStage
from pbbq.tasks.llm import open_llm


def sample_arguments(folder: str, scratch: Path, config: Path | None = None) -> dict[str, Any]:
    """The arguments the sample build (or the build of ``config``) gives the stage in ``folder``: every stage before
    it run on the sample."""
    build = load_config(config)
    llm = build.llm.__class__(**{**build.llm.__dict__, "store_path": scratch / "responses.sqlite"})
    client = open_llm(llm, build.transcript)
    inputs = load_build_inputs(build, scratch, log=lambda line: None)
    outputs: dict[str, StageOutput] = {}
    sources = Sources(inputs.tables, outputs, lambda: client, {"example_cap": build.example_cap})
    for stage in build.pipeline:
        params = build.params(stage.name) if stage.params else None
        if stage.folder == folder:
            return arguments(stage, params, sources)
        outputs[stage.folder] = finish(stage, stage.run(**arguments(stage, params, sources)), params)
    raise KeyError(f"the sample's pipeline has no stage {folder}")


def assert_same_output(output: StageOutput, expected: StageOutput, besides: Iterable[str] = ("parts",)) -> None:
    """The two outputs hold the same tables, exactly, and the same report but for the keys ``besides`` (what the
    runner computed, ``parts``; a split stage's ``llm`` usage, which counts this run's requests)."""
    assert list(output.tables) == list(expected.tables)
    for name, frame in expected.tables.items():
        pd.testing.assert_frame_equal(output.tables[name], frame, check_exact=True)
    left = set(besides)
    assert {k: v for k, v in output.report.items() if k not in left} == {
        k: v for k, v in expected.report.items() if k not in left
    }


def first_run(stage: Stage, sample: dict[str, Any], store: ArtifactStore) -> tuple[Any, StoredStage]:
    """The stage's task function (as the runner calls it) and its first run on ``sample`` with ``store`` empty,
    checked to have computed every template (its report's ``parts``)."""
    run = stage_task(stage, sample["params"], store).fn
    fresh = run(**sample)
    assert isinstance(fresh, StoredStage)
    rows = len(fresh.tables(store)["examples"])
    n = sample["examples"]["template_id"].nunique()
    assert fresh.report["parts"] == {
        "key": "template_id",
        "computed": n,
        "of": n,
        "table": "examples",
        "rows": [rows] * 2,
    }
    return run, fresh
