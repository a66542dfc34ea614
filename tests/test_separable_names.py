"""The names stage split by template (``Stage.per``): a build in which one template changed names that template's
examples only, and every table and the report are what the stage gives on whole tables, whatever was kept: the
proxy strength of a category measured on every template's groups, names drawn apart across templates that read
alike."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pbbq.tasks import names
from pbbq.tasks.core.artifacts import ArtifactStore
from pbbq.tasks.core.separated import separated
from pbbq.tasks.core.stage import finish
from pbbq.tasks.core.stored import KeptInput
from tests.separable_support import assert_same_output, first_run, sample_arguments

STAGE = names.STAGE
PER = STAGE.per


@pytest.fixture(scope="module")
def names_arguments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sample build's arguments of the names stage (its examples, name table, params)."""
    return sample_arguments(STAGE.folder, tmp_path_factory.mktemp("sample"))


def _templates(examples: pd.DataFrame, first_half: bool) -> pd.DataFrame:
    """The examples of the first (or the second) half of the templates."""
    templates = sorted(set(examples["template_id"]))
    half = templates[: len(templates) // 2]
    return examples[examples["template_id"].isin(half) == first_half]


def test_the_sample_split_by_template_is_the_whole_table_stage(names_arguments: dict[str, Any], tmp_path: Path) -> None:
    """Every table and the report equal the whole-table stage's, computed at once, from kept parts, or half and
    half (the first half of the templates kept from a build that had only them, its categories' groups fewer)."""
    assert PER is not None
    expected = names.names(**names_arguments)
    store = ArtifactStore(tmp_path / "store")
    halved = names_arguments | {"examples": _templates(names_arguments["examples"], first_half=True)}
    assert_same_output(separated(PER, halved, store)[0], names.names(**halved))
    n = names_arguments["examples"]["template_id"].nunique()
    output, parts = separated(PER, names_arguments, store)
    assert_same_output(output, expected)
    assert 0 < parts["computed"] < n and parts["of"] == n
    output, parts = separated(PER, names_arguments, store)
    assert_same_output(output, expected)
    assert parts["computed"] == 0


def test_one_changed_template_of_the_sample_recomputes_its_rows_only(
    names_arguments: dict[str, Any], tmp_path: Path
) -> None:
    """The stage's report (hence its manifest entry and progress line) counts the templates and rows it named."""
    store = ArtifactStore(tmp_path / "store")
    run, fresh = first_run(STAGE, names_arguments, store)
    variants = fresh.tables(store)["examples"]
    n = names_arguments["examples"]["template_id"].nunique()
    lexical = variants.groupby("template_id")["lexical_variant"].nunique()
    template_id = str(lexical[lexical > 1].index.max())
    examples = names_arguments["examples"]
    own = examples["template_id"] == template_id
    last = variants.loc[variants["template_id"] == template_id, "source_example_id"].iloc[-1]
    variant = examples.loc[examples["example_id"] == last, "lexical_variant"].iloc[0]
    changed = names_arguments | {"examples": examples[~(own & (examples["lexical_variant"] == variant))]}
    again = run(**changed)
    tables = again.tables(store)
    named = int((tables["examples"]["template_id"] == template_id).sum())
    assert 0 < named < len(tables["examples"]) < len(variants)
    assert again.report["parts"]["computed"] == 1 and again.report["parts"]["of"] == n
    assert again.report["parts"]["rows"] == [named, len(tables["examples"])]
    whole = finish(STAGE, names.names(**changed), changed["params"])
    for name, frame in whole.tables.items():
        pd.testing.assert_frame_equal(tables[name], frame, check_exact=True)
    assert {key: value for key, value in again.report.items() if key != "parts"} == whole.report


def test_templates_that_read_alike_draw_their_names_apart_whichever_was_kept(
    names_arguments: dict[str, Any], tmp_path: Path
) -> None:
    """A template whose examples read as another's once named (a copy under another id) takes other names than the
    one kept from a build without it, as on whole tables."""
    assert PER is not None
    examples = names_arguments["examples"]
    original = sorted(set(names.names(**names_arguments).tables["examples"]["template_id"]))[0]
    rows = examples[examples["template_id"] == original]
    copy = rows.assign(template_id=f"{original}-copy", example_id=rows["example_id"] + "-copy")
    one, both = (
        names_arguments | {"examples": rows},
        names_arguments | {"examples": pd.concat([rows, copy], ignore_index=True)},
    )
    store = ArtifactStore(tmp_path / "store")
    separated(PER, one, store)
    output, parts = separated(PER, both, store)
    assert parts["computed"] == 1  # the copy; the draws across the two then made on whole tables
    assert output.report["parts"]["computed"] == output.report["parts"]["of"] == 2  # what the run and report say
    expected = names.names(**both)
    assert_same_output(output, expected)
    drawn = expected.tables["examples"].groupby("template_id")["context"].apply(frozenset)
    assert drawn[original].isdisjoint(drawn[f"{original}-copy"])


def test_every_template_reads_the_groups_of_its_whole_category(names_arguments: dict[str, Any]) -> None:
    """The proxy strength of a category is measured on the groups every template of it names: each template's part
    reads all of them, so a template kept is named again when another changes its category's groups."""
    assert PER is not None and PER.spread is not None and PER.local is not None
    hook = PER.hook_arguments(names_arguments) | {
        "examples": names_arguments["examples"]
    }  # the examples and the parameter object
    measured = PER.spread(**hook, **PER.local(**hook))["measured"]
    whole = names.names(**names_arguments).tables["proxy_strength"]
    for (lang, category), rows in measured.groupby(["lang", "category"]):
        groups = set(whole.loc[(whole["lang"] == lang) & (whole["category"] == category), "group"])
        for template_id, own in rows.groupby("template_id"):
            assert set(own["group"]) == groups, template_id
    assert measured.groupby(["lang", "category"])["template_id"].nunique().max() > 1


def test_a_build_input_checked_against_changed_templates_keeps_every_part(
    names_arguments: dict[str, Any], tmp_path: Path
) -> None:
    """The name table is checked against the templates, so its key as a build input changes with any template; the
    parts are kept by the table itself, which is the same."""
    assert PER is not None
    store = ArtifactStore(tmp_path / "store")
    table = names_arguments["name_table"]
    for key, computed in (("checked against the templates", "all"), ("checked against one changed template", 0)):
        kept = KeptInput(key, lambda path: table, None)
        output, parts = separated(PER, names_arguments | {"name_table": kept}, store)
        assert parts["computed"] == (parts["of"] if computed == "all" else computed)
    assert_same_output(output, names.names(**names_arguments))


def test_a_changed_template_alone_is_rewritten_again_for_the_groups_of_its_category(
    names_arguments: dict[str, Any], tmp_path: Path
) -> None:
    """The groups each template names (the spread's ``local`` tables) are kept per template: a build in which one
    template changed rewrites that template's examples only to measure its category, and names as on whole tables."""
    assert PER is not None and PER.local is not None
    given: list[set[str]] = []

    def local(**arguments: Any) -> Any:
        given.append(set(arguments["examples"]["template_id"]))
        return PER.local(**arguments)

    per = dataclasses.replace(PER, local=local)
    store = ArtifactStore(tmp_path / "store")
    examples = names_arguments["examples"]
    separated(per, names_arguments, store)
    template_id = str(examples["template_id"].max())
    changed = names_arguments | {"examples": examples.drop(examples.index[examples["template_id"] == template_id][-1])}
    output, parts = separated(per, changed, store)
    assert given == [set(examples["template_id"]), {template_id}]
    assert parts["computed"] >= 1
    assert_same_output(output, names.names(**changed))
