"""The diversity stage split by category (``Stage.per``): a build in which one template changed measures that
template's category again and makes the Average and Overall rows from every category's kept tokens, and the tables,
files and report are what the stage gives on whole tables, whatever was kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pbbq.flows.pipeline import PIPELINE
from pbbq.tasks import diversity
from pbbq.tasks.core.artifacts import ArtifactStore, StageOutput
from pbbq.tasks.core.caching import StoredStage, separated, stage_task
from pbbq.tasks.core.stage import Configs, Pipeline, Separable, Stage, Tables, finish
from tests.separable_support import assert_same_output, sample_arguments

STAGE = diversity.STAGE
PER = STAGE.per


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sample build's arguments of the diversity stage (every config's examples, the templates, params)."""
    return sample_arguments(STAGE.folder, tmp_path_factory.mktemp("sample"))


def _same(output: StageOutput, expected: StageOutput) -> None:
    """The same tables and report (:func:`assert_same_output`), and the same Markdown and chart bytes."""
    assert_same_output(output, expected)
    assert output.files == expected.files


def _categories(frame: pd.DataFrame, first_half: bool) -> pd.DataFrame:
    """The rows of the first (or the second) half of the categories."""
    categories = sorted(set(frame["category"]))
    return frame[frame["category"].isin(categories[: len(categories) // 2]) == first_half]


def test_the_pipeline_splits_the_stacked_examples_of_every_config() -> None:
    resolved = next(stage for stage in PIPELINE if stage.folder == STAGE.folder)
    assert isinstance(resolved.inputs["examples"], Tables) and resolved.per == PER
    per = Separable("category", ("examples",), dict, lambda parts, **_: StageOutput({}, {}, {}))
    stage = Stage("99_x", "x", lambda: StageOutput({}, {}, {}), inputs={"examples": Configs()}, outputs={}, per=per)
    assert Pipeline((stage,)).stages[0].per == per


def test_the_sample_split_by_category_is_the_whole_table_stage(sample: dict[str, Any], tmp_path: Path) -> None:
    """At once, half kept from a build that had only half the categories (the Overall rows then fewer units), or
    all kept: the whole-table stage's output."""
    assert PER is not None
    expected = diversity.diversity(**sample)
    store = ArtifactStore(tmp_path / "store")
    halved = sample | {name: _categories(sample[name], first_half=True) for name in ("examples", "templates")}
    _same(separated(PER, halved, store)[0], diversity.diversity(**halved))
    n = sample["examples"]["category"].nunique()
    output, parts = separated(PER, sample, store)
    _same(output, expected)
    assert 0 < parts["computed"] < n and parts["of"] == n
    output, parts = separated(PER, sample, store)
    _same(output, expected)
    assert parts["computed"] == 0


def test_one_changed_template_measures_its_category_only(sample: dict[str, Any], tmp_path: Path) -> None:
    """A lexical variant dropped from one template: its category's rows are measured again (the report's
    ``parts``), the tables, files and report are the whole-table stage's."""
    store = ArtifactStore(tmp_path / "store")
    run = stage_task(STAGE, sample["params"], store).fn
    fresh = run(**sample)
    assert isinstance(fresh, StoredStage)
    examples = sample["examples"]
    n = examples["category"].nunique()
    assert fresh.report["parts"]["computed"] == fresh.report["parts"]["of"] == n
    lexical = examples.groupby("template_id")["lexical_variant"].nunique()
    template_id = str(lexical[lexical > 1].index.max())
    own = examples["template_id"] == template_id
    variant = examples.loc[own, "lexical_variant"].iloc[-1]
    changed = sample | {"examples": examples[~(own & (examples["lexical_variant"] == variant))]}
    again = run(**changed)
    category = str(examples.loc[own, "category"].iloc[0])
    parts = again.report["parts"]
    assert (parts["key"], parts["computed"], parts["of"], parts["table"]) == ("category", 1, n, "table2")
    whole = finish(STAGE, diversity.diversity(**changed), changed["params"])
    tables = again.tables(store)
    for name, frame in whole.tables.items():
        pd.testing.assert_frame_equal(tables[name], frame, check_exact=True)
    assert {key: value for key, value in again.report.items() if key != "parts"} == whole.report
    measured = whole.tables["table2_instances"]
    before = fresh.tables(store)["table2_instances"]
    assert not measured.equals(before)  # the change reached its category's and the Overall rows
    differ = measured.loc[(measured.fillna(-1) != before.fillna(-1)).any(axis=1), "category"]
    assert category in set(differ) <= {category, "Average", "Overall"}
