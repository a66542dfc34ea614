"""The translate stage split by template (``Stage.per``): a build in which one template changed translates that
template's segments and assembles its examples only, and every table and the report are what the stage gives on
whole tables, whatever was kept, for English and for Urdu."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pbbq.tasks import translate
from pbbq.tasks.core.artifacts import REPO_ROOT, ArtifactStore, StageOutput
from pbbq.tasks.core.separated import separated
from pbbq.tasks.core.stage import Stage, finish
from tests.separable_support import assert_same_output, first_run, sample_arguments

USAGE = ("llm", "parts")
"""What a split stage's report says of this run alone: the LLM requests it made and the parts it computed."""
TARGETS = {"en": (translate.STAGE, None), "ur": (translate.translate_stage("ur", first=False), "sample-ur.toml")}


@pytest.fixture(scope="module", params=sorted(TARGETS))
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Stage, dict[str, Any]]:
    """A translate stage of the sample (English; Urdu, ``configs/sample-ur.toml``) and its arguments."""
    stage, config = TARGETS[request.param]
    scratch = tmp_path_factory.mktemp(request.param)
    return stage, sample_arguments(stage.folder, scratch, config and REPO_ROOT / "configs" / config)


def _one_variant_less(examples: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The examples without the last lexical variant of the last template that has two or more (as the paper-scale
    benchmark changes one template), and that template's id."""
    variants = examples.groupby("template_id")["lexical_variant"].nunique()
    template_id = str(variants[variants > 1].index.max())
    own = examples["template_id"] == template_id
    last = examples.loc[own, "lexical_variant"].iloc[-1]
    return examples[~(own & (examples["lexical_variant"] == last))].reset_index(drop=True), template_id


def test_the_sample_split_by_template_is_the_whole_table_stage(
    target: tuple[Stage, dict[str, Any]], tmp_path: Path
) -> None:
    """Every table and the report equal the whole-table stage's, computed at once, from kept parts, or half and
    half (the first half of the templates kept from a build that had only them)."""
    stage, sample = target
    assert stage.per is not None
    expected = translate.translate(**sample)
    store = ArtifactStore(tmp_path / "store")
    examples = sample["examples"]
    templates = sorted(set(examples["template_id"]))
    first_half = templates[: len(templates) // 2]
    halved = sample | {"examples": examples[examples["template_id"].isin(first_half)]}
    assert_same_output(separated(stage.per, halved, store)[0], translate.translate(**halved), besides=USAGE)
    for computed in (len(templates) - len(first_half), 0):  # half kept, then all
        output, parts = separated(stage.per, sample, store)
        assert_same_output(output, expected, besides=USAGE)
        assert parts["computed"] == computed and parts["of"] == len(templates)


def test_one_changed_template_of_the_sample_recomputes_its_rows_only(
    target: tuple[Stage, dict[str, Any]], tmp_path: Path
) -> None:
    """The stage's report (hence its manifest entry and progress line) counts the templates and rows it computed,
    and its LLM usage the requests of that template's segments alone."""
    stage, sample = target
    store = ArtifactStore(tmp_path / "store")
    run, fresh = first_run(stage, sample, store)
    rows = len(fresh.tables(store)["examples"])
    n = sample["examples"]["template_id"].nunique()
    examples, template_id = _one_variant_less(sample["examples"])
    changed = sample | {"examples": examples}
    hits = fresh.report["llm"]["cache_hits"]
    again = run(**changed)
    tables = again.tables(store)
    own = int((tables["examples"]["template_id"] == template_id).sum())
    assert 0 < own < len(tables["examples"]) < rows
    assert again.report["parts"]["computed"] == 1 and again.report["parts"]["of"] == n
    assert again.report["parts"]["rows"] == [own, len(tables["examples"])]
    segments = tables["segments"]
    asked = again.report["llm"]["cache_hits"] - hits
    assert 0 < asked < len(segments)  # a request per segment of its own, and back-translations: not every segment
    whole = finish(stage, translate.translate(**changed), changed["params"])
    assert_same_output(StageOutput(tables, {}, again.report), whole, besides=USAGE)


def test_a_question_is_checked_against_the_entities_of_every_template_that_asks_it(
    target: tuple[Stage, dict[str, Any]],
) -> None:
    """The segments a template's part reads: a question is one row per template asking it, each with the entities of
    all of them, and a context's entity phrases come with it."""
    stage, sample = target
    assert stage.per is not None and stage.per.spread is not None and stage.per.local is not None
    hook = stage.per.hook_arguments(sample) | {"examples": sample["examples"]}  # the examples and the parameter object
    spread = stage.per.spread(**hook, **stage.per.local(**hook))["segments"]
    table = spread.drop(columns="template_id").drop_duplicates("segment_id")
    questions = spread[spread["kind"] == "question"]
    shared = questions.groupby("segment_id")["template_id"].nunique()
    assert (shared > 1).any()
    for segment_id in shared[shared > 1].index:
        entities = {tuple(e) for e in questions.loc[questions["segment_id"] == segment_id, "entities"]}
        assert len(entities) == 1
    for template_id, rows in spread.groupby("template_id"):
        phrases = set(rows.loc[rows["kind"] == "entity", "text_fa"])
        told = {e for kind, es in zip(rows["kind"], rows["entities"], strict=True) if kind == "context" for e in es}
        assert told <= phrases, template_id
    assert len(table) == table["segment_id"].nunique()


def test_a_changed_template_alone_makes_its_segments_again_for_the_segment_table(
    target: tuple[Stage, dict[str, Any]], tmp_path: Path
) -> None:
    """Each template's own segments (the spread's ``local`` table) are kept per template: a build in which one
    template changed makes that template's segments only, and its tables are the whole-table stage's."""
    stage, sample = target
    per = stage.per
    assert per is not None and per.local is not None
    local_of = per.local
    given: list[set[str]] = []

    def local(**arguments: Any) -> Any:
        given.append(set(arguments["examples"]["template_id"]))
        return local_of(**arguments)

    split = dataclasses.replace(per, local=local)
    store = ArtifactStore(tmp_path / "store")
    separated(split, sample, store)
    changed, template_id = _one_variant_less(sample["examples"])
    output, _ = separated(split, sample | {"examples": changed}, store)
    assert given == [set(sample["examples"]["template_id"]), {template_id}]
    assert_same_output(output, translate.translate(**sample | {"examples": changed}), besides=USAGE)
