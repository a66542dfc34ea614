"""BBQ's second generator (nyu-mll/BBQ, ``generate_from_template_intersectional_cats.py``): Race_x_gender and
Race_x_SES, each slot a race and a second attribute (a gender, an SES), ported to the pairs it contrasts.

The stereotyped entity has a stereotyped race (BBQ: ``Known_stereotyped_race`` in the ``Race_ethnicity``
vocabulary) and the stereotyped value of the second attribute (``Known_stereotyped_var2``). The other entity
differs in the second attribute only (BBQ's condition ``a``), in the race only (``b``) or in both (``c``); each
contrast is built in both orders (:func:`pbbq.tasks.adapt.generate.fillings`). The second attribute's words are a
template's ``Names`` lists or, for Race_x_SES without them, BBQ's SES vocabulary (occupations of each ``Info``);
they fill ``{{GEN1}}``/``{{OCC1}}`` and ``{{GEN2}}``/``{{OCC2}}``.

- Without proper names: for each stereotyped race and each other race (BBQ samples five), the three contrasts.
- Race_x_gender with proper names: NAME1 a first name of a stereotyped ethnicity and the stereotyped gender; the
  other a first name of the same ethnicity and the other gender (a), of another ethnicity and the same gender
  (b), of another ethnicity and the other gender (c); each first name followed by a last name of its ethnicity.
  The names carry the gender; no gender word is filled.
- Race_x_SES with proper names: NAME1 a first name of a stereotyped ethnicity (of the template's
  ``Stated_gender_info`` when it gives one); the other, of the same gender, a first name of the same ethnicity with
  the other SES (a) or a first name of an ethnicity that is not stereotyped with the same SES (b) or the other (c).

Where BBQ draws five names or races at random, this port takes every one, stepping through the three lists side
by side as BBQ does (one step: one a, one b, one c); where BBQ draws a word of the second attribute for each step
and a last name for each name, it rotates through them from a start given by the template's id; a contrast BBQ
would build twice (Race_x_gender's ``a`` at every step) is built once. The groups tagged are BBQ's, ``F-Black``
(gender, race), ``lowSES-Black`` (SES, race), ``lowSES-M-Black`` (SES, gender, ethnicity), spelled as every tag is
(:func:`~pbbq.tasks.core.schemas.group_tag`) so that lm-eval's BBQ code reads each back as itself: ``f-Black``,
``lowses-Black``, ``lowses-m-Black``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from typing import NamedTuple

import pandas as pd

from ..text.languages import LANGUAGES
from .bbq_format import is_stereotyped
from .intersectional_format import GENDERS, SecondAttribute, other_value, second_attribute

RACE_CATEGORY = "Race_ethnicity"
"""The vocabulary category both take their races from (BBQ: ``vocab.Category == "Race_ethnicity"``)."""
SES_CATEGORY = "SES"


_ENGLISH = LANGUAGES["en"]
_BBQ_GENDER = {"male": "M", "female": "F"}
PRONOUN_GENDERS = {word: _BBQ_GENDER[gender] for word, gender in _ENGLISH.pronoun_gender.items() if word != "him"}
"""English's gendered pronouns (its language's ``pronoun_gender``), each referring to a person named before it,
in BBQ's M/F. 'him' is not one: an object, it never refers to the subject of its own clause, which the slot before
it is (BBQ's 'The {{NAME1}} passed by him': a man at the bar)."""
PERSON_NOUN_GENDERS = {
    word: _BBQ_GENDER[gender]
    for table in (_ENGLISH.person_gender, _ENGLISH.kin_gender)
    for word, gender in table.items()
    if gender
}
"""English's words of a person of one gender (``person_gender``, ``kin_gender``): a pronoun of that gender after
one, written in a template, refers to that person."""
CONTEXT_FIELDS = ("ambiguous", "disambiguating", "answer_negative", "answer_non_negative")
QUESTION_FIELDS = ("question_negative", "question_non_negative")
PRONOUN_GENDER_CLASH = "pronoun_gender_clash"
_SENTENCE = re.compile(r"[^.!?;]+")
_WORD = re.compile(r"\{\{(NAME[12])\}\}|[A-Za-z]+")
SLOTS = ("NAME1", "NAME2")


def _referents(text: str) -> Iterator[tuple[str, str]]:
    """(gender, what it refers to) of each gendered pronoun of ``text``: the nearest slot (``NAME1``, ``NAME2``)
    before it in its sentence, skipping words of a person of the other gender; that word when a word of a person
    of its own gender comes first (``husband`` in 'obeying their husband when he said'); ``""`` when neither does."""
    for sentence in _SENTENCE.findall(text):
        words = [match.group(1) or match.group(0).lower() for match in _WORD.finditer(sentence)]
        for index, word in enumerate(words):
            if word in PRONOUN_GENDERS:
                gender = PRONOUN_GENDERS[word]
                before = (w for w in reversed(words[:index]) if w in SLOTS or PERSON_NOUN_GENDERS.get(w) == gender)
                yield gender, next(before, "")


def pronoun_genders(template: Mapping[str, str]) -> dict[str, set[str]]:
    """The genders the template's pronouns give the entity of each slot (``NAME1``, ``NAME2``). A pronoun of a
    context or an answer: its slot's (:func:`_referents`). A pronoun of a question that refers to no one before
    it: both slots', since the question asks for a person of that gender, which names the answer of the ambiguous
    context when only one of the two is one ('Which person only shops for the things she needs?')."""
    genders: dict[str, set[str]] = {slot: set() for slot in SLOTS}
    for field in (*CONTEXT_FIELDS, *QUESTION_FIELDS):
        for gender, referent in _referents(template[field]):
            slots = [referent] if referent in SLOTS else SLOTS if field in QUESTION_FIELDS and not referent else []
            for slot in slots:
                genders[slot].add(gender)
    return genders


def gender_of(group: str) -> str:
    """The gender in a group's tag (``F-Black``, ``lowSES-M-Black``), or ``""`` (``lowSES-Black``)."""
    return next((part for part in group.split("-") if part in GENDERS), "")


def pronoun_clash(genders: dict[str, set[str]], groups: tuple[str, str]) -> bool:
    """Whether the entity of a slot (its group's tag: NAME1's, NAME2's) has a gender other than one the template's
    pronouns give that slot (:func:`pronoun_genders`): 'The Black man sat and quietly nursed her drink'."""
    slot_genders = zip(SLOTS, map(gender_of, groups), strict=True)
    return any(gender and genders[slot] - {gender} for slot, gender in slot_genders)


class Entity(NamedTuple):
    """One of a contrast's two entities: the words of its NAME slot (a race or a full name), of its second
    attribute's slot (empty when a name carries it) and BBQ's tag of its groups."""

    name: str
    attribute: str
    group: str


def _rotation(items: list[str], start: int) -> Iterator[str]:
    """``items`` over and over from ``start`` (nothing for no items)."""
    return itertools.islice(itertools.cycle(items), start % len(items), None) if items else iter(())


def _attribute_words(rule: SecondAttribute, category: str, vocabulary: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The words of the stereotyped and of the other value: the template's, else BBQ's SES vocabulary (Race_x_SES),
    else none (Race_x_gender's proper names carry their gender)."""
    other = other_value(category, rule.target)
    if rule.words:
        return rule.words[rule.target], rule.words[other]
    if category != "Race_x_SES":
        return [""], [""]
    ses = vocabulary[vocabulary["Category"] == SES_CATEGORY]
    words = [list(dict.fromkeys(ses.loc[ses["Info"] == value, "Name"])) for value in (rule.target, other)]
    return words[0], words[1]


def _label_contrasts(
    template: pd.Series, rule: SecondAttribute, races: list[tuple[str, str]], words: Iterator[tuple[str, str]]
) -> Iterator[tuple[Entity, Entity]]:
    """The contrasts of a template that names groups: per (stereotyped race, other race), a, b and c."""
    target, other = rule.target, other_value(template.category, rule.target)
    for race, other_race in races:
        word, other_word = next(words)
        stereotyped = Entity(race, word, f"{target}-{race}")
        yield stereotyped, Entity(race, other_word, f"{other}-{race}")
        yield stereotyped, Entity(other_race, word, f"{target}-{other_race}")
        yield stereotyped, Entity(other_race, other_word, f"{other}-{other_race}")


def _name_contrasts(
    template: pd.Series, rule: SecondAttribute, proper_names: pd.DataFrame, words: Iterator[tuple[str, str]], start: int
) -> Iterator[tuple[Entity, Entity]]:
    """The contrasts of a ``Proper_nouns_only`` template (first names of BBQ's ``First_last = first`` that have a
    last name of their ethnicity)."""
    lasts = proper_names[proper_names["First_last"] == "last"]
    last_names = {
        ethnicity: _rotation(list(dict.fromkeys(group["Name"])), start)
        for ethnicity, group in lasts.groupby("ethnicity")
    }
    firsts = proper_names[(proper_names["First_last"] == "first") & proper_names["ethnicity"].isin(last_names)]
    marked = firsts["ethnicity"].map(lambda ethnicity: is_stereotyped(ethnicity, list(template.stereotyped_groups)))
    marked = marked.astype(bool)
    target, other = rule.target, other_value(template.category, rule.target)

    def full_name(first: pd.Series) -> str:
        return f"{first.Name} {next(last_names[first.ethnicity])}"

    if template.category == "Race_x_gender":
        for _, first in firsts[marked & (firsts["gender"] == target)].iterrows():
            stereotyped = Entity(full_name(first), "", f"{first.gender}-{first.ethnicity}")
            race, gender = firsts["ethnicity"] == first.ethnicity, firsts["gender"] == first.gender
            kinds = (race & ~gender, ~race & gender, ~race & ~gender)  # BBQ's a, b, c
            for step in itertools.zip_longest(*(firsts[kind].itertuples() for kind in kinds)):
                for name in filter(None, step):
                    yield stereotyped, Entity(full_name(name), "", f"{name.gender}-{name.ethnicity}")
        return
    for _, first in firsts[marked & ((firsts["gender"] == rule.gender) | (rule.gender == ""))].iterrows():
        name = full_name(first)
        gender = firsts["gender"] == first.gender
        same = firsts[gender & (firsts["ethnicity"] == first.ethnicity) & (firsts["Name"] != first.Name)]
        for same_race, other_race in itertools.zip_longest(same.itertuples(), firsts[~marked & gender].itertuples()):
            word, other_word = next(words)
            stereotyped = Entity(name, word, f"{target}-{first.gender}-{first.ethnicity}")
            if same_race is not None:  # BBQ's a
                group = f"{other}-{same_race.gender}-{same_race.ethnicity}"
                yield stereotyped, Entity(full_name(same_race), other_word, group)
            if other_race is not None:  # BBQ's b and c: one name, each SES
                other_name, groups = full_name(other_race), f"{other_race.gender}-{other_race.ethnicity}"
                yield stereotyped, Entity(other_name, word, f"{target}-{groups}")
                yield stereotyped, Entity(other_name, other_word, f"{other}-{groups}")


def contrasts(
    template: pd.Series,
    races: list[tuple[str, str]],
    vocabulary: pd.DataFrame,
    proper_names: pd.DataFrame,
    start: int,
) -> list[tuple[Entity, Entity]]:
    """(stereotyped entity, other entity) of a Race_x_gender or Race_x_SES template, each once, in BBQ's order.
    ``races``: (stereotyped race, other race) pairs by BBQ's rule (``generate.pairs`` on the ``Race_ethnicity``
    vocabulary); ``start``: where the rotations of words and last names start."""
    rule = second_attribute(template.names, template.category)
    stereotyped_words, other_words = _attribute_words(rule, template.category, vocabulary)
    if not stereotyped_words or not other_words:
        return []
    words = zip(_rotation(stereotyped_words, start), _rotation(other_words, start), strict=False)  # both endless
    found = (
        _name_contrasts(template, rule, proper_names, words, start)
        if template.proper_nouns_only
        else _label_contrasts(template, rule, races, words)
    )
    built: dict[tuple[str, str, str, str], tuple[Entity, Entity]] = {}
    for stereotyped, other in found:
        built.setdefault((stereotyped.name, stereotyped.attribute, other.name, other.attribute), (stereotyped, other))
    return list(built.values())
