"""A stage that splits by template (``Stage.per``): a build in which one template changed computes that template's
rows only, and the stage's tables are what the whole-table stage gives, whatever was kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pbbq.tasks import instantiate
from pbbq.tasks.core.artifacts import ArtifactStore, StageOutput
from pbbq.tasks.core.caching import stage_task
from pbbq.tasks.core.run_folder import StageRecord
from pbbq.tasks.core.separated import separated
from pbbq.tasks.core.stage import Pipeline, Separable, Stage, Table, finish
from pbbq.tasks.core.stored import StoredStage
from tests.separable_support import assert_same_output, sample_arguments
from tests.templates import STEREOTYPES, template_row

STAGE = instantiate.STAGE
PER = STAGE.per
PHRASES = ("نمی‌توان گفت", "مشخص نیست")


@pytest.fixture(scope="module")
def instantiate_arguments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sample build's arguments of the instantiate stage (its disambiguated templates, stereotypes, params)."""
    return sample_arguments(STAGE.folder, tmp_path_factory.mktemp("sample"))


def _changed(templates: pd.DataFrame, template_id: str) -> pd.DataFrame:
    """The templates with one template's negative question reworded (it still passes every check)."""
    changed = templates.copy()
    at = changed["template_id"] == template_id
    changed.loc[at, "question_negative_fa"] = changed.loc[at, "question_negative_fa"] + " دقیقاً"
    return changed


def test_the_sample_split_by_template_is_the_whole_table_stage(
    instantiate_arguments: dict[str, Any], tmp_path: Path
) -> None:
    """Every table and the report equal the whole-table stage's, computed at once, from kept parts, or half and
    half (the first half of the templates kept from a build that had only them)."""
    assert PER is not None
    expected = instantiate.instantiate(**instantiate_arguments)
    store = ArtifactStore(tmp_path / "store")
    templates = instantiate_arguments["templates"]
    first_half = sorted(templates["template_id"])[: len(templates) // 2]
    halved = instantiate_arguments | {"templates": templates[templates["template_id"].isin(first_half)]}
    assert separated(PER, halved, store)[1]["computed"] == len(first_half)
    for computed in (len(templates) - len(first_half), 0):  # half kept, then all
        output, parts = separated(PER, instantiate_arguments, store)
        assert_same_output(output, expected)
        assert parts["computed"] == computed and parts["of"] == len(templates)


def test_one_changed_template_of_the_sample_recomputes_its_rows_only(
    instantiate_arguments: dict[str, Any], tmp_path: Path
) -> None:
    """The stage's report (hence its manifest entry) counts the templates and rows it computed."""
    store = ArtifactStore(tmp_path / "store")
    run = stage_task(STAGE, instantiate_arguments["params"], store).fn
    fresh = run(**instantiate_arguments)
    assert isinstance(fresh, StoredStage)
    rows = len(fresh.tables(store)["examples"])
    n = len(instantiate_arguments["templates"])
    assert fresh.report["parts"] == {
        "key": "template_id",
        "computed": n,
        "of": n,
        "table": "examples",
        "rows": [rows, rows],
    }
    template_id = fresh.tables(store)["examples"]["template_id"].iloc[-1]
    changed = instantiate_arguments | {"templates": _changed(instantiate_arguments["templates"], template_id)}
    again = run(**changed)
    own = int((again.tables(store)["examples"]["template_id"] == template_id).sum())
    assert 0 < own < rows
    assert again.report["parts"]["computed"] == 1 and again.report["parts"]["of"] == n
    assert again.report["parts"]["rows"] == [own, rows]
    whole = finish(STAGE, instantiate.instantiate(**changed), changed["params"])
    for name, frame in whole.tables.items():
        pd.testing.assert_frame_equal(again.tables(store)[name], frame, check_exact=True)
    assert {key: value for key, value in again.report.items() if key != "parts"} == whole.report


def test_a_duplicate_across_templates_is_dropped_whichever_template_was_kept(tmp_path: Path) -> None:
    """Two templates that give the same examples: the later one's are dropped as duplicates (a check across
    templates, in ``whole``), also when the earlier one was kept from a build without the later one."""
    assert PER is not None
    params = instantiate.InstantiateParams(PHRASES)
    first, second = template_row("T1"), template_row("T2")
    store = ArtifactStore(tmp_path / "store")
    separated(PER, {"templates": pd.DataFrame([first]), "stereotypes": STEREOTYPES, "params": params}, store)
    both = {"templates": pd.DataFrame([second, first]), "stereotypes": STEREOTYPES, "params": params}
    output, parts = separated(PER, both, store)
    assert parts["computed"] == 1
    assert_same_output(output, instantiate.instantiate(**both))
    assert set(output.tables["dropped_examples"]["reason"]) == {"duplicate_example"}


def test_new_parameters_or_other_tables_recompute_every_template(
    instantiate_arguments: dict[str, Any], tmp_path: Path
) -> None:
    assert PER is not None
    store = ArtifactStore(tmp_path / "store")
    separated(PER, instantiate_arguments, store)
    reseeded = instantiate_arguments | {
        "params": instantiate.InstantiateParams(instantiate_arguments["params"].unknown_phrases, seed=7)
    }
    output, parts = separated(PER, reseeded, store)
    assert parts["computed"] == parts["of"]
    assert_same_output(output, instantiate.instantiate(**reseeded))
    fewer = instantiate_arguments | {
        "stereotypes": instantiate_arguments["stereotypes"].iloc[::-1].reset_index(drop=True)
    }
    assert separated(PER, fewer, store)[1]["computed"] == parts["of"]


def test_a_stage_splits_only_tables_it_reads() -> None:
    per = Separable("template_id", ("rules",), dict, lambda parts, **_: StageOutput({}, {}, {}))
    stage = Stage("99_x", "x", lambda: StageOutput({}, {}, {}), inputs={"t": Table("01_t", "t")}, outputs={}, per=per)
    first = Stage("01_t", "t", lambda: StageOutput({}, {}, {}), inputs={}, outputs={})
    with pytest.raises(ValueError, match="pipeline: stage 99_x splits rules, not a table it reads"):
        Pipeline((first, stage))


def test_the_progress_line_says_how_many_templates_and_rows_were_computed() -> None:
    parts = {
        "key": "template_id",
        "computed": 1,
        "of": 276,
        "table": "examples",
        "rows": [142, 39276],
    }
    report = {"counts": {"in": 276, "out": 39276}, "dropped": {"total": 9}, "parts": parts}
    line = StageRecord("instantiate", "05_instantiate", False, {}, [], report).summary()
    assert line.endswith("9 dropped (recomputed: 1 of 276 template_id, 142 of 39276 examples)")
    assert StageRecord("instantiate", "05_instantiate", True, {}, [], report).summary().endswith("(cached)")
