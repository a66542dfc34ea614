"""Urdu (``ur``): normalisation, tokenisation, stop words, gender and age cues, the gender check of a translation
into Urdu, the 'unknown' phrasings and the lm-eval prompt's words (docs/architecture.md §7; docs/urdu.md says
which libraries were compared and why these were chosen).

- **Normalisation**: urdunorm's character pipeline (NFC, presentation forms folded, hamza composed, Arabic letter
  forms ي ى ك ه ة → Urdu ی ک ہ, controls and tatweel removed), with diacritics removed and every numeral system
  turned into ASCII digits, as the Persian side does (TARAZ §5.2); an author's ZWNJ is kept.
- **Tokenisation**: sacrebleu's international tokenizer (Unicode punctuation split off), Urdu ۔ ، ؟ ؛ spaced out
  first, since the tokenizer leaves punctuation stuck to a digit before it ('30۔').
- **Gender**: Urdu has no gendered pronoun (وہ is either), but verbs, adjectives and the genitive agree with the
  gender of their noun (تھا/تھی, رہا/رہی, گیا/گئی, کرتا/کرتی, اچھا/اچھی, کا/کی): an entity phrase is read by its
  person and kin nouns and by the agreement of its words, and a translation by the agreement of its verbs with
  their subject (:func:`gender_failures`).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from sacrebleu.tokenizers.tokenizer_intl import TokenizerV14International
from urdunorm import Protocol, apply_protocol, integer_to_words

DATA = Path(__file__).with_suffix("")
"""This language's data files: ``ur/stop_words.txt``, ``ur/unknown_phrases.csv``."""

code = "ur"
name = "Urdu"
script = r"[\u0621-\u064a\u0671-\u06d3]"
"""The Arabic-script letters Urdu writes (ٹ ڈ ڑ ں ھ ہ ی ے among them), not its punctuation or digits."""
glossary_column = "ur"
scaffold = {"question": "سوال", "answer": "جواب", "instruction": "صرف کسی ایک آپشن کا حرف لکھیں۔"}
"""The words around the question in the lm-eval prompt (``سوال:`` … ``جواب:``)."""

FEMALE, MALE, NONE = "female", "male", "none"

# ----------------------------------------------------------------------------- normalisation and tokenisation

_PROTOCOL = Protocol(name="pbbq-ur", remove_diacritics=True, unify_digits=True, digit_target="ascii", zwnj="keep")
"""urdunorm's ``display`` pipeline plus its diacritic and digit steps; punctuation stays, spaces are not
repaired (a text keeps its words as written)."""
_URDU_PUNCTUATION = re.compile(r"[۔،؟؛]")
_NON_WORD = re.compile(r"[\W_]+")


def normalize(text: str) -> str:
    """An Urdu text field in one canonical form (see the module docstring); whitespace runs become one space, the
    result is stripped. Idempotent. Text typed on an Arabic keyboard writes ه for both ہ and ھ: it becomes ہ
    (بهت → بہت, right; كها → کہا where کھا was meant, wrong: only a lexicon could tell)."""
    return apply_protocol(text, _PROTOCOL)


@cache
def _tokenizer() -> TokenizerV14International:
    return TokenizerV14International()


def tokenize(text: str) -> list[str]:
    """Tokens of a normalised Urdu text, punctuation tokens included; no token holds whitespace."""
    return _tokenizer()(_URDU_PUNCTUATION.sub(r" \g<0> ", text)).split()


def words(tokens: Sequence[str]) -> list[str]:
    """The words among :func:`tokenize`'s tokens: punctuation tokens left out (Urdu has no case)."""
    return [token for token in tokens if _NON_WORD.fullmatch(token) is None]


@cache
def stop_words() -> frozenset[str]:
    """Stop words removed before TTR (PBBQ Appendix C.2): urduhack's list (``ur/stop_words.txt``), normalised."""
    lines = (DATA / "stop_words.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(normalize(line) for line in lines if line.strip() and not line.startswith("#"))


@cache
def unknown_phrases() -> dict[str, str]:
    """The Urdu of each Persian 'unknown' phrasing (``annotations/unknown_phrases.csv``'s ``phrase_fa``)."""
    with (DATA / "unknown_phrases.csv").open(encoding="utf-8", newline="") as handle:
        return {row["phrase_fa"]: normalize(row["phrase_ur"]) for row in csv.DictReader(handle)}


# ------------------------------------------------------------------------------------------- person cues


def _forms(stems: str, masculine: str, feminine: str) -> dict[str, str]:
    """Each stem with each masculine and feminine ending ('بوڑھ' → بوڑھا, بوڑھے: male; بوڑھی: female)."""
    return {
        stem + ending: gender
        for stem in stems.split()
        for endings, gender in ((masculine, MALE), (feminine, FEMALE))
        for ending in endings.split()
    }


PERSON_GENDER: dict[str, str] = {
    **dict.fromkeys(("مرد", "مردوں", "آدمی", "لڑکا", "لڑکے", "صاحب", "دولہا", "رنڈوا"), MALE),
    **dict.fromkeys(("عورت", "عورتوں", "خاتون", "خواتین", "لڑکی", "لڑکیاں", "لڑکیوں", "بیگم", "دلہن", "بچی"), FEMALE),
    **dict.fromkeys(("بیوہ", "مطلقہ", "مریضہ", "طالبہ", "استانی", "ملازمہ"), FEMALE),
}  # fmt: skip
"""Nouns that give the gender of the person they name. A person of either gender: شخص, فرد, نوجوان, بزرگ, بچہ."""

KIN_GENDER: dict[str, str | None] = {
    **dict.fromkeys(("باپ", "والد", "ابو", "بھائی", "بیٹا", "بیٹے", "دادا", "نانا", "چچا", "تایا", "ماموں"), MALE),
    **dict.fromkeys(("خالو", "پھوپھا", "شوہر", "سسر", "داماد"), MALE),
    **dict.fromkeys(("ماں", "والدہ", "امی", "بہن", "بیٹی", "دادی", "نانی", "چچی", "تائی", "ممانی", "خالہ"), FEMALE),
    **dict.fromkeys(("پھوپھی", "بیوی", "ساس", "بہو", "نند"), FEMALE),
    **dict.fromkeys(("والدین", "ہمسر"), None),
}  # fmt: skip
"""Kinship nouns and the gender of the person each names; None: either."""

AGREEMENT_GENDER: dict[str, str] = {
    **_forms("بوڑھ اچھ بر بڑ چھوٹ اکیل اندھ گونگ بہر لنگڑ موٹ پتل گور کال لمب سیدھ پیار پڑھ لکھ وال", "ا ے", "ی"),
    **{"نیا": MALE, "نئے": MALE, "نئی": FEMALE},
}
"""Adjectives that agree with their noun's gender: بوڑھا ڈرائیور is a man, بوڑھی ڈرائیور a woman (پڑھا لکھا, ٹیکسی
چلانے والا). Adjectives that do not agree (بزرگ, غریب, نابینا, عمر رسیدہ) give no gender."""
GENITIVE_GENDER = {"کا": MALE, "کے": MALE, "کی": FEMALE}
"""The genitive, which agrees with the noun right after it: گاؤں کی ڈاکٹر is a woman. Elsewhere it may be part of
a compound postposition (کے بغیر, کی طرح) and agree with nothing."""

_RELATIVE = re.compile(r"\s(?:جو|جس|جن|جنہوں)\s")


def head_words(phrase: str) -> list[str]:
    """The words of an entity's head phrase, head first: a relative clause (جو …) names other people and is cut
    off; an Urdu head comes last (بوڑھا آدمی, دولہا کی ماں), so the words are returned last first."""
    return _RELATIVE.split(f" {normalize(phrase)} ", maxsplit=1)[0].split()[::-1]


@cache
def entity_gender(phrase: str) -> str:
    """``female``, ``male`` or ``none``: the first cue of the head phrase, read from its head backwards, a person
    or kin noun (:data:`PERSON_GENDER`, :data:`KIN_GENDER`), an agreeing adjective (:data:`AGREEMENT_GENDER`) or
    a genitive right before the head (:data:`GENITIVE_GENDER`): 'لڑکی کا باپ' is the father, 'بوڑھی ڈرائیور' a
    woman."""
    for index, word in enumerate(head_words(phrase)):
        genitive = GENITIVE_GENDER.get(word) if index == 1 else None
        gender = PERSON_GENDER.get(word) or KIN_GENDER.get(word) or AGREEMENT_GENDER.get(word) or genitive
        if gender:
            return gender
    return NONE


def gendered_noun(phrase: str) -> bool:
    """Whether the head phrase holds a person or kin noun of one gender (آدمی, ماں), not only agreement: a
    masculine adjective on a noun of either gender (اکلوتا نوجوان) is also Urdu's form for a person of unknown
    gender."""
    return any(PERSON_GENDER.get(word) or KIN_GENDER.get(word) for word in head_words(phrase))


@cache
def _numbers() -> dict[str, int]:
    """Urdu number words 1-100 (urdunorm's table: اکیس 21, پچیس 25, ننانوے 99, ایک سو 100), longest first."""
    table = {integer_to_words(value): value for value in range(1, 101)}
    return dict(sorted(table.items(), key=lambda item: len(item[0]), reverse=True))


@cache
def _age_pattern() -> re.Pattern[str]:
    number = "|".join(re.escape(word) for word in _numbers())
    return re.compile(rf"(?<!\S)(\d+|{number})\s*(?:سالہ|(?:سال|برس)\s+(?:کا|کی|کے)(?!\S))")


def explicit_age(text: str) -> int | None:
    """The age a text states: 'ستر سالہ آدمی', '70 سالہ', 'پچیس سال کی لڑکی', 'دس برس کا بچہ'. A number of
    years with a genitive that is not an age ('دو سال کا تجربہ', two years' experience) is read as one."""
    match = _age_pattern().search(normalize(text))
    if match is None:
        return None
    number = match.group(1)
    return int(number) if number.isdigit() else _numbers()[number]


# --------------------------------------------------------------------------- gender check of a translation

_VERB_STEMS = (
    "کر جا آ ہو رہ دی لی کہہ سک چاہ پڑھ لکھ سمجھ جان مان بول سن دیکھ کھا پی بیٹھ چل مل بن سو رو ہنس سوچ لگ پا "
    "بتا کما بیچ خرید اٹھ بھیج رکھ ڈھونڈ مانگ پوچھ سکھا چلا بھول پہنچ نکل ڈر گھبرا کھول سنبھال پہن دوڑ کھیل جیت "
    "ہار بچا سنا پڑ مار"
)
VERB_GENDER: dict[str, str] = {
    **_forms(_VERB_STEMS, "تا تے", "تی تیں"),
    **dict.fromkeys(("تھا", "تھے", "رہا", "سکا", "چکا", "گیا", "آیا", "لگا", "بیٹھا", "پہنچا", "نکلا"), MALE),
    **dict.fromkeys(("پایا", "گا", "گے"), MALE),
    **dict.fromkeys(("تھی", "تھیں", "رہی", "سکی", "چکی", "گئی", "گئیں", "آئی", "لگی", "بیٹھی", "پہنچی"), FEMALE),
    **dict.fromkeys(("نکلی", "گی"), FEMALE),
}  # fmt: skip
"""Verb forms that agree with the gender of their subject, and only such: the habitual participle (کرتا/کرتی),
the past copula (تھا/تھی), the progressive (رہا/رہی), سکنا and چکنا, the perfective of intransitive verbs
(گیا/گئی, بیٹھا/بیٹھی) and the future (گا/گی). Left out as ambiguous: the subjunctive, which looks like a
masculine plural (سکے, رہے, آئے, بیٹھے: 'تاکہ وہ جا سکے' is either gender), گئے ('رات گئے', late at night),
کیا/کی ('what', 'of'), ہوا ('air') and پائی ('penny')."""
_ADVERBIAL = frozenset({"ہوئے", "وقت", "ہی"})
"""Words after which an -تے form is an adverb, agreeing with no one ('ہنستے ہوئے', 'جاتے وقت', 'پہنچتے ہی')."""
_POSTPOSITIONS = frozenset(("کا", "کی", "کے", "کو", "سے", "میں", "پر", "تک", "والا", "والی", "والے"))
"""Words after which an entity's phrase is not its clause's subject (نے marks the subject: its clause is left
alone, but its subject is what a following وہ stands for)."""
_PARTICLES = frozenset({"بھی", "تو", "ہی"})
_CLAUSE_BREAK = re.compile(r"[۔؟!?،,؛;:]|\s(?:کہ|لیکن|مگر|جبکہ|بلکہ|تاکہ|کیونکہ|جب|جو)\s")
_GENDER_FORMS = {MALE: "masculine", FEMALE: "feminine"}


def mention_pattern(phrase: str) -> re.Pattern[str]:
    """A mention of an entity phrase in Urdu text, in its direct or its oblique form: a word on -ا or -ہ may end
    in -ے before a postposition (بوڑھا آدمی → بوڑھے آدمی نے, لڑکا → لڑکے کی)."""
    words_ = normalize(phrase).split()
    parts = [re.escape(word[:-1]) + f"[{word[-1]}ے]" if word[-1] in "اہ" else re.escape(word) for word in words_]
    return re.compile(r"(?<!\S)" + r"\s+".join(parts) + r"(?![^\s۔؟!?،,؛;:])")


def _agreeing(clause: str, start: int) -> list[tuple[str, str]]:
    """(word, gender) of every verb form in ``clause`` after ``start`` that agrees with the clause's subject, up to
    an اور after the first of them: what follows may have a subject of its own ('… جھگڑ چکا ہے اور اسے تنبیہ مل
    چکی ہے')."""
    tokens = tokenize(clause[start:])
    found: list[tuple[str, str]] = []
    for word, after in zip(tokens, [*tokens[1:], ""], strict=True):
        if word == "اور" and found:
            break
        if word in VERB_GENDER and not (word.endswith("تے") and after in _ADVERBIAL):
            found.append((word, VERB_GENDER[word]))
    return found


def gender_failures(text: str, entities: Mapping[str, str], kind: str) -> list[str]:
    """The agreement in an Urdu translation that contradicts the known gender of the person it is about, one
    English sentence each (empty: none found). ``entities`` maps each entity's Urdu phrase to its gender.

    In a context, each clause (cut at punctuation and at کہ, لیکن, مگر, جبکہ, …) is checked whose subject is one
    entity: its phrase followed by no postposition, or, in a clause that names none, a leading وہ standing for
    the subject of the clause before. A clause with نے is left alone (its verb agrees with the object: 'لڑکی نے
    کھانا کھایا'). A question names no one: in a question whose subject is کون, a feminine form fails when any
    entity it may be about is not known to be a woman (the masculine is Urdu's form for a person of unknown gender,
    so it never fails); کس نے, کسے, کس کا questions agree with something else ('کسے مدد درکار تھی') and pass.

    What it cannot see: a predicate after اور (its subject may be dropped or another: only the forms before it
    are read), a subject that is neither an entity's phrase nor a leading وہ (a dropped subject after a clause
    break, a demonstrative وہ before a noun; 'اس کی گاڑی خراب ہو گئی', where the car is the subject, is left alone
    only because no entity is named), predicate adjectives without a copula, and a person of unknown gender
    written with feminine forms in a context."""
    if kind == "question":
        tokens = tokenize(normalize(text))
        if "کون" not in tokens or "نے" in tokens:
            return []
        feminine = [word for word, gender in _agreeing(" ".join(tokens), 0) if gender == FEMALE]
        others = [phrase for phrase, gender in entities.items() if gender != FEMALE]
        if feminine and others:
            return [
                f"'{feminine[0]}' is feminine, but the question may be about the {others[0]}, who is not known to "
                "be a woman: use the masculine form, Urdu's form for anyone."
            ]
        return []
    patterns = {phrase: mention_pattern(phrase) for phrase in entities}
    failures: list[str] = []
    antecedent: str | None = None
    for clause in _CLAUSE_BREAK.split(f" {normalize(text)} "):
        tokens = clause.split()
        mentions = sorted(
            ((phrase, match) for phrase, pattern in patterns.items() for match in pattern.finditer(clause)),
            key=lambda mention: mention[1].start(),
        )
        subjects: dict[str, int] = {}
        coordinated: list[tuple[str, int]] = []
        for phrase, match in mentions:
            following = [word for word in clause[match.end() :].split() if word not in _PARTICLES][:1]
            coordinated.append((phrase, match.end()))
            if following == ["اور"]:
                continue  # 'X اور Y …': X is what Y is, the subject or not
            if not following or following[0] not in _POSTPOSITIONS:
                for conjunct, end in coordinated:
                    subjects.setdefault(conjunct, end)
            coordinated = []
        if mentions:
            antecedent = next(iter(subjects)) if len(subjects) == 1 else None
        elif antecedent and tokens[:1] == ["وہ"]:
            subjects = {antecedent: clause.index("وہ") + len("وہ")}
        if len(subjects) != 1 or "نے" in tokens:
            continue
        ((subject, start),) = subjects.items()
        gender = entities[subject]
        for word, form in _agreeing(clause, start):
            if gender in _GENDER_FORMS and form != gender:
                failures.append(
                    f"'{word}' is {_GENDER_FORMS[form]}, but its subject, the {subject}, is {gender}: "
                    f"use the {_GENDER_FORMS[gender]} form."
                )
    return list(dict.fromkeys(failures))
