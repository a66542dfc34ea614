"""BBQ's rules for the categories filled from a template's Names lists, the vocabulary within a subcategory or its
first names (nyu-mll/BBQ ``generate_from_template_all_categories.py``, ``utils.return_list_from_string``): Names
read with BBQ's quirks, the SES low/high contrast, proper names (a woman's with a man's for Gender_identity), the
stereotyped slot from NAME1_info/NAME2_info or the word's group, pairs with no contrast not built, and
Race_ethnicity's full names (a first and a last name of one ethnicity, the other of the same gender)."""

from __future__ import annotations

import pandas as pd
import pytest

from pbbq.tasks.adapt import adapt_instantiate
from pbbq.tasks.adapt.bbq_format import (
    fills_from_vocabulary,
    load_bbq_proper_names,
    load_bbq_templates,
    load_bbq_vocabulary,
    parse_names,
)
from pbbq.tasks.adapt.generate import AdaptInstantiateParams, ethnic_name_fillings, fillings
from pbbq.tasks.adapt.sheet import apply_classes, review_sheet
from tests.adapt_support import BBQ, VOCABULARY

NAMES = load_bbq_proper_names(BBQ / "vocabulary_proper_names.csv")
WORDS = load_bbq_vocabulary(VOCABULARY)


def _templates(category: str) -> pd.DataFrame:
    """BBQ's templates of a category, classed DT and applied (rows of ``apply_classes``), by template id."""
    sheet = review_sheet(load_bbq_templates(BBQ / f"templates-{category}.csv")).assign(**{"class": "DT"})
    return apply_classes(sheet)[0].set_index("template_id", drop=False)


@pytest.mark.parametrize(
    ("cell", "lists"),
    [
        ("NAME1: [old, elderly]; NAME2: [young]", (["old", "elderly"], ["young"])),
        ("{{NAME1}}: [deaf person; hard-of-hearing person]; {{NAME2}}: [welder]", (["deaf person"], ["welder"])),
        ("{{NAME1}}: [welder]; {{NAME2}}: [deaf person; hard-of-hearing person]", (["welder"], [])),
        ("NAME2: [a physical disability]; NAME1: [an acting background]", (["an acting background"], [])),
    ],
)
def test_names_are_read_as_bbqs_return_list_from_string_reads_them(
    cell: str, lists: tuple[list[str], list[str]]
) -> None:
    """Its quirks kept: a ';' inside a list ends it, and a part after the NAME2 list empties it (Disability 4b,
    19b: BBQ released no row of them)."""
    assert parse_names(cell) == lists


def test_bbqs_category_spellings_and_repeated_ids_load() -> None:
    templates = _templates("Gender_identity")
    assert set(templates["category"]) == {"Gender_identity"}
    assert {"Gender_identity-7", "Gender_identity-7#2"} <= set(templates.index)


def test_a_names_template_pairs_its_lists_and_its_info_marks_the_stereotyped_slot() -> None:
    """Age 1a: NAME1 grandchildren (nonOld), NAME2 grandparents (old, stereotyped); no flip (version b exists)."""
    units = fillings(_templates("Age").loc["Age-1a"], WORDS, NAMES)
    assert [len(unit) for unit in units] == [1] * 4
    assert {(f.name1, f.name2, f.stereo, f.stereo_group, f.other_group) for (f,) in units} == {
        (child, parent, parent, "old", "nonOld")
        for child in ("grandson", "granddaughter")
        for parent in ("grandfather", "grandmother")
    }


def test_ses_occupations_pair_low_with_high_in_both_orders() -> None:
    """SES: a word's partners are the words of the other Info (lowSES/highSES); Occupation templates flip."""
    units = fillings(_templates("SES").loc["SES-4"], WORDS, NAMES)
    info = dict(zip(WORDS["Name"], WORDS["Info"], strict=True))
    assignments = [(f.name1, f.name2) for unit in units for f in unit]
    assert len(assignments) == len(set(assignments)) == 2 * 12 * 12
    assert all(info[a] != info[b] for a, b in assignments)
    assert all(info[f.stereo] == "lowSES" and f.stereo_group == "low SES" for unit in units for f in unit)


def test_gender_identity_proper_names_pair_a_womans_name_with_a_mans_both_ways() -> None:
    gender = dict(zip(NAMES["Name"], NAMES["gender"], strict=True))
    units = fillings(_templates("Gender_identity").loc["Gender_identity-26"], WORDS, NAMES)
    assert len(units) == 20 * 20 and all(len(unit) == 2 for unit in units)
    for first, flipped in units:
        assert (flipped.name1, flipped.name2) == (first.name2, first.name1)
        assert {gender[first.name1], gender[first.name2]} == {"F", "M"}
        assert gender[first.stereo] == "F" == first.stereo_group


def test_other_proper_name_templates_pair_every_two_first_names_once_each_way() -> None:
    """SES 8a: BBQ samples 6 ethnicity-neutral first names and pairs them; enumerated, each pair once per order;
    NAME1_info (lowSES) keeps the stereotyped slot when the names exchange."""
    units = fillings(_templates("SES").loc["SES-8a"], WORDS, NAMES)
    assert len(units) == 40 * 39 // 2
    assert all(f.stereo_slot == "NAME1" for unit in units for f in unit)


def test_a_pair_with_no_contrast_is_not_built() -> None:
    """Gender_identity 13 has no subcategory, so BBQ pairs all four words (man, woman, boy, girl); with ["F"]
    stereotyped, man with boy and woman with girl contrast nothing."""
    units = fillings(_templates("Gender_identity").loc["Gender_identity-13"], WORDS, NAMES)
    assert {(f.name1, f.name2) for (f,) in units} == {(a, b) for a in ("man", "boy") for b in ("woman", "girl")} | {
        (b, a) for a in ("man", "boy") for b in ("woman", "girl")
    }


def test_answer_info_tags_the_groups_lm_evals_bbq_code_compares() -> None:
    """The stereotyped answer is tagged with its Known_stereotyped_groups group, the other with its own."""
    templates = _templates("Age").loc[["Age-1a"]].reset_index(drop=True)
    examples = adapt_instantiate(templates, WORDS, AdaptInstantiateParams(), NAMES)["examples"]
    for row in examples.itertuples():
        tags = {row.answer_roles[option]: row.answer_info[option][1] for option in ("ans0", "ans1", "ans2")}
        assert tags == {"stereotyped": "old", "non-stereotyped": "nonOld", "unknown": "unknown"}


def test_proper_name_templates_without_the_names_file_are_dropped_with_their_reason() -> None:
    templates = _templates("SES").loc[["SES-8a", "SES-1a"]].reset_index(drop=True)
    output = adapt_instantiate(templates, WORDS, AdaptInstantiateParams())
    assert output["dropped_templates"][["template_id", "reason"]].values.tolist() == [["SES-8a", "no_proper_names"]]
    assert set(output["examples"]["template_id"]) == {"SES-1a"}


def test_only_templates_without_names_or_proper_names_need_vocabulary_groups() -> None:
    """What ``pbbq adapt`` must check against the vocabulary: Age needs no group, SES only for its occupations."""
    assert not fills_from_vocabulary(load_bbq_templates(BBQ / "templates-Age.csv")).any()
    ses = load_bbq_templates(BBQ / "templates-SES.csv")
    assert set(ses.loc[fills_from_vocabulary(ses), "Subcategory"]) == {"Occupation"}


FIRST_GENDER = {(row.Name, row.ethnicity): row.gender for row in NAMES[NAMES["First_last"] == "first"].itertuples()}
"""BBQ's first names with an ethnicity (Amy is both White and Asian) → their gender."""
LAST_ETHNICITY = dict(NAMES.loc[NAMES["First_last"] == "last", ["Name", "ethnicity"]].itertuples(index=False))


def _person(full_name: str) -> tuple[str, str]:
    """A filled full name's ethnicity (its last name's) and gender (its first name's, of that ethnicity)."""
    first, last = full_name.split()
    return LAST_ETHNICITY[last], FIRST_GENDER[first, LAST_ETHNICITY[last]]


@pytest.mark.parametrize(
    ("template_id", "targets", "others"),
    [
        ("Race_ethnicity-28", {"Asian"}, {"Arab", "Black", "Latino", "White"}),
        ("Race_ethnicity-39", {"Black", "Latino"}, {"Arab", "Asian", "White"}),
    ],
)
def test_race_ethnicity_names_pair_a_stereotyped_ethnicity_with_another_of_the_same_gender(
    template_id: str, targets: set[str], others: set[str]
) -> None:
    """BBQ's rule on its own rows: 28 (["Asian"]) and 39 (["Native American", "African American", "Hispanic",
    "Latino", "Black"], of which the names file has Black and Latino): NAME1 a first name of a stereotyped ethnicity
    with a last name of that ethnicity, NAME2 a first name of the same gender and an ethnicity not stereotyped with
    a last name of its own, every such pair of first names once, and the pair exchanged."""
    units = fillings(_templates("Race_ethnicity").loc[template_id], WORDS, NAMES)
    assert len(units) == 2 * (10 * len(targets)) * (10 * len(others))
    pairs = set()
    for first, flipped in units:
        assert (flipped.name1, flipped.name2, flipped.stereo_slot) == (first.name2, first.name1, "NAME2")
        (stereo_ethnicity, stereo_gender), (other_ethnicity, other_gender) = map(_person, (first.name1, first.name2))
        assert stereo_ethnicity in targets and other_ethnicity in others and stereo_gender == other_gender
        assert (first.stereo, first.stereo_group, first.other_group) == (first.name1, stereo_ethnicity, other_ethnicity)
        pairs.add((first.name1.split()[0], stereo_ethnicity, first.name2.split()[0], other_ethnicity))
    assert len(pairs) == len(units)


def test_race_ethnicity_last_names_rotate_through_each_ethnicitys_list() -> None:
    """BBQ draws each last name at random; the port rotates them, so a first name meets several last names and
    every last name of an ethnicity is used."""
    units = fillings(_templates("Race_ethnicity").loc["Race_ethnicity-28"], WORDS, NAMES)
    used = {name for first, _ in units for name in (first.name1, first.name2)}
    lasts = NAMES[NAMES["First_last"] == "last"]
    assert {name.split()[1] for name in used} == set(lasts["Name"])
    assert len({name.split()[1] for name in used if name.startswith(units[0][0].name1.split()[0] + " ")}) > 1


def test_race_ethnicity_names_need_a_last_name_of_the_stereotyped_ethnicity() -> None:
    """Without an Asian last name, template 28 (["Asian"]) has no name to build and is dropped as no pair."""
    names = NAMES[~((NAMES["First_last"] == "last") & (NAMES["ethnicity"] == "Asian"))]
    template = _templates("Race_ethnicity").loc[["Race_ethnicity-28"]].reset_index(drop=True)
    assert ethnic_name_fillings(template.iloc[0], names) == []
    output = adapt_instantiate(template, WORDS, AdaptInstantiateParams(), names)
    assert output["dropped_templates"][["template_id", "reason"]].values.tolist() == [
        ["Race_ethnicity-28", "no_group_pair"]
    ]


def test_race_ethnicity_examples_read_as_bbqs_with_the_ethnicities_tagged() -> None:
    """Template 28 filled: the full names in the context and the options, each tagged with its ethnicity (BBQ's
    ``M-Asian``, read by lm-eval's BBQ code as the ethnicity)."""
    template = _templates("Race_ethnicity").loc[["Race_ethnicity-28"]].reset_index(drop=True)
    examples = adapt_instantiate(template, WORDS, AdaptInstantiateParams(), NAMES)["examples"]
    assert len(examples) == 800 * 2 * 4
    for row in examples.head(40).itertuples():
        entities = sorted([row.stereo_entity, row.nonstereo_entity], key=row.context.index)
        assert row.context.startswith("The police pulled over a car with {} and {} for".format(*entities))
        for option, (text, tag) in row.answer_info.items():
            role = row.answer_roles[option]
            if role != "unknown":
                assert tag == _person(text)[0] == ("Asian" if role == "stereotyped" else tag)
