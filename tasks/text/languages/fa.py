"""Persian: the one Persian text pipeline (normalisation, hazm tokens, stop words; docs/architecture.md §7) and its
person cues; the word lists are in ``fa.toml``.

Every loader normalises every Persian text field once with :func:`normalize_fa`; nothing later normalises again.
hazm is imported lazily, so a loader that only normalises does not pay for importing it.
"""

from __future__ import annotations

import os
import re
from functools import cache
from typing import TYPE_CHECKING

from ...imports import one_import_at_a_time
from . import Language, gender_table, load_data

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hazm import WordTokenizer

# Persian text is normalised with one translate table and two compiled regexes, not hazm's Normalizer: its
# options cannot do what §7 asks without also rewriting words (``correct_spacing`` re-tokenises and joins
# affixes, ``seperate_mi`` inserts half-spaces, ``persian_style`` changes quotes and ``persian_numbers`` turns
# ASCII digits into Persian ones), and its letter table is always applied. Letters hazm's table also leaves
# alone stay as they are: ة (teh marbuta), ۀ (heh with yeh above), hamza forms.
ZWNJ = "\u200c"

_LETTERS = {
    "\u064a": "\u06cc",  # ي Arabic yeh -> ی Farsi yeh
    "\u0649": "\u06cc",  # ى Arabic alef maksura -> ی Farsi yeh
    "\u0643": "\u06a9",  # ك Arabic kaf -> ک keheh
}
# Arabic-Indic ٠-٩ and extended Arabic-Indic (Persian) ۰-۹ both become ASCII 0-9: the fa and en configs then
# carry the very same numerals (ages, years, counts), so the translation checks compare equal strings, BBQ tooling
# and regexes written as [0-9] read them, and a count-based metric never sees ۳۰ and 30 as two words. (TARAZ
# §5.2 unifies on Persian digits instead; either canonical form serves matching, ASCII also serves the en side.)
_DIGITS = {chr(base + i): str(i) for base in (0x0660, 0x06F0) for i in range(10)}
# Diacritics: tanwin fathatan, dammatan, kasratan, fatha, damma, kasra, shadda, sukun (U+064B-U+0652), the
# superscript alef (U+0670) and the tatweel (U+0640), which only stretches a letter.
_DELETED = [chr(c) for c in range(0x064B, 0x0653)] + ["\u0670", "\u0640"]
# Invisible format characters: the zero-width joiner (Persian letters join by default, so it changes nothing a
# reader sees), the BOM / zero-width no-break space, the word joiner, the soft hyphen and the bidi marks and
# embeddings that copy-paste leaves behind (LRM, RLM, ALM, LRE..RLO, LRI..PDI).
_DELETED += ["\u200d", "\ufeff", "\u2060", "\u00ad", "\u200e", "\u200f", "\u061c"]
_DELETED += [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)]
# The zero-width space breaks cursive joining as the ZWNJ does; in Persian text it stands for a half-space.
_TRANSLATION = str.maketrans({**_LETTERS, **_DIGITS, **dict.fromkeys(_DELETED), "\u200b": ZWNJ})
# A character the table changes: most texts (every one normalised before) hold none, and finding that out is
# some thirty times cheaper than ``str.translate``, which looks up every character.
_TRANSLATED = re.compile("[" + "".join(re.escape(chr(code)) for code in _TRANSLATION) + "]")
# A run of whitespace and ZWNJs holding any whitespace becomes one space (a ZWNJ next to a space is useless).
_SPACE_RUN = re.compile(r"\u200c*\s[\s\u200c]*")
_ZWNJ_RUN = re.compile(r"\u200c{2,}")


def normalize_fa(text: str) -> str:
    """Normalise a Persian text field once, at load (docs/architecture.md §7; the rules TARAZ §5.2 lists, but
    ASCII digits).

    Arabic ي/ى → ی and ك → ک; Arabic-Indic and Persian digits → ASCII 0-9; Arabic diacritics, superscript
    alef and tatweel removed; ZWJ, BOM, word joiner, soft hyphen and bidi marks removed and the zero-width space
    turned into a ZWNJ; repeated ZWNJs collapsed to one, a ZWNJ next to whitespace or at either end dropped;
    every run of whitespace (newlines included) collapsed to one space; the result stripped. Idempotent.
    """
    if _TRANSLATED.search(text):
        text = text.translate(_TRANSLATION)
    text = _SPACE_RUN.sub(" ", text)
    return _ZWNJ_RUN.sub(ZWNJ, text).strip(" " + ZWNJ)


# hazm's tokenizer splits off Persian punctuation, ? ! . : brackets and quotes, but leaves ASCII , ; and the
# ellipsis character stuck to the word before them; they are spaced out first so 'علی,' is the word 'علی'.
_UNSPLIT_PUNCTUATION = re.compile(r"[,;…]")


@cache
def _hazm_tokenizer() -> WordTokenizer:
    """The one hazm WordTokenizer, built once (``word_tokenize`` builds one on every call). ``join_verb_parts=False``
    keeps the text's words: the default joins verb parts into new tokens such as 'گفته_شده_است'. Its word list
    (0.5 s to read) serves only that joining, so it is given none. The replace_* options stay off, so links and
    numbers stay as written."""
    with one_import_at_a_time():
        from hazm import WordTokenizer

    return WordTokenizer(words_file=os.devnull, join_verb_parts=False)


def tokenize_fa(text: str) -> list[str]:
    """Tokens of a normalised Persian text with hazm's WordTokenizer, punctuation tokens included.

    Words keep their ZWNJ (می‌رود is one token). No token holds whitespace, so joining with spaces and
    splitting again gives the same tokens (what sacrebleu's ``tokenize='none'`` sees).
    """
    spaced = _UNSPLIT_PUNCTUATION.sub(r" \g<0> ", text)
    return " ".join(_hazm_tokenizer().tokenize(spaced)).split()  # a token holding whitespace split as well


def _stop_words() -> Iterable[str]:
    """hazm's ``stopwords_list()``, normalised with :func:`normalize_fa`."""
    with one_import_at_a_time():
        from hazm import stopwords_list

    return (normalize_fa(word) for word in stopwords_list())


_DATA = load_data(__file__)
_PERSON_GENDER = gender_table(_DATA["person_gender"])
_KIN_GENDER: dict[str, str | None] = {
    word: None if gender == "either" else gender for word, gender in gender_table(_DATA["kin_gender"]).items()
}
_AGE_WORDS = gender_table(_DATA["age_words"])
_NUMBERS: dict[str, int] = _DATA["numbers"]
_NUMBER = "|".join(sorted(_NUMBERS, key=len, reverse=True))
_AGE = re.compile(rf"((?:(?:{_NUMBER})(?:\s*و\s*|\u200cو|و)?)+|\d+)\s*\u200c?ساله")
_CLAUSE = re.compile(r"\s(?:که|با|از)\s")


def explicit_age(text: str) -> int | None:
    """The age a Persian entity states ('هفتادساله', 'مرد بیست‌وپنج ساله', '45 ساله'), if any."""
    match = _AGE.search(normalize_fa(text))
    if match is None:
        return None
    number = match.group(1).replace(ZWNJ, "")
    return int(number) if number.isdigit() else sum(_NUMBERS[w] for w in re.findall(_NUMBER, number))


def head_words(text: str) -> list[str]:
    """The words of a Persian entity's head phrase, head first: a relative clause or a complement names other people
    ('پسری که با مادر مطلقه‌اش زندگی می‌کند' is a boy), so it is cut off. The head noun's indefinite ی ('پسری')
    is read as its noun."""
    words = _CLAUSE.split(f" {normalize_fa(text)} ", maxsplit=1)[0].split()
    table = {**_PERSON_GENDER, **_KIN_GENDER, **_AGE_WORDS}
    head = words[0] if words else ""
    if head not in table and head.endswith("ی") and head[:-1] in table:
        words[0] = head[:-1]  # 'پسری که …': the indefinite head noun, never a later word ('جشن عروسی')
    return words


def lemma(word: str) -> str:
    """A Persian noun without its ezafe or indefinite ی ('خانواده‌ی', 'دانشجوی', 'پسری' → the noun)."""
    for suffix in ("\u200cی", "\u200cای", "ی"):
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            return word[: -len(suffix)]
    return word


LANGUAGE = Language(
    code="fa",
    name="Persian",
    script=re.compile(r"[\u0600-\u06ff]"),
    script_name="Arabic",
    identify_as="fa",
    normalize=normalize_fa,
    tokenize=tokenize_fa,
    head_words=head_words,
    explicit_age=explicit_age,
    scaffold={"question": "پرسش", "answer": "پاسخ", "instruction": "فقط حرف یکی از گزینه‌ها را بنویسید."},
    glossary_column="term_fa",
    unknown_column="phrase_fa",
    load_stop_words=_stop_words,
    person_gender=_PERSON_GENDER,
    kin_gender=_KIN_GENDER,
    age_words=_AGE_WORDS,
    maturity=gender_table(_DATA["maturity"]),
    spouses=frozenset(_DATA["spouses"]),
    role_nouns=gender_table(_DATA["role_nouns"]),
    collective_nouns=frozenset(_DATA["collective_nouns"]),
    plural_suffixes=tuple(_DATA["plural_suffixes"]),
    status_words={
        word: (entry.get("status", word), frozenset(entry["categories"]))
        for entry in _DATA["status_words"]
        for word in entry["words"]
    },
    lemma=lemma,
    own_letters="\u0647\u06c0",
)
