"""The one table of person cues: the words that give an entity, or a reference to one, a gender or an age band.

Instantiation reads it to keep confounds out of a pair (an entity pair may differ only in the attribute its
stereotype is about: PBBQ §3.3, BBQ's control), the names stage to give each reference a name of the right
gender (Obscured but Not Erased §4.1.1), translation to check English pronouns against the entity's gender.

- **Gender**: the first cue of the entity's head phrase in :data:`PERSON_GENDER` (man, woman, …) or
  :data:`KIN_GENDER` (father, mother, …, each word's own gender); in running English text, :data:`PRONOUN_GENDER`.
  An English word is read by its morphology too (:func:`english_word_gender`): a compound on -man, -woman, -boy,
  -girl, -wife ('businessman', 'repairman', 'chairwoman', 'schoolgirl', 'housewife') carries its last part's
  gender, so a list of whole words cannot miss one.
- **Age band**: an explicit age ('هفتادساله', 'N ساله', 'seventy-year-old') gives the band of that age
  (:data:`AGE_BANDS`); else the most specific age word (:data:`AGE_WORDS`: old, middle-aged, young, teen, child);
  else a word that only says child-or-young (پسر, دختر: ``youth``) or grown-up (مرد, زن: ``adult``).
  :func:`age_bands_differ` says whether two bands cannot describe people of one age.
"""

from __future__ import annotations

import re
from functools import cache

from .persian import normalize_fa

NONE = "none"
"""Neither gender nor age band: the entity's words say nothing about it."""
GENDERS = ("female", "male")

PERSON_GENDER: dict[str, dict[str, str]] = {
    "en": {
        **dict.fromkeys(("man", "men", "male", "guy", "boy", "gentleman", "boyfriend", "grandpa"), "male"),
        **dict.fromkeys(("woman", "women", "female", "girl", "lady", "girlfriend", "grandma"), "female"),
    },
    "fa": {
        **dict.fromkeys(("مرد", "آقا", "آقای", "پسر", "پیرمرد", "داماد", "پسربچه"), "male"),
        **dict.fromkeys(("زن", "خانم", "بانو", "دختر", "پیرزن", "عروس", "دختربچه"), "female"),
    },
}
"""Words that give the gender of the person they name."""

KIN_GENDER: dict[str, dict[str, str | None]] = {
    "en": {
        **dict.fromkeys(("father", "dad", "son", "brother", "grandfather", "uncle", "husband"), "male"),
        **dict.fromkeys(("mother", "mom", "mum", "daughter", "sister", "grandmother", "aunt", "wife"), "female"),
        **dict.fromkeys(("father-in-law", "son-in-law", "brother-in-law"), "male"),
        **dict.fromkeys(("mother-in-law", "daughter-in-law", "sister-in-law"), "female"),
        "parents": None,
    },
    "fa": {
        **dict.fromkeys(("پدر", "برادر", "پدربزرگ", "عمو", "دایی", "شوهر", "پدرشوهر", "پدرزن"), "male"),
        **dict.fromkeys(("مادر", "خواهر", "مادربزرگ", "خاله", "عمه", "مادرشوهر", "مادرزن"), "female"),
        "همسر": None,
    },
}
"""Kinship nouns and the gender of the person each names (a husband is male); None: either."""

SPOUSES = frozenset({"wife", "husband", "شوهر"})
"""Kinship nouns whose possessor is the other spouse (the names stage names a husband by his wife)."""

PRONOUN_GENDER: dict[str, dict[str, str]] = {
    "en": {
        **dict.fromkeys(("he", "him", "his", "himself"), "male"),
        **dict.fromkeys(("she", "her", "hers", "herself"), "female"),
    },
    "fa": {},
}
"""Gendered pronouns; Persian has none (او is either)."""

GENDERED_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("woman", "female"), ("women", "female"), ("girl", "female"), ("girls", "female"),
    ("wife", "female"), ("wives", "female"), ("man", "male"), ("men", "male"), ("boy", "male"), ("boys", "male"),
)  # fmt: skip
"""English compound endings and the gender they give, the female ones first ('woman' ends in 'man')."""

NOT_GENDERED: frozenset[str] = frozenset(
    {
        *("human", "humans", "superhuman", "inhuman", "german", "germans", "roman", "romans", "oman", "ottoman"),
        *("ottomans", "turkman", "turkmen", "yemen", "talisman", "caiman", "shaman", "shamans", "ataman"),
        *("abdomen", "specimen", "regimen", "omen", "amen", "stamen", "hymen", "semen", "acumen", "lumen"),
        *("albumen", "bitumen", "dolmen", "rumen", "cerumen", "tomboy", "tomboys"),
    }
)
"""Words with a gendered ending that give no gender ('German', 'Roman', 'Turkmen', 'specimen'), or the other
('tomboy' is a girl: left to the context)."""

AGE_BANDS: tuple[tuple[str, int], ...] = (("child", 12), ("teen", 19), ("young", 39), ("middle", 59), ("old", 200))
"""Age bands by their last year of age: child ≤ 12, teen 13–19, young 20–39, middle-aged 40–59, old ≥ 60."""

AGE_WORDS: dict[str, dict[str, str]] = {
    "fa": {
        **dict.fromkeys(("پیرمرد", "پیرزن", "سالمند", "مسن", "بازنشسته", "پدربزرگ", "مادربزرگ", "کهنسال"), "old"),
        **dict.fromkeys(("میان‌سال", "میانسال"), "middle"),
        **dict.fromkeys(("جوان", "دانشجو", "دانشجوی"), "young"),
        **dict.fromkeys(("نوجوان",), "teen"),
        **dict.fromkeys(("کودک", "بچه", "پسربچه", "دختربچه", "خردسال"), "child"),
        **dict.fromkeys(("پسر", "دختر"), "youth"),
        **dict.fromkeys(("مرد", "زن", "آقا", "آقای", "خانم"), "adult"),
    },
    "en": {
        **dict.fromkeys(("elderly", "old", "retired", "retiree", "grandfather", "grandmother", "pensioner"), "old"),
        **dict.fromkeys(("middle-aged",), "middle"),
        **dict.fromkeys(("young", "student"), "young"),
        **dict.fromkeys(("teen", "teenager", "teenage", "adolescent"), "teen"),
        **dict.fromkeys(("child", "kid", "toddler"), "child"),
        **dict.fromkeys(("boy", "girl"), "youth"),
        **dict.fromkeys(("man", "woman", "gentleman", "lady"), "adult"),
    },
}
"""Words that give an age band. ``youth`` (a boy, a girl) may be a child, a teen or young; ``adult`` (a man, a
woman) young, middle-aged or old."""

_GENERIC_BANDS: dict[str, frozenset[str]] = {
    "youth": frozenset({"child", "teen", "young"}),
    "adult": frozenset({"young", "middle", "old"}),
}

_FA_UNITS = {
    "یک": 1, "دو": 2, "سه": 3, "چهار": 4, "پنج": 5, "شش": 6, "شیش": 6, "هفت": 7, "هشت": 8, "نه": 9,
    "ده": 10, "یازده": 11, "دوازده": 12, "سیزده": 13, "چهارده": 14, "پانزده": 15, "پونزده": 15, "شانزده": 16,
    "هفده": 17, "هجده": 18, "هیجده": 18, "نوزده": 19, "بیست": 20, "سی": 30, "چهل": 40, "پنجاه": 50, "شصت": 60,
    "هفتاد": 70, "هشتاد": 80, "نود": 90, "صد": 100,
}  # fmt: skip
_EN_UNITS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
_FA_NUMBER = "|".join(sorted(_FA_UNITS, key=len, reverse=True))
_FA_AGE = re.compile(rf"((?:(?:{_FA_NUMBER})(?:\s*و\s*|\u200cو|و)?)+|\d+)\s*\u200c?ساله")
_EN_NUMBER = "|".join(sorted(_EN_UNITS, key=len, reverse=True))
_EN_AGE = re.compile(rf"\b((?:(?:{_EN_NUMBER})-?)+|\d+)[- ]years?[- ]old\b", re.IGNORECASE)


def _number(words: str, units: dict[str, int]) -> int:
    """A spelled-out number under 200 ('بیست‌وپنج', 'twenty-five') or digits."""
    if words.isdigit():
        return int(words)
    pattern = "|".join(sorted(units, key=len, reverse=True))
    return sum(units[w] for w in re.findall(pattern, words.lower()))


def explicit_age(text: str, lang: str) -> int | None:
    """The age an entity states ('هفتادساله', 'مرد بیست‌وپنج ساله', 'a 70-year-old'), if any."""
    if lang == "fa":
        match = _FA_AGE.search(normalize_fa(text))
        return _number(match.group(1).replace("\u200c", ""), _FA_UNITS) if match else None
    match = _EN_AGE.search(text)
    return _number(match.group(1), _EN_UNITS) if match else None


def _band_of_age(age: int) -> str:
    return next(band for band, last in AGE_BANDS if age <= last)


_FA_CLAUSE = re.compile(r"\s(?:که|با|از)\s")
_EN_CLAUSE = re.compile(r"\s(?:who|whose|that|with|of|from)\s", re.IGNORECASE)


def _head_words(text: str, lang: str) -> list[str]:
    """The words of an entity's head phrase, head first: a relative clause or a complement names other people
    ('پسری که با مادر مطلقه‌اش زندگی می‌کند' is a boy; 'the mother of the groom' a woman), so it is cut off.
    A Persian head comes first ('مادر داماد'), an English head last ('the groom's mother'): English words are
    returned last first. A Persian head noun's indefinite ی ('پسری') is read as its noun."""
    if lang == "fa":
        words = _FA_CLAUSE.split(f" {normalize_fa(text)} ", maxsplit=1)[0].split()
        table = {**PERSON_GENDER["fa"], **KIN_GENDER["fa"], **AGE_WORDS["fa"]}
        head = words[0] if words else ""
        if head not in table and head.endswith("ی") and head[:-1] in table:
            words[0] = head[:-1]  # 'پسری که …': the indefinite head noun, never a later word ('جشن عروسی')
        return words
    head = _EN_CLAUSE.split(f" {text} ", maxsplit=1)[0]
    return re.findall(r"[a-z]+(?:-[a-z]+)*", head.lower())[::-1]


@cache
def english_word_gender(word: str) -> str | None:
    """The gender an English noun gives (``female``, ``male``) or None: a person or kin noun, or a
    compound on a gendered ending (:data:`GENDERED_SUFFIXES`, 'businessman', 'sportswoman', 'schoolgirl') unless
    it is one of :data:`NOT_GENDERED` ('German', 'human'). A hyphenated word is read by its last part
    ('mother-in-law' as a whole, 'middle-aged' not at all)."""
    word = word.lower()
    listed = PERSON_GENDER["en"].get(word) or KIN_GENDER["en"].get(word)
    if listed or word in KIN_GENDER["en"] or word in NOT_GENDERED:
        return listed
    last = word.rsplit("-", 1)[-1]
    if last != word:
        return english_word_gender(last)
    return next((gender for suffix, gender in GENDERED_SUFFIXES if word.endswith(suffix)), None)


@cache
def entity_gender(entity: str, lang: str) -> str:
    """``female``, ``male`` or :data:`NONE`: the first gender cue of the entity's head phrase (its head noun's,
    or a modifier's as in 'راننده‌ی زن'); an English word by :func:`english_word_gender`."""
    for word in _head_words(entity, lang):
        table = PERSON_GENDER[lang].get(word) or KIN_GENDER[lang].get(word)
        gender = english_word_gender(word) if lang == "en" else table
        if gender:
            return gender
    return NONE


@cache
def entity_age_band(entity: str, lang: str) -> str:
    """The entity's age band: from a stated age, else its most specific age word, else :data:`NONE`."""
    age = explicit_age(entity, lang)
    if age is not None:
        return _band_of_age(age)
    bands = [AGE_WORDS[lang][w] for w in _head_words(entity, lang) if w in AGE_WORDS[lang]]
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
    """The Persian entity's head-phrase words as :func:`_head_words` cuts them, a word read as its noun when that
    noun is a role, collective, status or maturity word ('دانشجوی جوان', 'خانواده‌ی مستاجر')."""
    known = {*ROLE_NOUNS, *COLLECTIVE_NOUNS, *STATUS_WORDS, *MATURITY["fa"]}
    return [_fa_lemma(word) if _fa_lemma(word) in known else word for word in _head_words(entity, "fa")]


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


MATURITY: dict[str, dict[str, str]] = {
    "fa": {
        **dict.fromkeys(("پسر", "دختر", "پسربچه", "دختربچه"), "youth"),
        **dict.fromkeys(("مرد", "زن", "آقا", "آقای", "خانم", "پیرمرد", "پیرزن"), "adult"),
    },
    "en": {**dict.fromkeys(("boy", "girl"), "youth"), **dict.fromkeys(("man", "woman", "gentleman", "lady"), "adult")},
}
"""Person nouns that say whether someone is grown up: a girl and a young woman may be of one age, but the words
set them in different bands of life ('دختر نابینا' against 'زن جوان بینا')."""


def entity_maturity(entity: str, lang: str) -> str:
    """``youth`` or ``adult`` from the entity's first person noun (:data:`MATURITY`), else :data:`NONE`."""
    return next((MATURITY[lang][w] for w in _head_words(entity, lang) if w in MATURITY[lang]), NONE)


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
    if category != "Gender" and genders_differ(entity_gender(stereo, "fa"), entity_gender(nonstereo, "fa")):
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
