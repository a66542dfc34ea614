"""The garbage collector while a build runs (docs/architecture.md §9, "Speed"): young collections less often, each
finished stage's objects frozen out of the collector's generations, and the process as it was once the build
ends."""

from __future__ import annotations

import gc
from pathlib import Path

from prefect import flow

from pbbq.flows.build_inputs import BuildInputs
from pbbq.flows.runner import PipelineRunner
from pbbq.tasks.core.artifacts import StageOutput
from pbbq.tasks.core.collector import BUILD_THRESHOLDS, build_collector, keep_long_lived
from pbbq.tasks.core.run_folder import RunFolder
from pbbq.tasks.core.stage import Parameters, Pipeline, Stage


def test_a_build_sets_the_collector_and_leaves_the_process_as_it_was() -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    assert before != BUILD_THRESHOLDS
    keep_long_lived()  # outside a build: nothing frozen
    assert gc.get_freeze_count() == frozen
    with build_collector():
        assert gc.get_threshold() == BUILD_THRESHOLDS
        with build_collector():  # a second build in the same process
            keep_long_lived()
        assert gc.get_threshold() == BUILD_THRESHOLDS  # the first build still runs
        assert gc.get_freeze_count() > frozen
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_stage_runs_with_the_earlier_stages_frozen(prefect_server: None, tmp_path: Path) -> None:
    """The runner's stages, one at a time: the second sees the build's thresholds and what the first made out of
    the collector's generations; after the run, nothing is frozen."""
    seen: dict[str, object] = {}
    frozen = gc.get_freeze_count()

    def first() -> StageOutput:
        return StageOutput({}, {}, {"rows": [[n] for n in range(100)]})

    def second() -> StageOutput:
        seen.update(threshold=gc.get_threshold(), frozen=gc.get_freeze_count())
        return StageOutput({}, {}, {})

    stages = (
        Stage("01_first", "first", first, inputs={}, outputs={}, cached=False),
        Stage("02_second", "second", second, inputs={}, outputs={}, cached=False),
    )

    @flow
    def pipeline() -> None:
        run = RunFolder.create(tmp_path, "run", {})
        runner = PipelineRunner(
            run,
            tmp_path / "cache",
            Parameters({}),
            None,
            BuildInputs({}, {}, {}, [], {}),
            {},
            Pipeline(stages),
            max_parallel=1,
        )
        runner.run_all()

    pipeline()
    assert seen["threshold"] == BUILD_THRESHOLDS
    assert isinstance(seen["frozen"], int) and seen["frozen"] > frozen
    assert gc.get_freeze_count() == 0
