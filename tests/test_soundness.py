"""The build's soundness checks: each breaks on the one defect it names, and a sound build reads 0 everywhere."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pytest

from pbbq.flows.pipeline import ADAPT_PIPELINE, PIPELINE
from pbbq.tasks.core.soundness import CHECKS, SOUNDNESS, row_violations, soundness
from pbbq.tasks.instantiate import InstantiateParams, instantiate
from pbbq.tasks.statistics import source_language
from tests.templates import STEREOTYPES, set_entity, template_row


@pytest.fixture(scope="module")
def two_templates_built() -> tuple[pd.DataFrame, pd.DataFrame]:
    templates = pd.DataFrame(
        [
            template_row("T1", category="Ethnicity", stereo_entities=["مرد لر"], nonstereo_entities=["مرد فارس"]),
            template_row("T2", category="Gender", stereo_entities=["زن جوان"], nonstereo_entities=["مرد جوان"]),
        ]
    )
    return instantiate(templates, STEREOTYPES, InstantiateParams(("نمی‌دانم",)))["examples"], templates


def _violations(examples: pd.DataFrame, templates: pd.DataFrame) -> dict[str, int]:
    table = soundness(examples, templates)
    return dict(zip(table["check"], table["violations"], strict=True))


def _first(column: str, value: Callable[[object], object]) -> Callable[[pd.DataFrame], None]:
    def change(frame: pd.DataFrame) -> None:
        frame.at[0, column] = value(frame.at[0, column])

    return change


def _swap_label(frame: pd.DataFrame) -> None:
    frame.at[0, "label"] = (frame.at[0, "label"] + 1) % 3


def _duplicate(frame: pd.DataFrame) -> None:
    example_id = frame.at[1, "example_id"]
    frame.loc[1] = frame.loc[0]
    frame.at[1, "example_id"] = example_id


def _mixed_pair(frame: pd.DataFrame) -> None:
    set_entity(frame, frame["template_id"] == "T1", "زن فارس")


BREAKS = {
    "duplicate_example": _duplicate,
    "unfilled_placeholder": _first("context", lambda text: text + " {lex}"),
    "label_role": _swap_label,
    "target_loc": _first("target_loc", lambda loc: (loc + 1) % 3),
    "answer_info_text": _first("answer_info", lambda info: {**info, "ans0": ["x", info["ans0"][1]]}),
    "gender_confound": _mixed_pair,
}


def test_a_sound_build_has_no_violation(two_templates_built: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    examples, templates = two_templates_built
    table = soundness(examples, templates)
    assert list(table["check"]) == list(CHECKS) and set(table["config"]) == {"fa"}
    assert table["violations"].sum() == 0 and (table["examples"] == len(examples)).all()


@pytest.mark.parametrize("check", BREAKS)
def test_each_check_finds_its_defect(two_templates_built: tuple[pd.DataFrame, pd.DataFrame], check: str) -> None:
    examples, templates = two_templates_built
    broken = examples.copy()
    BREAKS[check](broken)
    violations = _violations(broken, templates)
    assert violations[check] >= 1
    assert {name: n for name, n in violations.items() if n} == {check: violations[check]}


def test_age_confound_outside_age_and_allowed_pairs(two_templates_built: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    examples, templates = two_templates_built
    broken = examples.copy()
    set_entity(broken, broken["template_id"] == "T2", "آقای میان‌سال")
    assert _violations(broken, templates)["age_confound"] == (broken["template_id"] == "T2").sum()
    allowed = templates.assign(allowed_pairs=[[], ["زن جوان|آقای میان‌سال|same office"]])
    assert _violations(broken, allowed)["age_confound"] == 0


def test_each_config_is_checked_apart_and_confounds_only_in_original_persian_rows(
    two_templates_built: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    """The same rows in three configs are no duplicates of each other; a mixed-gender pair is a confound only in the
    original Persian rows (the English and the name-proxy rows keep the Persian pair they were made from)."""
    examples, templates = two_templates_built
    mixed = examples.copy()
    _mixed_pair(mixed)
    english = mixed.assign(lang="en")
    names = mixed.assign(variant="names-7271")
    table = soundness(pd.concat([examples, english, names], ignore_index=True), templates)
    assert list(table["config"]) == ["fa"] * len(CHECKS) + ["en"] * len(CHECKS) + ["fa-names"] * len(CHECKS)
    assert list(table["check"]) == list(CHECKS) * 3
    assert (table["examples"] == len(examples)).all()
    assert table["violations"].sum() == 0


def test_a_check_counts_every_broken_row(two_templates_built: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    examples, templates = two_templates_built
    broken = examples.copy()
    for row in (0, 5, 9):
        broken.at[row, "context"] += " {lex}"
    for row in (1, 2):
        broken.at[row, "label"] = (broken.at[row, "label"] + 1) % 3
    violations = _violations(broken, templates)
    assert (violations["unfilled_placeholder"], violations["label_role"]) == (3, 2)


def test_age_bands_may_differ_in_the_age_category_only() -> None:
    old_and_young = template_row("A1", category="Age", stereo_entities=["پیرمرد"], nonstereo_entities=["مرد جوان"])
    templates = pd.DataFrame([old_and_young])
    examples = instantiate(templates, STEREOTYPES, InstantiateParams(("نمی‌دانم",)))["examples"]
    assert len(examples) == 2 * 12  # one pair, two lexical variants
    assert _violations(examples, templates)["age_confound"] == 0
    assert _violations(examples.assign(category="Religion"), templates)["age_confound"] == len(examples)


def test_genders_may_differ_in_the_gender_category_only(two_templates_built: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    examples, templates = two_templates_built
    gender = examples[examples["template_id"] == "T2"]  # 'زن جوان' and 'مرد جوان'
    assert _violations(gender, templates)["gender_confound"] == 0
    assert _violations(gender.assign(category="Religion"), templates)["gender_confound"] == len(gender)


def test_confounds_are_found_wherever_the_persian_rows_stand_in_the_table(
    two_templates_built: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    """The original Persian config after another one: its rows' index does not start at 0."""
    examples, templates = two_templates_built
    mixed = examples.copy()
    _mixed_pair(mixed)  # T1 (Ethnicity): 'مرد لر' and 'زن فارس', genders differ
    set_entity(mixed, mixed["template_id"] == "T2", "آقای میان‌سال")  # T2 (Gender): young and middle
    table = soundness(pd.concat([mixed.assign(lang="en"), mixed], ignore_index=True), templates)
    persian = table[table["config"] == "fa"].set_index("check")["violations"]
    n_t1, n_t2 = (examples["template_id"] == "T1").sum(), (examples["template_id"] == "T2").sum()
    assert (persian["gender_confound"], persian["age_confound"]) == (n_t1, n_t2) == (24, 24)
    assert table.loc[table["config"] == "en", "violations"].sum() == 0


def test_an_empty_build_gives_an_empty_table_with_its_columns(
    two_templates_built: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    examples, templates = two_templates_built
    table = soundness(examples.iloc[0:0], templates)
    assert table.empty and list(table.columns) == SOUNDNESS.names


def test_each_check_is_a_flag_per_row_of_the_config(two_templates_built: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """row_violations gives one boolean per row of the config it is given, indexed as its rows (here not from 0)."""
    examples, _ = two_templates_built
    frame = examples.iloc[10:30]
    flags = row_violations(frame, set())
    assert list(flags) == list(CHECKS)
    for check, flag in flags.items():
        assert flag.index.equals(frame.index) and flag.dtype == bool, check


def _english(examples: pd.DataFrame, english: dict[str, str]) -> pd.DataFrame:
    """English rows of the Ethnicity template's Persian examples, each entity by ``english``."""
    persian = examples[examples["template_id"] == "T1"]
    return persian.assign(
        example_id=persian["example_id"] + "-en",
        source_example_id=persian["example_id"],
        lang="en",
        stereo_entity=persian["stereo_entity"].map(english),
        nonstereo_entity=persian["nonstereo_entity"].map(english),
    )


def test_an_english_row_may_not_add_a_gender_its_persian_does_not_give(
    two_templates_built: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    """«مرد لر» is a man: 'Lur man' keeps it, 'Lur merchant' loses it; «مرد فارس» as 'Persian businessman' keeps
    it by the compound's morphology, as 'Persian workwoman' gives another."""
    examples, templates = two_templates_built
    cases = {
        ("Lur man", "Persian man"): 0,
        ("Lur man", "Persian businessman"): 0,
        ("Lur merchant", "Persian man"): 24,  # 12 examples of each lexical variant
        ("Lur man", "Persian workwoman"): 24,
    }
    for (lur, persian), violations in cases.items():
        english = _english(examples, {"مرد لر": lur, "مرد فارس": persian})
        table = soundness(pd.concat([examples, english], ignore_index=True), templates)
        counts = table[table["config"] == "en"].set_index("check")["violations"]
        assert counts["gender_added"] == violations and counts.drop("gender_added").sum() == 0, (lur, persian)


def test_the_source_language_is_the_pipelines_not_always_persian(
    two_templates_built: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    """On the adaptation path the originals are BBQ's English, whose entity columns hold the group ('Nigerian')
    and whose options the person ('The Nigerian man'): the confound checks read them in English and a translation
    is checked against them (before, every check selected Persian rows only and read 0 there)."""
    examples, templates = two_templates_built
    english = examples.assign(lang="en")
    every = english["example_id"].notna()
    set_entity(english, every, "The Nigerian person", "stereotyped")
    set_entity(english, every, "The Afghan person")
    english = english.assign(stereo_entity="Nigerian", nonstereo_entity="Afghan")
    mixed = english.copy()
    t1 = mixed["template_id"] == "T1"  # Ethnicity: the pair may differ in nothing else
    set_entity(mixed, t1, "The Nigerian man", "stereotyped")
    set_entity(mixed, t1, "The Afghan woman")
    mixed = mixed.assign(stereo_entity="Nigerian", nonstereo_entity="Afghan")
    assert _violations(mixed, templates)["gender_confound"] == 0  # read as Persian, nothing was checked
    found = soundness(mixed, templates, source="en").set_index("check")["violations"]
    assert found["gender_confound"] == t1.sum()
    urdu = english.assign(lang="ur", source_example_id=english["example_id"], nonstereo_entity="افغان شخص")
    # 'The Nigerian person' gives no gender; «شخص» is a person, «آدمی» a man
    for stereo, added in (("نائجیرین شخص", 0), ("نائجیرین آدمی", len(urdu))):
        both = pd.concat([english, urdu.assign(stereo_entity=stereo)], ignore_index=True)
        table = soundness(both, templates, source="en")
        assert table.query("config == 'ur' and check == 'gender_added'")["violations"].item() == added
    assert source_language(ADAPT_PIPELINE.configs) == "en" and source_language(PIPELINE.configs) == "fa"
