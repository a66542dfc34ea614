"""The Persian text pipeline: every normalisation rule, idempotence, tokenisation, stop words."""

import random

import pytest

from pbbq.tasks.text.languages import is_punctuation, language
from pbbq.tasks.text.languages.en import tokenize_en
from pbbq.tasks.text.languages.fa import ZWNJ, normalize_fa, tokenize_fa


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("علي", "علی"),  # Arabic yeh U+064A
        ("مصطفى", "مصطفی"),  # alef maksura U+0649
        ("كتاب", "کتاب"),  # Arabic kaf U+0643
        ("۱۳۴۰ و ١٣٤٠ و 1340", "1340 و 1340 و 1340"),  # Persian, Arabic-Indic and ASCII digits
        ("کَتِبُ", "کتب"),  # fatha, kasra, damma
        ("کتابً کتابٌ کتابٍ", "کتاب کتاب کتاب"),  # tanwin
        ("مدّت سُکْون", "مدت سکون"),  # shadda, sukun
        ("رحمٰن", "رحمن"),  # superscript alef
        ("زیبـــا", "زیبا"),  # tatweel
        (f"می{ZWNJ}{ZWNJ}{ZWNJ}رود", f"می{ZWNJ}رود"),  # repeated ZWNJ collapsed
        (f"کتاب{ZWNJ} ها", "کتاب ها"),  # ZWNJ before a space dropped
        (f"کتاب {ZWNJ}ها", "کتاب ها"),  # ZWNJ after a space dropped
        (f"{ZWNJ}سلام{ZWNJ}", "سلام"),  # ZWNJ at either end dropped
        ("می\u200bرود", f"می{ZWNJ}رود"),  # zero-width space -> ZWNJ
        ("می\u200dرود", "میرود"),  # zero-width joiner removed
        ("\ufeffسلام", "سلام"),  # BOM removed
        ("\u200fسلام\u200e", "سلام"),  # bidi marks removed
        ("  سلام \t\n  دنیا\u00a0 ", "سلام دنیا"),  # whitespace collapsed, NBSP included, stripped
        (f"الف {ZWNJ}\u200b ب", "الف ب"),  # a run of spaces and zero-widths is one space
        ("", ""),
    ],
)
def test_each_normalisation_rule(raw: str, expected: str) -> None:
    assert normalize_fa(raw) == expected


def test_letters_hazm_leaves_alone_stay() -> None:
    # teh marbuta, heh with yeh above and hamza forms are not rewritten (hazm's table leaves them too)
    assert normalize_fa("خانۀ مدرسة مسئول") == "خانۀ مدرسة مسئول"


@pytest.mark.parametrize(
    "raw",
    [
        "  كتابِ عليّ ۱۲۳ و ٤٥  \u200c\u200cمی\u200c\u200cرود\u200c  ، زیبـــا \u200b\u200d\ufeff",
        f"\u200b{ZWNJ} \u200b",
        "\u200d\u200c \u200c\u200d",
        "يك مرد كُرد ۳۰ ساله، دیروز به بازار رفت.",
    ],
)
def test_normalisation_is_idempotent(raw: str) -> None:
    once = normalize_fa(raw)
    assert normalize_fa(once) == once


def test_normalisation_invariants_on_random_strings() -> None:
    # seeded random strings over the characters the rules touch: the output never holds a mapped character,
    # two ZWNJs in a row, a ZWNJ beside a space, two spaces, or a space or ZWNJ at either end; a second pass
    # changes nothing
    alphabet = [*"اب ی\t\n", ZWNJ, "\u200b", "\u200d", "\ufeff", "\u064e", "\u0640", "ي", "ك", "۱", "٢"]
    rng = random.Random(11)
    for _ in range(2000):
        once = normalize_fa("".join(rng.choices(alphabet, k=rng.randint(0, 12))))
        assert normalize_fa(once) == once
        assert not set(once) & {"\t", "\n", "\u200b", "\u200d", "\ufeff", "\u064e", "\u0640", "ي", "ك", "۱", "٢"}
        for bad in (ZWNJ * 2, f" {ZWNJ}", f"{ZWNJ} ", "  "):
            assert bad not in once
        assert once == once.strip(" " + ZWNJ)


def test_real_sentences() -> None:
    assert normalize_fa("پدرِ علي كه ۴۵ سال دارد، ديروز به مدرسه رفت.") == (
        "پدر علی که 45 سال دارد، دیروز به مدرسه رفت."
    )
    assert normalize_fa(f"آنها نمي{ZWNJ}{ZWNJ}دانند كه   اين كار درست است") == (
        f"آنها نمی{ZWNJ}دانند که این کار درست است"
    )


def test_persian_tokens_keep_words_and_split_punctuation() -> None:
    text = normalize_fa("او گفت: «من می‌روم»، علی, نرفت؛ آیا 30 سال دارد؟")
    assert tokenize_fa(text) == [
        "او",
        "گفت",
        ":",
        "«",
        "من",
        "می\u200cروم",
        "»",
        "،",
        "علی",
        ",",
        "نرفت",
        "؛",
        "آیا",
        "30",
        "سال",
        "دارد",
        "؟",
    ]
    # verb parts are not joined into new tokens (hazm's default would give 'گفته_شده_است')
    assert tokenize_fa("گفته شده است") == ["گفته", "شده", "است"]


def test_english_tokens_are_sacrebleus_13a() -> None:
    expected = ["The", "nurse", "said", ":", '"', "I", "can't", "come", ",", '"', "then", "left", "."]
    assert tokenize_en('The nurse said: "I can\'t come," then left.') == expected
    assert tokenize_en("It costs 3.5 or 1,000 dollars.") == ["It", "costs", "3.5", "or", "1,000", "dollars", "."]


def test_each_language_tokenizes_with_its_own_tokenizer() -> None:
    assert language("en").tokenize("a, b") == ["a", ",", "b"]
    assert language("fa").tokenize("الف، ب") == ["الف", "،", "ب"]
    with pytest.raises(ValueError, match="unknown language 'de'"):
        language("de")


def test_words_drop_punctuation_and_lowercase_english() -> None:
    assert is_punctuation("«") and is_punctuation("?!") and is_punctuation("...")
    assert not is_punctuation("30") and not is_punctuation("می\u200cروم")
    assert language("en").words(["The", "cat", ",", "the", "."]) == ["the", "cat", "the"]
    assert language("fa").words(["او", "؟", "گفت", "»"]) == ["او", "گفت"]


def test_stop_words() -> None:
    persian = language("fa").stop_words
    assert {"و", "در", "به", "از", "که", "این"} <= persian
    assert "مدرسه" not in persian
    assert all(normalize_fa(word) == word for word in persian)
    english = language("en").stop_words
    assert len(english) == 179
    assert {"the", "a", "of", "don't"} <= english and "nurse" not in english
