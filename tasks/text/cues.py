"""The person-cue rules: how the words of an entity, or of a reference to one, give it a gender, an age band, a role,
a number and a status.

Instantiation reads it to keep confounds out of a pair (an entity pair may differ only in the attribute its
stereotype is about: PBBQ §3.3, BBQ's control), the names stage to give each reference a name of the right
gender (Obscured but Not Erased §4.1.1), translation to check English pronouns against the entity's gender.

The words behind the cues are each language's (:mod:`pbbq.tasks.text.languages`); the rules here are the same for
every language:

- **Gender**: the first cue of the entity's head phrase (:meth:`Language.entity_gender`): a person noun (man, woman,
  …) or a kinship noun (father, mother, …, each word's own gender); in running text, a gendered pronoun. An English
  word is read by its morphology too ('businessman', 'chairwoman', 'housewife' carry their last part's gender).
- **Age band**: an explicit age ('هفتادساله', 'N ساله', 'seventy-year-old') gives the band of that age
  (:data:`AGE_BANDS`); else the most specific age word (old, middle-aged, young, teen, child); else a word that only
  says child-or-young (پسر, دختر: ``youth``) or grown-up (مرد, زن: ``adult``). :func:`age_bands_differ` says
  whether two bands cannot describe people of one age.
"""

from __future__ import annotations

from functools import cache

from .categories import AGE, GENDER, ROLE, about
from .languages import LANGUAGES, NONE, language

GENDERS = ("female", "male")

PERSON_GENDER: dict[str, dict[str, str]] = {code: dict(lang.person_gender) for code, lang in LANGUAGES.items()}
"""Words that give the gender of the person they name, by language (each language's ``person_gender``)."""
KIN_GENDER: dict[str, dict[str, str | None]] = {code: dict(lang.kin_gender) for code, lang in LANGUAGES.items()}
"""Kinship nouns and the gender of the person each names (a husband is male); None: either."""
SPOUSES = frozenset().union(*(lang.spouses for lang in LANGUAGES.values()))
"""Kinship nouns whose possessor is the other spouse (the names stage names a husband by his wife)."""
PRONOUN_GENDER: dict[str, dict[str, str]] = {code: dict(lang.pronoun_gender) for code, lang in LANGUAGES.items()}
"""Gendered pronouns, by language; Persian has none (او is either)."""

AGE_BANDS: tuple[tuple[str, int], ...] = (("child", 12), ("teen", 19), ("young", 39), ("middle", 59), ("old", 200))
"""Age bands by their last year of age: child ≤ 12, teen 13–19, young 20–39, middle-aged 40–59, old ≥ 60."""

_GENERIC_BANDS: dict[str, frozenset[str]] = {
    "youth": frozenset({"child", "teen", "young"}),
    "adult": frozenset({"young", "middle", "old"}),
}
"""A language's ``age_words`` also give ``youth`` (a boy, a girl: a child, a teen or young) and ``adult`` (a man, a
woman: young, middle-aged or old)."""


def _band_of_age(age: int) -> str:
    return next(band for band, last in AGE_BANDS if age <= last)


@cache
def entity_age_band(entity: str, lang: str) -> str:
    """The entity's age band: from a stated age, else its most specific age word, else :data:`NONE`."""
    words = language(lang)
    age = words.explicit_age(entity)
    if age is not None:
        return _band_of_age(age)
    bands = [words.age_words[w] for w in words.head_words(entity) if w in words.age_words]
    specific = [band for band in bands if band not in _GENERIC_BANDS]
    if specific:
        return specific[0]
    return bands[0] if bands else NONE


def age_bands_differ(first: str, second: str) -> bool:
    """Whether two age bands cannot describe people of one age, or an age is stated for one entity only. ``youth``
    agrees with child, teen and young; ``adult`` with young, middle-aged and old; ``youth`` and ``adult`` differ.
    :data:`NONE` agrees only with ``adult`` ('کارگر' against 'مرد'): against any other band the pair sets an age
    beside the attribute ('کارگر افغانستانی' against 'جوان ایرانی')."""
    if first == second:
        return False
    if NONE in (first, second):
        return (second if first == NONE else first) != "adult"
    possible = [_GENERIC_BANDS.get(band, frozenset({band})) for band in (first, second)]
    if {first, second} == {"youth", "adult"}:
        return True
    return not possible[0] & possible[1]


def genders_differ(first: str, second: str) -> bool:
    """Whether two entities' genders differ: known and different, or known for one only ('مرد پرخالکوبی'
    against 'جوان بدون خالکوبی' sets a man against a person of either gender)."""
    return first != second


# --- role, number and status: what an entity is besides its gender and age (PBBQ §3.3, BBQ's control) -----------

PERSON = "person"
"""The role of an entity whose head phrase names no role: a man, a woman, a young person."""

GENDER_CATEGORIES, AGE_CATEGORIES, ROLE_CATEGORIES = about(GENDER), about(AGE), about(ROLE)
"""Categories whose attribute is gender, age, or shown by a role: an occupation (a taxi driver, a factory owner
against a teacher), owning or renting, a place in the family (a mother-in-law) (:mod:`pbbq.tasks.text.categories`)."""

ROLE_ATTRIBUTE_OF: dict[str, frozenset[str]] = {"grandparent": AGE_CATEGORIES}
"""Roles that are themselves an attribute of another category: a grandparent is old."""


@cache
def _head_lemmas(entity: str, lang: str) -> tuple[str, ...]:
    """The entity's head-phrase words as its language cuts them, a word read as its lemma when that lemma is a role,
    collective, status or maturity word ('دانشجوی جوان', 'خانواده‌ی مستاجر'); read once per entity (role, number
    and status all start from them, for every pair the entity is in)."""
    words = language(lang)
    known = {*words.role_nouns, *words.collective_nouns, *words.status_words, *words.maturity}
    return tuple(words.lemma(word) if words.lemma(word) in known else word for word in words.head_words(entity))


def entity_role(entity: str, lang: str) -> str:
    """The role (its language's ``role_nouns``) of the entity's first role noun, else :data:`PERSON`."""
    roles = language(lang).role_nouns
    return next((roles[w] for w in _head_lemmas(entity, lang) if w in roles), PERSON)


def entity_number(entity: str, lang: str) -> str:
    """``group`` when the entity's head noun (its first word) names a group (its language's ``collective_nouns``, or
    a plural: ``plural_suffixes``), else ``one``."""
    words = language(lang)
    lemmas = _head_lemmas(entity, lang)
    head = lemmas[0] if lemmas else ""
    return "group" if head in words.collective_nouns or head.endswith(words.plural_suffixes) else "one"


def entity_statuses(entity: str, lang: str) -> dict[str, frozenset[str]]:
    """The statuses the entity's head phrase states (its language's ``status_words``), each with the categories
    whose attribute it is."""
    phrase = f" {' '.join(_head_lemmas(entity, lang))} "
    statuses = language(lang).status_words.items()
    return {status: categories for word, (status, categories) in statuses if f" {word} " in phrase}


def entity_maturity(entity: str, lang: str) -> str:
    """``youth`` or ``adult`` from the entity's first person noun (its language's ``maturity``), else :data:`NONE`:
    a girl and a young woman may be of one age, but the words set them in different bands of life ('دختر نابینا'
    against 'زن جوان بینا')."""
    words = language(lang)
    return next((words.maturity[w] for w in words.head_words(entity) if w in words.maturity), NONE)


CONFOUNDS = ("gender_confound", "age_confound", "number_confound", "role_confound", "status_confound")
"""The reasons a pair is not built, in the order :func:`pair_confound` tries them."""


def pair_confound(stereo: str, nonstereo: str, category: str, lang: str) -> str | None:
    """Why a pair of entities in ``lang`` may not be built, or None: the two may differ only in the attribute their
    stereotype's category is about (docs/architecture.md §4).

    - ``gender_confound``: genders differ outside Gender (:data:`GENDER_CATEGORIES`);
    - ``age_confound``: age bands differ, or one is a girl or boy and the other a woman or man, outside Age
      (:data:`AGE_CATEGORIES`);
    - ``number_confound``: one is a group (a family) and the other one person, in any category;
    - ``role_confound``: roles differ (:func:`entity_role`) outside :data:`ROLE_CATEGORIES` and the categories of
      :data:`ROLE_ATTRIBUTE_OF`;
    - ``status_confound``: the statuses that are not the category's attribute differ (:func:`entity_statuses`).
    """
    words = language(lang)
    if category not in GENDER_CATEGORIES and genders_differ(
        words.entity_gender(stereo), words.entity_gender(nonstereo)
    ):
        return "gender_confound"
    maturities = {entity_maturity(stereo, lang), entity_maturity(nonstereo, lang)}
    if category not in AGE_CATEGORIES and (
        age_bands_differ(entity_age_band(stereo, lang), entity_age_band(nonstereo, lang))
        or (NONE not in maturities and len(maturities) == 2)
    ):
        return "age_confound"
    if entity_number(stereo, lang) != entity_number(nonstereo, lang):
        return "number_confound"
    roles = {entity_role(stereo, lang), entity_role(nonstereo, lang)}
    exempt = ROLE_CATEGORIES.union(*(ROLE_ATTRIBUTE_OF.get(role, ()) for role in roles))
    if len(roles) == 2 and category not in exempt:
        return "role_confound"
    statuses = [
        {status for status, categories in entity_statuses(entity, lang).items() if category not in categories}
        for entity in (stereo, nonstereo)
    ]
    if statuses[0] != statuses[1]:
        return "status_confound"
    return None
