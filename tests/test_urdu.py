"""The Urdu language module (tasks/text/languages/ur.py) and the sample's Urdu stand-ins and prompts."""

import csv
from pathlib import Path

import pytest

from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.text.languages import ur

AR_YEH, AR_KAF, AR_HEH, TEH_MARBUTA = "\u064a", "\u0643", "\u0647", "\u0629"
ZABAR, PESH, ZER, SHADDA, KHARI_ZABAR, HAMZA = "\u064e", "\u064f", "\u0650", "\u0651", "\u0670", "\u0654"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        (f"{AR_KAF}ون ا{AR_YEH}پ سے وقت ن{AR_HEH}{AR_YEH}ں لے س{AR_KAF}ا؟", "کون ایپ سے وقت نہیں لے سکا؟"),
        ("وہ بہت اچھى ہے۔", "وہ بہت اچھی ہے۔"),
        (f"ب{SHADDA}چ{ZABAR}ے نے ک{ZABAR}ہا", "بچے نے کہا"),
        (f"ا{PESH}س نے وزارت{ZER} تعلیم کو خط لکھا", "اس نے وزارت تعلیم کو خط لکھا"),
        (f"صلو{KHARI_ZABAR}ۃ", "صلوہ"),
        (f"زکو{KHARI_ZABAR}{TEH_MARBUTA}", "زکوہ"),
        ("اس کے پاس ۲۵ سال کا تجربہ ہے، وہ ۱۹۴۷ء میں پیدا ہوا", "اس کے پاس 25 سال کا تجربہ ہے، وہ 1947ء میں پیدا ہوا"),
        ("عمر ٣٠ سال", "عمر 30 سال"),
        (f"اسلامی جمہوریہ{HAMZA} پاکستان", "اسلامی جمہوریۂ پاکستان"),
        ("  بوڑھا\n\tآدمی  ", "بوڑھا آدمی"),
        ("مریض\u200cکا", "مریض\u200cکا"),
    ],
)
def test_normalize_gives_urdu_letters_ascii_digits_and_no_diacritics(raw: str, normalized: str) -> None:
    assert ur.normalize(raw) == normalized
    assert ur.normalize(normalized) == normalized


def test_normalize_keeps_the_letters_urdu_tells_apart() -> None:
    """ھ is not ہ (بھائی, not بہائی), ں not ن, آ not ا, ے not ی: none is merged into its look-alike."""
    text = "بھائی نے ہاں کہا، آدمی آئے۔"
    assert ur.normalize(text) == text


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("کون آیا؟ وہ، میں اور تم۔", ["کون", "آیا", "؟", "وہ", "،", "میں", "اور", "تم", "۔"]),
        ('اس نے کہا: "ٹھیک ہے"۔', ["اس", "نے", "کہا", ":", '"', "ٹھیک", "ہے", '"', "۔"]),
        ("اس کی عمر 30۔ قیمت 3.5 روپے؛", ["اس", "کی", "عمر", "30", "۔", "قیمت", "3.5", "روپے", "؛"]),
        ("مریض\u200cکا کمرہ (نمبر 12)!", ["مریض\u200cکا", "کمرہ", "(", "نمبر", "12", ")", "!"]),
    ],
)
def test_tokenize_splits_off_urdu_and_ascii_punctuation(text: str, tokens: list[str]) -> None:
    assert ur.tokenize(text) == tokens
    assert ur.words(tokens) == [token for token in tokens if token not in '۔،؟؛:"()!']


def test_stop_words_are_urduhacks_list_normalised() -> None:
    stop = ur.stop_words()
    assert len(stop) == 458
    assert {"کا", "کی", "کے", "ہے", "اور", "میں", "نہیں", "وہ"} <= stop
    assert all(ur.normalize(word) == word and not word.startswith("#") for word in stop)
    assert "آدمی" not in stop


def test_unknown_phrases_give_urdu_for_every_persian_phrasing() -> None:
    persian = [row["phrase_fa"] for row in _rows(REPO_ROOT / "annotations" / "unknown_phrases.csv")]
    phrases = ur.unknown_phrases()
    assert sorted(phrases) == sorted(persian)
    assert len(set(phrases.values())) == len(persian)
    assert all(ur.normalize(phrase) == phrase and "?" not in phrase for phrase in phrases.values())


@pytest.mark.parametrize(
    ("phrase", "gender"),
    [
        ("ستر سالہ آدمی", "male"),
        ("نوجوان لڑکی جو اپنے والد کے ساتھ رہتی ہے", "female"),
        ("دولہا کی ماں", "female"),
        ("لڑکی کا باپ", "male"),
        ("بوڑھی ٹیکسی ڈرائیور", "female"),
        ("بوڑھا ٹیکسی ڈرائیور", "male"),
        ("گاؤں کی ڈاکٹر", "female"),
        ("ٹیکسی چلانے والا", "male"),
        ("ٹیکسی ڈرائیور", "none"),
        ("بزرگ ریٹائرڈ شخص", "none"),
        ("نوجوان", "none"),
        ("والدین", "none"),
    ],
)
def test_entity_gender_reads_nouns_and_agreement(phrase: str, gender: str) -> None:
    assert ur.entity_gender(phrase) == gender


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("ستر سالہ آدمی", 70),
        ("70 سالہ آدمی", 70),
        ("۷۰ سالہ آدمی", 70),
        ("پچیس سال کی لڑکی", 25),
        ("دس برس کا بچہ", 10),
        ("اکیس سالہ طالب علم", 21),
        ("ننانوے سالہ خاتون", 99),
        ("دو سال پہلے", None),
        ("بوڑھا آدمی", None),
    ],
)
def test_explicit_age_reads_numbers_and_years(text: str, age: int | None) -> None:
    assert ur.explicit_age(text) == age


ENTITIES = {"بوڑھا آدمی": "male", "نوجوان لڑکی": "female", "ٹیکسی ڈرائیور": "none"}


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("بوڑھا آدمی ایپ انسٹال نہیں کر سکی اور کلرک سے مدد مانگتی رہی۔", ["سکی", "مانگتی", "رہی"]),
        ("بوڑھے آدمی نے بہت کوشش کی لیکن وہ ایپ انسٹال نہیں کر سکی۔", ["سکی"]),
        ("نوجوان لڑکی چند منٹ میں وقت لے چکا تھا۔", ["چکا", "تھا"]),
        ("نوجوان لڑکی بھی کل بینک جائے گا۔", ["گا"]),
        ("بوڑھا آدمی ایپ انسٹال نہیں کر سکا، لیکن نوجوان لڑکی نے چند منٹ میں وقت لے لیا۔", []),
        ("نوجوان لڑکی نے کھانا کھایا تھا۔", []),
        ("بوڑھے آدمی کی بیٹی بینک گئی۔", []),
        ("نوجوان لڑکی ہنستے ہوئے بینک گئی۔", []),
        ("بوڑھا آدمی اور نوجوان لڑکی قطار میں کھڑی تھی۔", []),
        ("ٹیکسی ڈرائیور بینک گئی۔", []),
        ("نوجوان لڑکی آئی تاکہ وہ جلدی جا سکے۔", []),
    ],
)
def test_gender_failures_flag_verbs_that_contradict_their_subjects_gender(text: str, flagged: list[str]) -> None:
    failures = ur.gender_failures(text, ENTITIES, "context")
    assert [failure.split("'")[1] for failure in failures] == flagged


def test_gender_failures_in_a_question_allow_only_the_masculine_for_anyone() -> None:
    assert ur.gender_failures("کون ایپ سے وقت نہیں لے سکا؟", ENTITIES, "question") == []
    [failure] = ur.gender_failures("کون ایپ سے وقت نہیں لے سکی؟", ENTITIES, "question")
    assert "'سکی' is feminine" in failure and "بوڑھا آدمی" in failure
    women = {"نوجوان لڑکی": "female", "بوڑھی عورت": "female"}
    assert ur.gender_failures("کون ایپ سے وقت نہیں لے سکی؟", women, "question") == []


def test_scaffold_and_glossary_column_are_urdu() -> None:
    assert (ur.code, ur.name, ur.glossary_column) == ("ur", "Urdu", "ur")
    assert ur.scaffold["question"] == "سوال" and ur.scaffold["answer"] == "جواب"
    assert ur.normalize(ur.scaffold["instruction"]) == ur.scaffold["instruction"]
    assert ur.mention_pattern("بوڑھا آدمی").search("بوڑھے آدمی نے کہا")
