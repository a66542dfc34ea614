"""How many stages run at once (docs/scale.md, "Memory"): the pipeline runner submits a stage only when fewer than
its bound are running, the bound follows the task runner unless ``[build] max_parallel_stages`` sets it, and a bad
value is refused in one line."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from prefect import flow

from pbbq.flows.build_inputs import BuildInputs
from pbbq.flows.config import SAMPLE_CONFIG, ConfigError, load_config
from pbbq.flows.runner import PipelineRunner, parallel_stages, usable_cpus
from pbbq.flows.task_runners import task_runner
from pbbq.tasks.core.artifacts import StageOutput
from pbbq.tasks.core.run_folder import RunFolder
from pbbq.tasks.core.stage import Parameters, Pipeline, RunValue, Stage

INDEPENDENT = 5
"""Stages that read nothing: without a bound, all of them are submitted at once."""


class Overlap:
    """A stage function that counts how many of its calls run at the same time. Each call waits until a third
    call runs beside it (or a second passes), so that unbounded stages are seen side by side."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.running = 0
        self.most = 0

    def __call__(self) -> StageOutput:
        with self.changed:
            self.running += 1
            self.most = max(self.most, self.running)
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.running > 2, timeout=1.0)
            self.running -= 1
        return StageOutput({}, {}, {})


def _run(tmp_path: Path, max_parallel: int | None) -> tuple[int, int]:
    """The most stages that ran at once in a pipeline of :data:`INDEPENDENT` stages, and the runner's bound."""
    overlap = Overlap()
    overlap.__name__ = "overlap"  # type: ignore[attr-defined]  # the Prefect task's name
    stages = tuple(
        Stage(f"{n:02d}_s{n}", f"s{n}", overlap, inputs={}, outputs={}, cached=False) for n in range(INDEPENDENT)
    )

    @flow
    def pipeline() -> int:
        run = RunFolder.create(tmp_path, "run", {})
        inputs = BuildInputs({}, {}, {}, [], {})
        runner = PipelineRunner(
            run, tmp_path / "cache", Parameters({}), None, inputs, {}, Pipeline(stages), max_parallel=max_parallel
        )
        assert len(runner.run_all()) == INDEPENDENT
        return runner.max_parallel

    bound = pipeline()
    return overlap.most, bound


def test_no_more_stages_run_at_once_than_the_bound(prefect_server: None, tmp_path: Path) -> None:
    most, bound = _run(tmp_path, 2)
    assert bound == 2
    assert most == 2


def test_the_bound_follows_the_task_runner(prefect_server: None, tmp_path: Path) -> None:
    """Prefect's thread pool: the CPUs this process may run on; a Dask cluster: its worker threads."""
    most, bound = _run(tmp_path, None)
    assert bound == usable_cpus()
    assert most <= bound
    pytest.importorskip("prefect_dask")

    @flow(task_runner=task_runner("dask"))  # two single-threaded workers in this process
    def on_dask() -> int:
        return parallel_stages()

    assert on_dask() == 2


def test_the_default_bound_is_the_cpus_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """A container or ``taskset`` that gives the build one CPU of a larger machine bounds it to one stage at once."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert parallel_stages() == 1


def test_the_bound_is_a_build_setting(sample_copy: Path) -> None:
    config = sample_copy / "configs" / "bounded.toml"
    config.write_text('inherit = "sample.toml"\n[build]\nmax_parallel_stages = 3\n', encoding="utf-8")
    assert load_config(config).running.max_parallel_stages == 3
    assert load_config(SAMPLE_CONFIG).running.max_parallel_stages is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [("0", "= 0 is outside 1 … ∞"), ("2.5", "= 2.5 is not int"), ('"two"', "= 'two' is not int")],
)
def test_a_bad_bound_is_refused_naming_the_key(sample_copy: Path, value: str, problem: str) -> None:
    config = sample_copy / "configs" / "bounded.toml"
    config.write_text(f'inherit = "sample.toml"\n[build]\nmax_parallel_stages = {value}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(config)
    assert str(refused.value) == f"{config}: [build] max_parallel_stages {problem}"


def test_a_run_value_is_made_early_beside_the_stages_still_running(prefect_server: None, tmp_path: Path) -> None:
    """The run's transcript is written once the stages that send LLM requests are done, beside the stages still
    computing (``PipelineRunner.make_early``), not only when publish asks for it: here a later stage waits for
    the value to be made, which it is only if the runner made it early."""
    made = threading.Event()
    written_when_made: list[set[str]] = []
    runner_of: list[PipelineRunner] = []

    def value() -> str:
        written_when_made.append(set(runner_of[0].outputs))
        made.set()
        return "made"

    def sender() -> StageOutput:
        return StageOutput({}, {}, {})

    def later() -> StageOutput:
        return StageOutput({}, {}, {"saw_the_value_made": made.wait(timeout=10)})

    def publish(made: str) -> StageOutput:
        return StageOutput({}, {}, {"made": made})

    stages = (
        Stage("01_sender", "sender", sender, inputs={}, outputs={}, cached=False),
        Stage("02_later", "later", later, inputs={}, outputs={}, cached=False),
        Stage("03_publish", "publish", publish, inputs={"made": RunValue("value")}, outputs={}, cached=False),
    )

    @flow
    def pipeline() -> dict[str, StageOutput]:
        run = RunFolder.create(tmp_path, "run", {})
        inputs = BuildInputs({}, {}, {}, [], {})
        runner = PipelineRunner(
            run, tmp_path / "cache", Parameters({}), None, inputs, {"value": value}, Pipeline(stages)
        )
        runner_of.append(runner)
        runner.make_early("value", after=["01_sender"])
        return runner.run_all()

    outputs = pipeline()
    assert outputs["02_later"].report["saw_the_value_made"] is True
    assert written_when_made[0] == {"01_sender"}  # made before 02_later was written
    assert outputs["03_publish"].report["made"] == "made"


def test_a_stage_taking_a_run_value_waits_only_for_the_stages_it_describes(
    prefect_server: None, tmp_path: Path
) -> None:
    """Statistics takes the funnel steps of the stages that count their own: it is submitted once those are
    written, beside diversity, not after it. Here the later stage finishes only once the one taking the value ran."""
    ran = threading.Event()

    def quick() -> StageOutput:
        return StageOutput({}, {}, {})

    def slow() -> StageOutput:
        return StageOutput({}, {}, {"saw_the_later_stage_run": ran.wait(timeout=10)})

    def taking(value: str) -> StageOutput:
        ran.set()
        return StageOutput({}, {}, {"value": value})

    value = RunValue("value", describes=lambda stage: stage.folder == "01_quick")
    stages = (
        Stage("01_quick", "quick", quick, inputs={}, outputs={}, cached=False),
        Stage("02_slow", "slow", slow, inputs={}, outputs={}, cached=False),
        Stage("03_taking", "taking", taking, inputs={"value": value}, outputs={}, cached=False),
    )

    @flow
    def pipeline() -> dict[str, StageOutput]:
        run = RunFolder.create(tmp_path, "run", {})
        values = {"value": lambda: "made"}
        runner = PipelineRunner(
            run, tmp_path / "cache", Parameters({}), None, BuildInputs({}, {}, {}, [], {}), values, Pipeline(stages)
        )
        return runner.run_all()

    outputs = pipeline()
    assert outputs["02_slow"].report["saw_the_later_stage_run"] is True
    assert outputs["03_taking"].report["value"] == "made"


def test_a_failed_stage_ends_the_run_with_early_work_never_started(prefect_server: None, tmp_path: Path) -> None:
    """Work waiting for stages a failure leaves unwritten is cancelled, not waited for: the run ends with the
    stage's error (a cancelled future that was never started never counts as done for ``wait``)."""

    def failing() -> StageOutput:
        raise RuntimeError("the stage failed")

    stages = (Stage("01_failing", "failing", failing, inputs={}, outputs={}, cached=False),)
    ended: list[BaseException] = []

    @flow
    def pipeline() -> None:
        run = RunFolder.create(tmp_path, "run", {})
        runner = PipelineRunner(
            run, tmp_path / "cache", Parameters({}), None, BuildInputs({}, {}, {}, [], {}), {}, Pipeline(stages)
        )
        never = runner.when_written(["01_failing"], lambda: "made")
        try:
            runner.run_all()
        finally:
            assert never.cancelled()

    def build() -> None:
        try:
            pipeline()
        except BaseException as error:  # the flow re-raises the stage's error
            ended.append(error)

    running = threading.Thread(target=build, daemon=True)
    running.start()
    running.join(timeout=120)
    assert not running.is_alive(), "the run waited for work that was never started"
    assert ended and "the stage failed" in str(ended[0])
