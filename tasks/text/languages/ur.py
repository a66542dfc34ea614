"""Urdu: urdunorm's normalisation, sacrebleu's international tokens, urduhack's stop words, its person cues (read
from nouns and from agreement) and the gender check a translation into Urdu must pass (PakBBQ §3.3); the word
lists are in ``ur.toml``. docs/urdu.md says which libraries were compared and why these.

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

import re
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from urdunorm import Protocol, apply_protocol, integer_to_words

from ...imports import one_import_at_a_time
from . import GenderFailure, Language, gender_table, load_data

if TYPE_CHECKING:
    from sacrebleu.tokenizers.tokenizer_intl import TokenizerV14International

_DATA = load_data(__file__)
FEMALE, MALE = "female", "male"

# ----------------------------------------------------------------------------- normalisation and tokenisation

_PROTOCOL = Protocol(name="pbbq-ur", remove_diacritics=True, unify_digits=True, digit_target="ascii", zwnj="keep")
"""urdunorm's ``display`` pipeline plus its diacritic and digit steps; punctuation stays, spaces are not
repaired (a text keeps its words as written)."""
_URDU_PUNCTUATION = re.compile(r"[۔،؟؛]")


def normalize_ur(text: str) -> str:
    """An Urdu text field in one canonical form (see the module docstring); whitespace runs become one space, the
    result is stripped. Idempotent. Text typed on an Arabic keyboard writes ه for both ہ and ھ: it becomes ہ
    (بهت → بہت, right; كها → کہا where کھا was meant, wrong: only a lexicon could tell)."""
    return apply_protocol(text, _PROTOCOL)


@cache
def _tokenizer() -> TokenizerV14International:
    with one_import_at_a_time():
        from sacrebleu.tokenizers.tokenizer_intl import TokenizerV14International  # loaded when Urdu is tokenised

    return TokenizerV14International()


def tokenize_ur(text: str) -> list[str]:
    """Tokens of a normalised Urdu text, punctuation tokens included; no token holds whitespace."""
    return _tokenizer()(_URDU_PUNCTUATION.sub(r" \g<0> ", text)).split()


# ------------------------------------------------------------------------------------------- person cues

_PERSON_GENDER = gender_table(_DATA["person_gender"])
_KIN_GENDER: dict[str, str | None] = {
    word: None if gender == "either" else gender for word, gender in gender_table(_DATA["kin_gender"]).items()
}
AGREEMENT_GENDER: dict[str, str] = {
    **{stem + ending: MALE for stem in _DATA["agreeing_stems"] for ending in "اے"},
    **{stem + "ی": FEMALE for stem in _DATA["agreeing_stems"]},
    **gender_table(_DATA["agreement_gender"]),
}
"""Words that agree with the gender of their noun: adjectives (بوڑھا ڈرائیور is a man, بوڑھی ڈرائیور a woman;
پڑھا لکھا, ٹیکسی چلانے والا) and the genitive (گاؤں کی ڈاکٹر is a woman)."""
_GENITIVES = frozenset({"کا", "کی", "کے"})
_RELATIVE = re.compile(r"\s(?:جو|جس|جن|جنہوں)\s")


def head_words(phrase: str) -> list[str]:
    """The words of an entity's head phrase, head first: an Urdu head comes last (بوڑھا آدمی), so the words are
    returned last first; a relative clause (جو …) is cut off, and so is a genitive complement, which names another
    person (دولہا کی ماں is the mother): its genitive is kept only right after the head, where it agrees with it."""
    words = _RELATIVE.split(f" {normalize_ur(phrase)} ", maxsplit=1)[0].split()[::-1]
    genitive = next((index for index, word in enumerate(words) if word in _GENITIVES), len(words))
    return words[: genitive + 1] if genitive == 1 else words[:genitive]


def word_gender(word: str) -> str | None:
    """The gender one head word gives: a person or kin noun's, or an agreeing word's."""
    return _PERSON_GENDER.get(word) or _KIN_GENDER.get(word) or AGREEMENT_GENDER.get(word)


def gendered_noun(phrase: str) -> bool:
    """Whether the head phrase holds a person or kin noun of one gender (آدمی, ماں), not only agreement: a
    masculine adjective on a noun of either gender (اکلوتا نوجوان) is also Urdu's form for a person of unknown
    gender."""
    return any(_PERSON_GENDER.get(word) or _KIN_GENDER.get(word) for word in head_words(phrase))


def unmarked(phrase: str) -> bool:
    """Whether the phrase is masculine by agreement only (اکلوتا نوجوان), Urdu's form for a person of any gender."""
    return LANGUAGE.entity_gender(phrase) == MALE and not gendered_noun(phrase)


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
    match = _age_pattern().search(normalize_ur(text))
    if match is None:
        return None
    number = match.group(1)
    return int(number) if number.isdigit() else _numbers()[number]


# --------------------------------------------------------------------------- gender check of a translation

VERB_GENDER: dict[str, str] = {
    **{stem + ending: MALE for stem in _DATA["verbs"]["stems"] for ending in ("تا", "تے")},
    **{stem + ending: FEMALE for stem in _DATA["verbs"]["stems"] for ending in ("تی", "تیں")},
    **dict.fromkeys(_DATA["verbs"]["male"], MALE),
    **dict.fromkeys(_DATA["verbs"]["female"], FEMALE),
}
"""Verb forms that agree with the gender of their subject, and only such (``ur.toml``'s ``verbs``)."""
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
    words = normalize_ur(phrase).split()
    parts = [re.escape(word[:-1]) + f"[{word[-1]}ے]" if word[-1] in "اہ" else re.escape(word) for word in words]
    return re.compile(r"(?<!\S)" + r"\s+".join(parts) + r"(?![^\s۔؟!?،,؛;:])")


def _agreeing(clause: str, start: int) -> list[tuple[str, str]]:
    """(word, gender) of every verb form in ``clause`` after ``start`` that agrees with the clause's subject, up to
    an اور after the first of them: what follows may have a subject of its own ('… جھگڑ چکا ہے اور اسے تنبیہ مل
    چکی ہے')."""
    tokens = tokenize_ur(clause[start:])
    found: list[tuple[str, str]] = []
    for word, after in zip(tokens, [*tokens[1:], ""][: len(tokens)], strict=True):
        if word == "اور" and found:
            break
        if word in VERB_GENDER and not (word.endswith("تے") and after in _ADVERBIAL):
            found.append((word, VERB_GENDER[word]))
    return found


def _subjects(clause: str, patterns: dict[str, re.Pattern[str]]) -> tuple[bool, dict[str, int]]:
    """Whether the clause mentions an entity, and the entities that are its subject, each with where its mention
    ends: a mention followed by no postposition; 'X اور Y …' is what Y is, the subject or not."""
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
            continue
        if not following or following[0] not in _POSTPOSITIONS:
            for conjunct, end in coordinated:
                subjects.setdefault(conjunct, end)
        coordinated = []
    return bool(mentions), subjects


def gender_failures(text: str, entities: Sequence[str], kind: str) -> list[GenderFailure]:
    """The agreement in an Urdu translation that contradicts the known gender (:meth:`Language.entity_gender`) of
    the person it is about (code ``verb_gender``, one English sentence each). ``entities`` are the Urdu phrases
    of the segment's entities.

    In a context, each clause (cut at punctuation and at کہ, لیکن, مگر, جبکہ, …) is checked whose subject is one
    entity: its phrase followed by no postposition, or, in a clause that names none, a leading وہ standing for
    the subject of the clause before. A clause with نے is left alone (its verb agrees with the object: 'لڑکی نے
    کھانا کھایا'). A question names no one: in a question whose subject is کون, a feminine form fails when any
    entity it may be about is not known to be a woman, and a masculine form fails when every one is (the question
    of a pair of women is translated on its own: :attr:`Language.marks_gender_on_verbs`); کس نے, کسے, کس کا
    questions agree with something else ('کسے مدد درکار تھی') and pass.

    What it cannot see: a predicate after اور (its subject may be dropped or another: only the forms before it
    are read), a subject that is neither an entity's phrase nor a leading وہ (a dropped subject after a clause
    break, a demonstrative وہ before a noun; 'اس کی گاڑی خراب ہو گئی', where the car is the subject, is left alone
    only because no entity is named), predicate adjectives without a copula, and a person of unknown gender
    written with feminine forms in a context."""
    genders = {phrase: LANGUAGE.entity_gender(phrase) for phrase in dict.fromkeys(entities)}
    if kind == "question":
        tokens = tokenize_ur(normalize_ur(text))
        if "کون" not in tokens or "نے" in tokens:
            return []
        forms = _agreeing(" ".join(tokens), 0)
        feminine = [word for word, gender in forms if gender == FEMALE]
        masculine = [word for word, gender in forms if gender == MALE]
        others = [phrase for phrase, gender in genders.items() if gender != FEMALE]
        if feminine and others:
            message = (
                f"'{feminine[0]}' is feminine, but the question may be about the {others[0]}, who is not known to be "
                "a woman: use the masculine form, Urdu's form for anyone."
            )
            return [GenderFailure("verb_gender", message)]
        if masculine and genders and not others:
            women = " and the ".join(genders)
            message = (
                f"'{masculine[0]}' is masculine, but the question is about the {women}, who are women: use the "
                "feminine form."
            )
            return [GenderFailure("verb_gender", message)]
        return []
    patterns = {phrase: mention_pattern(phrase) for phrase in genders}
    failures: list[GenderFailure] = []
    antecedent: str | None = None
    for clause in _CLAUSE_BREAK.split(f" {normalize_ur(text)} "):
        tokens = clause.split()
        mentioned, subjects = _subjects(clause, patterns)
        if mentioned:
            antecedent = next(iter(subjects)) if len(subjects) == 1 else None
        elif antecedent and tokens[:1] == ["وہ"]:
            subjects = {antecedent: clause.index("وہ") + len("وہ")}
        if len(subjects) != 1 or "نے" in tokens:
            continue
        ((subject, start),) = subjects.items()
        gender = genders[subject]
        for word, form in _agreeing(clause, start):
            if gender in _GENDER_FORMS and form != gender:
                message = (
                    f"'{word}' is {_GENDER_FORMS[form]}, but its subject, the {subject}, is {gender}: "
                    f"use the {_GENDER_FORMS[gender]} form."
                )
                failures.append(GenderFailure("verb_gender", message))
    return list(dict.fromkeys(failures))


LANGUAGE = Language(
    code="ur",
    name="Urdu",
    script=re.compile(r"[\u0621-\u064a\u0671-\u06d3]"),
    script_name="Arabic",
    identify_as="ur",
    normalize=normalize_ur,
    tokenize=tokenize_ur,
    head_words=head_words,
    explicit_age=explicit_age,
    scaffold={"question": "سوال", "answer": "جواب", "instruction": "صرف کسی ایک آپشن کا حرف لکھیں۔"},
    glossary_column="term_ur",
    unknown_column="phrase_ur",
    load_stop_words=lambda: (normalize_ur(word) for word in _DATA["stop_words"].split()),
    person_gender=_PERSON_GENDER,
    kin_gender=_KIN_GENDER,
    age_words=gender_table(_DATA["age_words"]),
    maturity=gender_table(_DATA["maturity"]),
    word_gender=word_gender,
    gender_failures=gender_failures,
    marks_gender_on_verbs=True,
    unmarked=unmarked,
    find_mention=mention_pattern,
    own_letters="\u0679\u0688\u0691\u06ba\u06be\u06c1\u06c2\u06d2\u06d3",  # ٹ ڈ ڑ ں ھ ہ ۂ ے ۓ
)
