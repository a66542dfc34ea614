"""Soundness blocks a release (issue 35 item 5): an example with a placeholder left unfilled, two options alike or
one entity twice is dropped, with its check as its reason, by the stage that makes it (on both paths) and named in
the run's manifest; a config that still holds one when the statistics stage checks it fails the build in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.sheet_blowup import english_config
from pbbq.flows.cli import main
from pbbq.tasks.adapt import ADAPT_INSTANTIATE, adapt_instantiate
from pbbq.tasks.adapt.generate import AdaptInstantiateParams
from pbbq.tasks.core.schemas import to_arrow
from pbbq.tasks.core.soundness import UnsoundRelease, manifest_warnings, unsound_drops
from pbbq.tasks.core.stage import finish
from pbbq.tasks.instantiate import InstantiateParams, instantiate
from pbbq.tasks.statistics import statistics
from tests.adapt_support import SAMPLE_SHEET, SAMPLE_VOCABULARY, vocabulary
from tests.templates import STEREOTYPES, template_row
from tests.test_adapt_generate import _template
from tests.test_instantiate import PHRASES

GATED = {"n_items": 4, "n_annotators": 3, "kappa": 1.0, "kappa_note": "", "mean_relevance": 3.0, "kept": True}


def _adapted(**cells: object) -> pd.DataFrame:
    return pd.DataFrame([_template(**cells)]).assign(**GATED, reason="")


@pytest.mark.parametrize(
    ("cells", "groups", "reasons"),
    [
        ({"question_negative": "Who is the {NAME1}?"}, ("Atheist", "Muslim"), {"unfilled_placeholder": 8}),
        ({"answer_negative": "The {{NAME1}} {lex}"}, ("Atheist", "Muslim"), {"unfilled_placeholder": 16}),
        ({"answer_non_negative": "The {{NAME2}} [[x]]"}, ("Atheist", "Muslim"), {"unfilled_placeholder": 16}),
        ({}, ("Atheist", "{x}"), {"unfilled_placeholder": 16}),  # a group named {x}
        # a group named {{NAME2}}: in NAME1's slot both options are 'The Atheist person', in NAME2's it stays
        ({}, ("Atheist", "{{NAME2}}"), {"identical_options": 8, "unfilled_placeholder": 8}),
    ],
)
def test_adaptation_drops_an_unsound_example_with_its_reason(
    cells: dict[str, str], groups: tuple[str, str], reasons: dict[str, int]
) -> None:
    templates = _adapted(stereotyped_groups=[groups[0]], other_groups=[groups[1]], restricted=False, **cells)
    params = AdaptInstantiateParams()
    made = adapt_instantiate(templates, vocabulary(("Religion", "Hindu")), params)
    output = finish(ADAPT_INSTANTIATE, made, params)
    for name, table in output.tables.items():
        to_arrow(table, output.schemas[name], name)
    dropped = sum(reasons.values())
    assert len(output["examples"]) == 16 - dropped and len(output["dropped_examples"]) == dropped
    assert output["dropped_examples"]["reason"].value_counts().to_dict() == reasons
    assert output.report["dropped"]["by_reason"] == reasons
    counts = ", ".join(f"{reason} {n}" for reason, n in reasons.items())
    assert output.report["manifest_warnings"] == [f"dropped {dropped} unsound example(s) ({counts}): never released"]


def test_pbbq_drops_a_pair_whose_entities_are_one() -> None:
    template = template_row("T1", stereo_entities=["مرد پیر"], nonstereo_entities=["مرد پیر", "مرد جوان"])
    output = instantiate(pd.DataFrame([template]), STEREOTYPES, InstantiateParams(PHRASES))
    dropped = output["dropped_examples"]
    assert set(dropped["reason"]) == {"equal_entities"} and len(dropped) == 2 * 12
    assert (output["examples"]["nonstereo_entity"] == "مرد جوان").all() and len(output["examples"]) == 2 * 12
    assert output.report["manifest_warnings"] == ["dropped 24 unsound example(s) (equal_entities 24): never released"]


def test_a_sound_build_says_nothing() -> None:
    output = instantiate(pd.DataFrame([template_row("T1")]), STEREOTYPES, InstantiateParams(PHRASES))
    assert output["dropped_examples"].empty and "manifest_warnings" not in output.report
    assert manifest_warnings(unsound_drops(output["examples"])[1]) == []


def test_statistics_refuses_a_config_holding_an_unsound_row() -> None:
    params = AdaptInstantiateParams()
    examples = adapt_instantiate(_adapted(), vocabulary(*[("Religion", n) for n in ("Atheist", "Muslim")]), params)
    en = examples["examples"]
    translated = en.assign(lang="ur", source_example_id=en["example_id"], ans1=en["ans0"])  # two options alike
    with pytest.raises(UnsoundRelease) as error:
        statistics(pd.DataFrame({"template_id": [], "category": []}), pd.concat([en, translated], ignore_index=True))
    assert str(error.value) == (
        f"statistics: {len(en)} of {len(en)} ur examples fail identical_options (first: {en.at[0, 'example_id']}): "
        "a release never holds such a row; the stage that made them must drop it"
    )


def test_an_unsound_drop_enters_the_manifest(prefect_server: None, tmp_path: Path) -> None:
    words = SAMPLE_VOCABULARY.read_text(encoding="utf-8").rstrip("\n")
    vocabulary_file = tmp_path / "vocabulary.csv"
    vocabulary_file.write_text(words + "\nReligion,,,{x},\n", encoding="utf-8")  # a group named {x}
    config = english_config(SAMPLE_SHEET, tmp_path / "build.toml", None)
    text = config.read_text(encoding="utf-8").replace(str(SAMPLE_VOCABULARY.resolve()), str(vocabulary_file))
    config.write_text(text, encoding="utf-8")
    assert main(["build", "--config", str(config), "--outputs", str(tmp_path / "out"), "--run-id", "r"]) == 0
    run = tmp_path / "out" / "r"
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert (
        "05_instantiate dropped 8 unsound example(s) (unfilled_placeholder 8): never released" in manifest["warnings"]
    )
    dropped = pd.read_parquet(run / "05_instantiate" / "dropped_examples.parquet")
    assert set(dropped["reason"]) == {"unfilled_placeholder"} and dropped["context"].str.contains("{x}").all()
    released = pd.read_parquet(next((run / "10_publish" / "hub" / "data" / "en").glob("*.parquet")))
    assert not released[["context", "ans0", "ans1", "ans2"]].apply(lambda c: c.str.contains("{x}")).any(axis=None)
