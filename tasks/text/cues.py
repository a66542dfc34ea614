"""The one table of person cues: the words that give an entity, or a reference to one, a gender or an age band.

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

ROLE_NOUNS: dict[str, str] = {
    **dict.fromkeys(("پدر", "مادر"), "parent"),
    **dict.fromkeys(("پدربزرگ", "مادربزرگ"), "grandparent"),
    **dict.fromkeys(("پدرشوهر", "پدرزن", "مادرشوهر", "مادرزن"), "parent-in-law"),
    **dict.fromkeys(("شوهر", "همسر"), "spouse"),
    **dict.fromkeys(("مالک", "صاحب‌خانه", "صاحبخانه"), "owner"),
    **dict.fromkeys(("فارغ‌التحصیل", "دانش‌آموخته"), "graduate"),
    "مستاجر": "tenant", "بازرگان": "merchant", "گردشگر": "tourist", "فعال": "activist", "تحلیل‌گر": "analyst",
    "کارگر": "labourer", "کارمند": "employee", "راننده": "driver", "استاد": "professor", "معلم": "teacher",
    "پژوهشگر": "researcher", "آشپز": "cook", "دونده": "runner", "عضو": "member", "کاربر": "user",
    "سیاستمدار": "politician", "بازیگر": "actor", "مدیر": "manager", "کارشناس": "expert", "حسابدار": "accountant",
    "داروساز": "pharmacist", "مکانیک": "mechanic", "صافکار": "panel beater", "خیاط": "tailor", "عکاس": "photographer",
    "تعمیرکار": "repairer", "کتاب‌فروش": "bookseller", "گل‌فروش": "florist", "نقاش": "painter", "نوازنده": "musician",
    "کارخانه‌دار": "factory owner", "سرمایه‌دار": "capitalist", "پزشک": "doctor", "پرستار": "nurse",
}  # fmt: skip
"""Persian role nouns and the role each names; a mother and a father are both a ``parent`` (their gender is the
gender rule's). An entity's role is its first role noun ('زن استاد دانشگاه' is a professor), else :data:`PERSON`."""

ROLE_CATEGORIES = frozenset({"Profession", "Socio-economic Status", "Property Ownership", "Family Structure"})
"""Categories whose attribute is shown by a role: an occupation (a taxi driver, a factory owner against a teacher),
owning or renting, a place in the family (a mother-in-law)."""

ROLE_ATTRIBUTE_OF: dict[str, frozenset[str]] = {"grandparent": frozenset({"Age"})}
"""Roles that are themselves an attribute of another category: a grandparent is old."""

COLLECTIVE_NOUNS = frozenset({"خانواده", "گروه", "زوج", "تیم", "خانوار", "جمع", "جماعت"})
"""Head nouns that name a group of people ('خانواده‌ی مستاجر' is a family; 'پسر خانواده‌ی پرجمعیت' one boy)."""

STATUS_WORDS: dict[str, tuple[str, frozenset[str]]] = {
    **{w: ("wealthy", frozenset({"Socio-economic Status"})) for w in ("ثروتمند", "پولدار", "مرفه", "میلیاردر")},
    **{w: ("low-income", frozenset({"Socio-economic Status"})) for w in ("کم‌درآمد", "فقیر")},
    "حقوق‌بگیر": ("salaried", frozenset({"Socio-economic Status"})),
    "سرپرست خانوار": ("head of household", frozenset({"Family Structure"})),
    "مطلقه": ("divorced", frozenset({"Family Structure"})),
    "تک‌فرزند": ("only child", frozenset({"Family Structure"})),
    "بازنشسته": ("retired", frozenset({"Age"})),
    **{w: ("student", frozenset({"Age", "Educational Background"})) for w in ("دانشجو", "دانش‌آموز")},
    **{w: (w, frozenset({"Educational Background"})) for w in ("بی‌سواد", "کم‌سواد", "تحصیل‌کرده", "دیپلمه", "دکتری")},
}
"""Status words (possibly of several words), their status and the categories whose attribute that status is:
outside them, a status on one side of a pair only is a confound (a head of household against a wealthy woman
in Socio-economic Status; a student against a worker in Nationality). A professor is a role, not a status."""


def _fa_lemma(word: str) -> str:
    """A Persian noun without its ezafe or indefinite ی ('خانواده‌ی', 'دانشجوی', 'پسری' → the noun)."""
    for suffix in ("\u200cی", "\u200cای", "ی"):
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            return word[: -len(suffix)]
    return word


def _fa_head_lemmas(entity: str) -> list[str]:
    """The Persian entity's head-phrase words as its language cuts them, a word read as its noun when that noun is a
    role, collective, status or maturity word ('دانشجوی جوان', 'خانواده‌ی مستاجر')."""
    persian = language("fa")
    known = {*ROLE_NOUNS, *COLLECTIVE_NOUNS, *STATUS_WORDS, *persian.maturity}
    return [_fa_lemma(word) if _fa_lemma(word) in known else word for word in persian.head_words(entity)]


def entity_role(entity: str) -> str:
    """The role (:data:`ROLE_NOUNS`) of a Persian entity's first role noun, else :data:`PERSON`."""
    return next((ROLE_NOUNS[w] for w in _fa_head_lemmas(entity) if w in ROLE_NOUNS), PERSON)


def entity_number(entity: str) -> str:
    """``group`` when a Persian entity's head noun (its first word) names a group (:data:`COLLECTIVE_NOUNS`, or a
    plural in ها), else ``one``."""
    words = _fa_head_lemmas(entity)
    head = words[0] if words else ""
    return "group" if head in COLLECTIVE_NOUNS or head.endswith("\u200cها") else "one"


def entity_statuses(entity: str) -> dict[str, frozenset[str]]:
    """The statuses a Persian entity's head phrase states (:data:`STATUS_WORDS`), each with the categories whose
    attribute it is."""
    phrase = f" {' '.join(_fa_head_lemmas(entity))} "
    return {status: categories for word, (status, categories) in STATUS_WORDS.items() if f" {word} " in phrase}


def entity_maturity(entity: str, lang: str) -> str:
    """``youth`` or ``adult`` from the entity's first person noun (its language's ``maturity``), else :data:`NONE`:
    a girl and a young woman may be of one age, but the words set them in different bands of life ('دختر نابینا'
    against 'زن جوان بینا')."""
    words = language(lang)
    return next((words.maturity[w] for w in words.head_words(entity) if w in words.maturity), NONE)


CONFOUNDS = ("gender_confound", "age_confound", "number_confound", "role_confound", "status_confound")
"""The reasons a pair is not built, in the order :func:`pair_confound` tries them."""


def pair_confound(stereo: str, nonstereo: str, category: str) -> str | None:
    """Why a pair of Persian entities may not be built, or None: the two may differ only in the attribute their
    stereotype's category is about (docs/architecture.md §4).

    - ``gender_confound``: genders differ outside Gender;
    - ``age_confound``: age bands differ, or one is a girl or boy and the other a woman or man, outside Age;
    - ``number_confound``: one is a group (a family) and the other one person, in any category;
    - ``role_confound``: roles differ (:func:`entity_role`) outside :data:`ROLE_CATEGORIES` and the categories of
      :data:`ROLE_ATTRIBUTE_OF`;
    - ``status_confound``: the statuses that are not the category's attribute differ (:func:`entity_statuses`).
    """
    persian = language("fa")
    if category != "Gender" and genders_differ(persian.entity_gender(stereo), persian.entity_gender(nonstereo)):
        return "gender_confound"
    maturities = {entity_maturity(stereo, "fa"), entity_maturity(nonstereo, "fa")}
    if category != "Age" and (
        age_bands_differ(entity_age_band(stereo, "fa"), entity_age_band(nonstereo, "fa"))
        or (NONE not in maturities and len(maturities) == 2)
    ):
        return "age_confound"
    if entity_number(stereo) != entity_number(nonstereo):
        return "number_confound"
    roles = {entity_role(stereo), entity_role(nonstereo)}
    exempt = ROLE_CATEGORIES.union(*(ROLE_ATTRIBUTE_OF.get(role, ()) for role in roles))
    if len(roles) == 2 and category not in exempt:
        return "role_confound"
    statuses = [
        {status for status, categories in entity_statuses(entity).items() if category not in categories}
        for entity in (stereo, nonstereo)
    ]
    if statuses[0] != statuses[1]:
        return "status_confound"
    return None
