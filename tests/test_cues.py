"""The person-cue table: the gender and age band of an entity, read as a Persian or English reader would."""

from __future__ import annotations

import pytest

from pbbq.tasks.text.cues import NONE, age_bands_differ, entity_age_band, genders_differ
from pbbq.tasks.text.languages import language
from pbbq.tasks.text.languages.en import english_word_gender

pytestmark = pytest.mark.usefixtures("fresh_cue_caches")


@pytest.mark.parametrize(
    ("lang", "entity", "gender_and_band"),
    [
        ("fa", "مرد هفتادساله", ("male", "old")),
        ("fa", "مرد هفتاد ساله", ("male", "old")),
        ("fa", "پیرزن هشتادساله", ("female", "old")),
        ("fa", "پدربزرگ بازنشسته", ("male", "old")),
        ("fa", "مرد بیست‌وپنج‌ساله", ("male", "young")),
        ("fa", "دختر دانشجو", ("female", "young")),
        ("fa", "پسر نوزده‌ساله", ("male", "teen")),
        ("fa", "نوجوان هفده‌ساله", (NONE, "teen")),
        ("fa", "آقای میان‌سال", ("male", "middle")),
        ("fa", "زن چهل‌ساله", ("female", "middle")),
        ("fa", "کودک", (NONE, "child")),
        ("fa", "پسر", ("male", "youth")),
        ("fa", "مرد لر", ("male", "adult")),
        ("fa", "راننده‌ی زن", ("female", "adult")),
        ("fa", "بازیگر مرد هم‌جنس‌گرا", ("male", "adult")),
        ("fa", "مادر داماد", ("female", NONE)),
        ("fa", "مادرشوهر", ("female", NONE)),
        ("fa", "شوهر", ("male", NONE)),
        ("fa", "همسر", (NONE, NONE)),
        ("fa", "پسری که با مادر مطلقه‌اش زندگی می‌کند", ("male", "youth")),
        ("fa", "دانشجوی اصفهانی", (NONE, "young")),
        ("fa", "کارمند بانک", (NONE, NONE)),
        ("fa", "مهمان جشن عروسی", (NONE, NONE)),
        ("en", "seventy-year-old man", ("male", "old")),
        ("en", "a 25-year-old woman", ("female", "young")),
        ("en", "female student", ("female", "young")),
        ("en", "the mother of the groom", ("female", NONE)),
        ("en", "the groom's mother", ("female", NONE)),
        ("en", "Azerbaijani man", ("male", "adult")),
        ("en", "teenager", (NONE, "teen")),
        ("en", "bank clerk", (NONE, NONE)),
    ],
)
def test_an_entitys_gender_and_age_band(lang: str, entity: str, gender_and_band: tuple[str, str]) -> None:
    assert (language(lang).entity_gender(entity), entity_age_band(entity, lang)) == gender_and_band


@pytest.mark.parametrize(
    ("text", "lang", "age"),
    [
        ("هفتادساله", "fa", 70),
        ("بیست‌وپنج‌ساله", "fa", 25),
        ("بیست و پنج ساله", "fa", 25),
        ("هجده‌ساله", "fa", 18),
        ("یازده ساله", "fa", 11),
        ("۴۵ ساله", "fa", 45),
        ("seventy-year-old", "en", 70),
        ("twenty-five-year-old", "en", 25),
        ("a 12-year-old", "en", 12),
        ("سالمند", "fa", None),
    ],
)
def test_explicit_ages(text: str, lang: str, age: int | None) -> None:
    assert language(lang).explicit_age(text) == age


@pytest.mark.parametrize(
    ("first", "second", "differ"),
    [
        ("youth", "adult", True),
        ("young", "adult", False),
        ("teen", "youth", False),
        ("old", "youth", True),
        ("child", "adult", True),
        ("young", "middle", True),
        ("teen", "young", True),
        ("old", "old", False),
        (NONE, "old", True),  # an age stated for one entity only
        ("young", NONE, True),
        (NONE, "adult", False),  # 'کارگر' against 'مرد': both adults
        (NONE, NONE, False),
    ],
)
def test_age_bands_differ(first: str, second: str, differ: bool) -> None:
    assert age_bands_differ(first, second) is differ
    assert age_bands_differ(second, first) is differ


def test_genders_differ_when_different_or_stated_for_one_only() -> None:
    assert genders_differ("male", "female") and not genders_differ("male", "male")
    assert genders_differ(NONE, "female") and genders_differ("male", NONE)
    assert not genders_differ(NONE, NONE)


@pytest.mark.parametrize(
    ("entity", "band"),
    [
        ("a 12-year-old", "child"),
        ("a 13-year-old", "teen"),
        ("a 19-year-old", "teen"),
        ("a 20-year-old", "young"),
        ("a 39-year-old", "young"),
        ("a 40-year-old", "middle"),
        ("a 59-year-old", "middle"),
        ("a 60-year-old", "old"),
    ],
)
def test_an_age_on_a_band_edge_falls_in_the_band_it_ends_or_starts(entity: str, band: str) -> None:
    """AGE_BANDS: child ≤ 12, teen 13–19, young 20–39, middle-aged 40–59, old ≥ 60 (each last year included)."""
    assert entity_age_band(entity, "en") == band


def test_a_head_noun_is_not_cut_to_a_cue_word_unless_it_ends_in_the_indefinite_ye() -> None:
    """'مردم' (people) is not 'مرد' (man) plus a suffix: only an indefinite ی is dropped from the head noun."""
    assert (language("fa").entity_gender("مردم شهر الف"), entity_age_band("مردم شهر الف", "fa")) == (NONE, NONE)
    assert (language("fa").entity_gender("زنی که آنجا بود"), entity_age_band("زنی که آنجا بود", "fa")) == (
        "female",
        "adult",
    )


@pytest.mark.parametrize("lang", ["fa", "en"])
def test_an_empty_entity_has_no_cue(lang: str) -> None:
    assert (language(lang).entity_gender(""), entity_age_band("", lang)) == (NONE, NONE)
    assert (language(lang).entity_gender("  "), entity_age_band("  ", lang)) == (NONE, NONE)


def test_an_english_head_comes_last_so_a_possessor_gives_no_gender() -> None:
    assert language("en").entity_gender("the boy's mother") == "female"
    assert language("en").entity_gender("the girl's father") == "male"


@pytest.mark.parametrize(
    ("word", "gender"),
    [
        *[(w, "male") for w in ("businessman", "repairman", "chairman", "Chairmen", "cameraman", "schoolboy")],
        *[(w, "female") for w in ("woman", "businesswoman", "chairwoman", "sportswomen", "schoolgirl", "housewife")],
        *[(w, None) for w in ("human", "German", "Germans", "Roman", "Oman", "Turkmen", "specimen", "merchant")],
        ("mother-in-law", "female"),
        ("middle-aged", None),
        ("ex-serviceman", "male"),
    ],
)
def test_an_english_word_is_gendered_by_its_morphology(word: str, gender: str | None) -> None:
    """A compound on -man, -woman, -boy, -girl, -wife carries that gender; 'woman' is not read as a '-man'
    compound, and the short list of exceptions ('human', 'German', 'Turkmen') carries none."""
    assert english_word_gender(word) == gender


def test_an_english_compound_gives_its_entity_a_gender() -> None:
    assert language("en").entity_gender("Indian businessman") == "male"
    assert language("en").entity_gender("mobile phone repairman") == "male"
    assert language("en").entity_gender("young working woman") == "female"
    assert language("en").entity_gender("German tourist") == language("en").entity_gender("Indian merchant") == NONE
    assert language("en").entity_gender("Omani human rights lawyer") == NONE
