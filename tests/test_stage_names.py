"""Issue 38: a stage's function is called as the stage is (its report's name and its configuration section), on
every pipeline; a translate stage past the first adds its target's code (``translate_ur``). Folders keep the names
older runs recorded (docs/architecture.md §5)."""

from __future__ import annotations

import pytest

from pbbq.flows.pipeline import ADAPT_PIPELINE, PIPELINE, Pipeline, pbbq_pipeline, reviewed


@pytest.mark.parametrize(
    "pipeline",
    [pbbq_pipeline(("en", "ur")), ADAPT_PIPELINE, reviewed(PIPELINE)],
    ids=["pbbq-en-ur", "adapt", "reviewed"],
)
def test_a_stage_function_is_named_as_its_stage(pipeline: Pipeline) -> None:
    for stage in pipeline.stages:
        function = stage.run.__name__
        assert stage.name == function or stage.name.startswith(f"{function}_"), (stage.folder, stage.name, function)
