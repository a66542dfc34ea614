"""The person-cue table: the gender and age band of an entity, read as a Persian or English reader would."""

from __future__ import annotations

import pytest

from tasks.cues import NONE, age_bands_differ, entity_age_band, entity_gender, explicit_age, genders_differ


@pytest.mark.parametrize(
    ("entity", "gender", "band"),
    [
        ("مرد هفتادساله", "male", "old"),
        ("مرد هفتاد ساله", "male", "old"),
        ("پیرزن هشتادساله", "female", "old"),
        ("پدربزرگ بازنشسته", "male", "old"),
        ("مرد بیست‌وپنج‌ساله", "male", "young"),
        ("دختر دانشجو", "female", "young"),
        ("پسر نوزده‌ساله", "male", "teen"),
        ("نوجوان هفده‌ساله", NONE, "teen"),
        ("آقای میان‌سال", "male", "middle"),
        ("زن چهل‌ساله", "female", "middle"),
        ("کودک", NONE, "child"),
        ("پسر", "male", "youth"),
        ("مرد لر", "male", "adult"),
        ("راننده‌ی زن", "female", "adult"),
        ("بازیگر مرد هم‌جنس‌گرا", "male", "adult"),
        ("مادر داماد", "female", NONE),
        ("مادرشوهر", "female", NONE),
        ("شوهر", "male", NONE),
        ("همسر", NONE, NONE),
        ("پسری که با مادر مطلقه‌اش زندگی می‌کند", "male", "youth"),
        ("دانشجوی اصفهانی", NONE, "young"),
        ("کارمند بانک", NONE, NONE),
        ("مهمان جشن عروسی", NONE, NONE),
    ],
)
def test_persian_entities(entity: str, gender: str, band: str) -> None:
    assert (entity_gender(entity, "fa"), entity_age_band(entity, "fa")) == (gender, band)


@pytest.mark.parametrize(
    ("entity", "gender", "band"),
    [
        ("seventy-year-old man", "male", "old"),
        ("a 25-year-old woman", "female", "young"),
        ("female student", "female", "young"),
        ("the mother of the groom", "female", NONE),
        ("the groom's mother", "female", NONE),
        ("Azerbaijani man", "male", "adult"),
        ("teenager", NONE, "teen"),
        ("bank clerk", NONE, NONE),
    ],
)
def test_english_entities(entity: str, gender: str, band: str) -> None:
    assert (entity_gender(entity, "en"), entity_age_band(entity, "en")) == (gender, band)


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
    assert explicit_age(text, lang) == age


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
        (NONE, "old", False),
        ("old", NONE, False),
    ],
)
def test_age_bands_differ(first: str, second: str, differ: bool) -> None:
    assert age_bands_differ(first, second) is differ
    assert age_bands_differ(second, first) is differ


def test_genders_differ_only_when_both_are_known() -> None:
    assert genders_differ("male", "female") and not genders_differ("male", "male")
    assert not genders_differ(NONE, "female") and not genders_differ("male", NONE)
