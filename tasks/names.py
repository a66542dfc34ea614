"""Name proxies: explicit group mentions replaced by culturally indicative first names (Obscured but Not Erased
§4.1, §4.1.1, Appendix C; DESIGN.md §1 'names').

An example is mapped when both of its entities name a group of the name table (``annotations/names/``: per
language and group 5 female and 5 male first names). Each of its variants, one per sub-seed, gives each entity
one name and replaces every mention of the entity with it, in the context, the question and the entity's
option; the 'unknown' option, the label, the roles (``answer_info``), ``target_loc`` and the entity columns
carry over unchanged, and ``source_example_id`` links the variant to the original.

- **Seeds** (Appendix C): ``np.random.seed(42)``, then sub-seeds ``np.random.randint(1, 10000, 3)`` = 7271, 861,
  5391, one variant per sub-seed. Within a variant the names of an example are drawn by a generator seeded with
  the sub-seed and a hash of the example id, so they do not depend on the other rows of the table.
- **Gender** (§4.1.1, 'Identifying Gender Requirements'): each reference's own words (:data:`PERSON_GENDER`,
  :data:`KIN_NAME_GENDER`) and, in English, he/she pronouns. No cue: neutral, drawn from both genders. Cues
  that contradict each other leave the gender undecided: an optional LLM labeller decides, else the example is
  reported unmapped.
- **Substitution** (§4.1.1, 'String Substitution'): the reference patterns of :data:`REFERENCE_PATTERNS` keep
  the grammar ('the Italian father' → "Paolo's father", Persian ezafe 'پدر ترک' → 'پدر آیدین').

Examples that cannot be mapped (an entity that no name can stand for, such as an age group or a profession; a
mention no pattern covers) are never passed through: they go to the ``unmapped`` table with their reason.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from pathlib import Path
from string import Template
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tasks.artifacts import REPO_ROOT, StageOutput, count_reasons, sha256_bytes
from tasks.caching import stage_task
from tasks.inputs import InputError, read_csv_checked, require_filled, require_none, spreadsheet_row
from tasks.llm import LLMClient, LLMConfig, LLMRequest, open_store
from tasks.persian_text import normalize_fa
from tasks.schemas import EXAMPLE

STAGE = "names"
NAME_COLUMNS = ["lang", "group", "gender", "name", "transliteration"]
GENDERS = ("female", "male")
LANGUAGES = ("en", "fa")
"""The languages with reference patterns."""
NEUTRAL = "neutral"
UNDECIDED = "undecided"
NAMES_PER_GENDER = 5
"""The paper's 10 names per group: 5 female and 5 male (§4.1)."""
EXAMPLE_UNMAPPED = EXAMPLE.append(pa.field("reason", pa.string()))
GENDER_PROMPT_FILE = REPO_ROOT / "prompts" / "names_gender.txt"
TEXT_FIELDS = ("context", "question", "ans0", "ans1", "ans2")
_WORD = r"[\w\u200c]"
"""A Persian word character: a letter or the zero-width non-joiner inside a word."""


@dataclass(frozen=True)
class NamesParams:
    seed: int = 42
    """The global seed of Appendix C (``np.random.seed(42)``)."""
    n_seeds: int = 3
    """How many sub-seeds, hence variants per example."""
    gender_llm: bool = False
    """Ask an LLM for the gender of references whose cues contradict each other (off: they stay unmapped)."""


def sub_seeds(seed: int, n_seeds: int) -> list[int]:
    """The sub-seeds of Appendix C: ``np.random.seed(seed); np.random.randint(1, 10000, n_seeds)``, drawn from a
    private ``RandomState`` (the same Mersenne Twister stream) so numpy's global state is left alone."""
    return [int(s) for s in np.random.RandomState(seed).randint(1, 10000, n_seeds)]


# --- gender rules ---------------------------------------------------------------------------------------------

PERSON_GENDER: dict[str, dict[str, str]] = {
    "en": {
        **dict.fromkeys(("man", "guy", "boy", "gentleman", "boyfriend"), "male"),
        **dict.fromkeys(("woman", "girl", "lady", "girlfriend"), "female"),
    },
    "fa": {
        **dict.fromkeys(("مرد", "آقا", "آقای", "پسر", "پیرمرد", "داماد"), "male"),
        **dict.fromkeys(("زن", "خانم", "بانو", "دختر", "پیرزن", "عروس"), "female"),
    },
}
"""Words that give the gender of the person they name: the name replacing them has that gender."""

KIN_NAME_GENDER: dict[str, dict[str, str | None]] = {
    "en": {
        **dict.fromkeys(("father", "dad", "son", "brother", "grandfather", "uncle", "wife"), "male"),
        **dict.fromkeys(("mother", "mom", "mum", "daughter", "sister", "grandmother", "aunt", "husband"), "female"),
        "parents": None,
    },
    "fa": {
        **dict.fromkeys(("پدر", "برادر", "پدربزرگ", "عمو", "دایی"), "male"),
        **dict.fromkeys(("مادر", "خواهر", "مادربزرگ", "خاله", "عمه", "شوهر"), "female"),
        "همسر": None,
    },
}
"""Kinship nouns, whose name becomes the possessor ("Paolo's father", 'پدر آیدین'), and the gender of that
name. As in the paper, it is the gender of the reference ('the Italian father' is male, so Paolo); for a spouse
it is the other spouse's ('شوهر ترک' → 'شوهر آیلار', the husband of Aylar; 'the Italian wife' → "Paolo's
wife"); None (parents, همسر 'spouse') draws from both genders."""

PRONOUN_GENDER: dict[str, dict[str, str]] = {
    "en": {
        **dict.fromkeys(("he", "him", "his", "himself"), "male"),
        **dict.fromkeys(("she", "her", "hers", "herself"), "female"),
    },
    "fa": {},
}
"""Gendered pronouns; Persian has none (او is either)."""


# --- reference patterns ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReferencePattern:
    """One way a group is mentioned, and what replaces the mention.

    English patterns match the text around a group adjective: ``{group}`` (``{group1}``, ``{group2}`` in a
    coordination) is any group of the name table; a stray '{' before it (BBQ's template 23 has 'the
    {Mozambican man') is dropped. Persian patterns match a whole entity phrase, the text that filled a
    placeholder; in the text the phrase is replaced together with the indefinite article 'یک' before it, since
    a name takes no article. ``replace`` is a regex replacement in which ``{name}`` (``{name1}``, ``{name2}``) is
    the name. ``referent``: the name stands for the person mentioned (True) or owns what is mentioned ("Paolo's
    father", "Paolo's family": False; a pronoun then refers to the father or the family, not to Paolo).
    ``example`` becomes ``expected`` with ``names`` for the entities ``entities``; the tests check every row.
    """

    lang: str
    pattern_id: str
    match: str
    replace: str
    referent: bool
    entities: tuple[str, str]
    names: tuple[str, str]
    example: str
    expected: str


_EN_DET = r"(?i:the|an?|my)"
_EN_ADJ = r"(?:(?:other|new)\s+)*"
_EN_PERSON = (
    r"man|woman|guy|boy|girl|gentleman|lady|friend|student|speaker|coworker|colleague|neighbou?r|roommate|"
    r"classmate|girlfriend|boyfriend|person"
)
_EN_KIN = "|".join(sorted(KIN_NAME_GENDER["en"], key=len, reverse=True))
_EN_POSSESSED = r"family|group|team|fans|home|house|household"
_EN_BARE_END = r"(?=\s*(?:[,.;:!?)]|$)|\s+(?:and|or|but|who|which|that|while|though)\b)"
_FA_KIN = "|".join(sorted(KIN_NAME_GENDER["fa"], key=len, reverse=True))
_FA_PERSON = "|".join(sorted(PERSON_GENDER["fa"], key=len, reverse=True))
_EN_PAIR = ("Italian", "Japanese")
_EN_NAMES = ("Paolo", "Haruto")

REFERENCE_PATTERNS: tuple[ReferencePattern, ...] = (
    ReferencePattern(
        "en",
        "en-my-coordinated",
        r"\b(?P<det>(?i:my))\s+{group1}\s+and\s+{group2}\s+"
        r"(?P<plural>friends|coworkers|colleagues|neighbou?rs|roommates|classmates|students)\b",
        r"\g<det> \g<plural> {name1} and {name2}",
        True,
        _EN_PAIR,
        _EN_NAMES,
        "My Italian and Japanese friends were at the concert.",
        "My friends Paolo and Haruto were at the concert.",
    ),
    ReferencePattern(
        "en",
        "en-kinship",
        rf"\b(?:{_EN_DET}\s+)?{{group}}\s+(?P<kin>{_EN_KIN})\b",
        r"{name}'s \g<kin>",
        False,
        _EN_PAIR,
        ("Paolo", "Sakura"),
        "The Italian father and the Japanese mother were late.",
        "Paolo's father and Sakura's mother were late.",
    ),
    ReferencePattern(
        "en",
        "en-possessed",
        rf"\b(?:{_EN_DET}\s+{_EN_ADJ})?{{group}}\s+(?P<possessed>{_EN_POSSESSED})\b",
        r"{name}'s \g<possessed>",
        False,
        _EN_PAIR,
        _EN_NAMES,
        "I said hi to the new Italian family and the other new Japanese family's cook.",
        "I said hi to Paolo's family and Haruto's family's cook.",
    ),
    ReferencePattern(
        "en",
        "en-my-person",
        rf"\b(?P<det>(?i:my))\s+(?P<adj>{_EN_ADJ}){{group}}\s+(?P<noun>{_EN_PERSON})\b",
        r"\g<det> \g<adj>\g<noun> {name}",
        True,
        _EN_PAIR,
        _EN_NAMES,
        "I invited my Italian friend and my new Japanese coworker's sister.",
        "I invited my friend Paolo and my new coworker Haruto's sister.",
    ),
    ReferencePattern(
        "en",
        "en-person",
        rf"\b(?:{_EN_DET}\s+{_EN_ADJ})?{{group}}\s+(?P<noun>{_EN_PERSON}|one)\b",
        "{name}",
        True,
        _EN_PAIR,
        _EN_NAMES,
        "The Italian man was talking to a Japanese one.",
        "Paolo was talking to Haruto.",
    ),
    ReferencePattern(
        "en",
        "en-collective-predicate",
        rf"\b(?P<pre>(?i:are|were)\s+all(?:\s+actually)?)\s+{{group}}{_EN_BARE_END}",
        r"\g<pre> {name}'s",
        False,
        _EN_PAIR,
        _EN_NAMES,
        "The fans in question were all actually Italian and started it.",
        "The fans in question were all actually Paolo's and started it.",
    ),
    ReferencePattern(
        "en",
        "en-bare",
        rf"\b(?i:one|the other|an?|the)\s+{{group}}{_EN_BARE_END}",
        "{name}",
        True,
        _EN_PAIR,
        _EN_NAMES,
        "I have two friends, one Italian and the other Japanese, who met an Italian.",
        "I have two friends, Paolo and Haruto, who met Paolo.",
    ),
    ReferencePattern(
        "en",
        "en-predicate",
        rf"\b(?P<pre>(?i:is|was|are|were|am|be|been))\s+{{group}}{_EN_BARE_END}",
        r"\g<pre> {name}",
        True,
        _EN_PAIR,
        _EN_NAMES,
        "I write to two pen pals: one is Italian and the other is Japanese.",
        "I write to two pen pals: one is Paolo and the other is Haruto.",
    ),
    ReferencePattern(
        "fa",
        "fa-kinship",
        rf"(?P<kin>(?:{_FA_KIN})(?:\u200cی|ی)?)\s+{{group}}",
        r"\g<kin> {name}",
        False,
        ("پدر ترک", "مادر فارس"),
        ("آیدین", "آناهیتا"),
        "یک پدر ترک و یک مادر فارس به مدرسه آمدند. پدر ترک زودتر رفت.",
        "پدر آیدین و مادر آناهیتا به مدرسه آمدند. پدر آیدین زودتر رفت.",
    ),
    ReferencePattern(
        "fa",
        "fa-gendered-person",
        rf"(?P<noun>{_FA_PERSON})\s+{{group}}",
        "{name}",
        True,
        ("مرد ترک", "زن فارس"),
        ("آیدین", "آناهیتا"),
        "یک مرد ترک و یک زن فارس در صف بودند. مرد ترک زودتر رفت.",
        "آیدین و آناهیتا در صف بودند. آیدین زودتر رفت.",
    ),
    ReferencePattern(
        "fa",
        "fa-noun",
        r"(?P<noun>\S+(?:\s+\S+)*?)\s+{group}",
        "{name}",
        True,
        ("دانشجوی اصفهانی", "راننده‌ی کرد"),
        ("عباس", "کاوه"),
        "یک دانشجوی اصفهانی و یک راننده‌ی کرد با هم آشنا شدند. دانشجوی اصفهانی خندید.",
        "عباس و کاوه با هم آشنا شدند. عباس خندید.",
    ),
    ReferencePattern(
        "fa",
        "fa-bare",
        "{group}",
        "{name}",
        True,
        ("ترک", "فارس"),
        ("آیدین", "داریوش"),
        "یک ترک و یک فارس شریک شدند. ترک سود برد.",
        "آیدین و داریوش شریک شدند. آیدین سود برد.",
    ),
)
"""The reference patterns, in the order they are tried (the first that matches at a position wins)."""

FA_INDEFINITE = "یک"
"""The Persian indefinite article, dropped before a name ('یک مرد ترک' → 'آیدین')."""

_SLOT = re.compile("\ue000(\\d)([rp])\ue001")
_SENTENCE = re.compile(r"(?<=[.!?؟])(?:\s+|(?=[A-Z\ue000]))")


def _slot(entity: int, referent: bool) -> str:
    """The stand-in for entity ``entity``'s name while a text is rewritten (private-use characters)."""
    return f"\ue000{entity}{'r' if referent else 'p'}\ue001"


def _localise(text: str, index: int) -> str:
    """``text`` with its named groups and backreferences suffixed by ``_<index>``, so patterns can share a regex."""
    text = re.sub(r"\(\?P<(\w+)>", rf"(?P<\1_{index}>", text)
    return re.sub(r"\\g<(\w+)>", rf"\\g<\1_{index}>", text)


def _patterns(lang: str) -> list[tuple[int, ReferencePattern]]:
    return [(i, p) for i, p in enumerate(REFERENCE_PATTERNS) if p.lang == lang]


@cache
def _english_regex(labels: tuple[str, ...]) -> re.Pattern[str]:
    """All English patterns as one alternation (``p_<i>`` wraps pattern i), ``{group}`` = any of ``labels``."""
    alternation = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    parts = []
    for i, pattern in _patterns("en"):
        body = _localise(pattern.match, i)
        for slot, group in (("{group}", "g1"), ("{group1}", "g1"), ("{group2}", "g2")):
            body = body.replace(slot, rf"\{{?(?<![\w-])(?P<{group}_{i}>{alternation})(?![\w-])")
        parts.append(f"(?P<p_{i}>{body})")
    return re.compile("|".join(parts))


@dataclass(frozen=True)
class Rewrite:
    """A text with each mention replaced by its entity's slot, the patterns used and the gender cues found."""

    text: str
    patterns: tuple[str, ...]
    cues: tuple[tuple[int, str], ...]


def _word_cue(word: str, lang: str, referent: bool) -> str | None:
    """The name gender one word of a reference asks for (a Persian ezafe 'ی' after the word is ignored)."""
    table = PERSON_GENDER[lang] if referent else KIN_NAME_GENDER[lang]
    for form in (word, word.removesuffix("\u200cی"), word.removesuffix("ی")):
        if form in table:
            return table[form]
    return None


def _rewrite_english(text: str, groups: tuple[str, str], labels: tuple[str, ...]) -> Rewrite:
    used: list[str] = []
    cues: list[tuple[int, str]] = []

    def replace(match: re.Match[str]) -> str:
        index = int(str(match.lastgroup).removeprefix("p_"))
        pattern = REFERENCE_PATTERNS[index]
        found = [match.group(f"{g}_{index}") for g in ("g1", "g2") if f"{g}_{index}" in match.re.groupindex]
        if not all(label in groups for label in found):
            return match.group(0)
        entities = [groups.index(label) for label in found]
        replacement = _localise(pattern.replace, index)
        for slot, entity in zip(("{name1}", "{name2}"), entities, strict=False):
            replacement = replacement.replace(slot, _slot(entity, pattern.referent))
        replacement = replacement.replace("{name}", _slot(entities[0], pattern.referent))
        for key in ("noun", "kin"):
            word = match.groupdict().get(f"{key}_{index}")
            cue = _word_cue(word.lower(), "en", pattern.referent) if word else None
            cues.extend((entity, cue) for entity in entities if cue)
        used.append(pattern.pattern_id)
        return match.expand(replacement)

    return Rewrite(_english_regex(labels).sub(replace, text), tuple(used), tuple(cues))


@cache
def persian_entity(entity: str, group: str) -> tuple[str, str, bool, tuple[str, ...]] | None:
    """How a Persian entity phrase is replaced: (pattern id, replacement with ``{name}``, referent, gender cues);
    None when no pattern fits (the group is not the phrase's last word, as in 'ترک جوان')."""
    for _, pattern in _patterns("fa"):
        match = re.fullmatch(_localise(pattern.match, 0).replace("{group}", re.escape(group)), entity)
        if match:
            words = " ".join(v for k, v in match.groupdict().items() if k in ("noun_0", "kin_0") and v).split()
            cues = tuple(c for c in (_word_cue(w, "fa", pattern.referent) for w in words) if c)
            return pattern.pattern_id, match.expand(_localise(pattern.replace, 0)), pattern.referent, cues
    return None


def _rewrite_persian(text: str, entities: tuple[str, str], groups: tuple[str, str]) -> Rewrite:
    """Each entity phrase (with the 'یک' before it) replaced as its pattern says; a phrase no pattern fits is left
    in the text, where :func:`prepare` finds it as an unhandled reference."""
    forms = {e: form for e, g in zip(entities, groups, strict=True) if (form := persian_entity(e, g)) is not None}
    if not forms:
        return Rewrite(text, (), ())
    alternation = "|".join(re.escape(e) for e in sorted(forms, key=len, reverse=True))
    regex = re.compile(rf"(?<!{_WORD})(?:{FA_INDEFINITE}\s+)?(?P<entity>{alternation})(?!{_WORD})")
    used: list[str] = []
    cues: list[tuple[int, str]] = []

    def replace(match: re.Match[str]) -> str:
        entity = entities.index(match.group("entity"))
        pattern_id, replacement, referent, words = forms[match.group("entity")]
        used.append(pattern_id)
        cues.extend((entity, cue) for cue in words)
        return replacement.replace("{name}", _slot(entity, referent))

    return Rewrite(regex.sub(replace, text), tuple(used), tuple(cues))


def _pronoun_cues(text: str, lang: str) -> list[tuple[int, str]]:
    """Gender cues from pronouns: a pronoun refers to the nearest mention before it in its sentence, else to the
    first one after it, else to every mention of the last sentence that had one ('the Irish speaker and the
    Thai speaker. One because his talk...'). A pronoun whose mention is a possessor ("Paolo's family ... his
    wife") refers to the possessed, not to the name, and gives no cue."""
    pronouns = PRONOUN_GENDER[lang]
    if not pronouns:
        return []
    token = re.compile(_SLOT.pattern + r"|\b(" + "|".join(pronouns) + r")\b", re.IGNORECASE)
    cues: list[tuple[int, str]] = []
    previous: list[tuple[int, bool]] = []
    for sentence in _SENTENCE.split(text):
        tokens = [(m.start(), m.group(1), m.group(2), m.group(3)) for m in token.finditer(sentence)]
        slots = [(position, int(entity), kind == "r") for position, entity, kind, _ in tokens if entity]
        for position, _, _, pronoun in tokens:
            if not pronoun:
                continue
            before = [(e, r) for p, e, r in slots if p < position]
            after = [(e, r) for p, e, r in slots if p > position]
            targets = before[-1:] or after[:1] or previous
            cues.extend((entity, pronouns[pronoun.lower()]) for entity, referent in targets if referent)
        if slots:
            previous = [(e, r) for _, e, r in slots]
    return cues


@lru_cache(maxsize=1 << 16)
def rewrite(
    text: str, lang: str, entities: tuple[str, str], groups: tuple[str, str], labels: tuple[str, ...]
) -> Rewrite:
    """``text`` with every mention of the two entities replaced by their slots, and the gender cues it holds
    (memoised: an ambiguous context and its options recur across an example's questions and conditions).

    ``labels`` are the groups of the language's name table (English mentions are found by them)."""
    english = lang == "en"
    result = _rewrite_english(text, groups, labels) if english else _rewrite_persian(text, entities, groups)
    return Rewrite(result.text, result.patterns, result.cues + tuple(_pronoun_cues(result.text, lang)))


def fill(text: str, names: Sequence[str]) -> str:
    """A rewritten text with each slot replaced by its entity's name."""
    return _SLOT.sub(lambda m: names[int(m.group(1))], text)


def reference_gender(cues: Iterable[str]) -> str:
    """The gender of the name for one entity: the one its cues agree on, neutral without cues, undecided when
    they contradict each other."""
    found = set(cues)
    if not found:
        return NEUTRAL
    return found.pop() if len(found) == 1 else UNDECIDED


# --- the name table -------------------------------------------------------------------------------------------


@cache
def _group_regex(groups: tuple[str, ...]) -> re.Pattern[str]:
    alternation = "|".join(re.escape(g) for g in sorted(groups, key=len, reverse=True))
    return re.compile(rf"(?<![\w\u200c-])(?:{alternation})(?![\w\u200c-])")


def entity_groups(entity: str, groups: Sequence[str]) -> list[str]:
    """The groups of ``groups`` that ``entity`` names as a whole word ('مرد ترک' → ['ترک'])."""
    return sorted(set(_group_regex(tuple(groups)).findall(entity)))


def facing_groups(templates: pd.DataFrame, table: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(group, group, template_id) for every two groups that meet in an example of a Persian template: one among
    its stereotyped entities, the other among its non-stereotyped ones."""
    groups = sorted(set(table.loc[table["lang"] == "fa", "group"]))
    pairs = []
    for template in templates.itertuples():
        stereo = {g for e in template.stereo_entities for g in entity_groups(e, groups)}
        other = {g for e in template.nonstereo_entities for g in entity_groups(e, groups)}
        pairs += [(a, b, template.template_id) for a in sorted(stereo) for b in sorted(other) if a != b]
    return pairs


def validate_name_table(
    table: pd.DataFrame, path: Path, facing: Iterable[tuple[str, str, str]] | None = None
) -> pd.DataFrame:
    """Check a name table; raise :class:`InputError` naming the file, the row and the problem.

    Every cell filled, lang en or fa, gender female or male, no name twice in one group, at least 5 names of each
    gender per group, and no name given to two groups that can meet in one example (the proxy must tell them
    apart): ``facing`` lists those pairs as (group, group, where); ``None`` means any two groups of one language."""
    require_filled(table, NAME_COLUMNS, path)
    for column, allowed in (("lang", LANGUAGES), ("gender", GENDERS)):
        require_none(
            path,
            ~table[column].isin(allowed),
            lambda i, column=column, allowed=allowed: (
                f"{column} {table.at[i, column]!r} is not one of {', '.join(allowed)}"
            ),
        )
    repeated = table.duplicated(["lang", "group", "name"])
    if repeated.any():
        index = repeated.idxmax()
        row = table.loc[index]
        same = (table["lang"] == row.lang) & (table["group"] == row.group) & (table["name"] == row["name"])
        first = table.index[same]
        raise InputError(
            path,
            spreadsheet_row(index),
            f"name {row['name']!r} appears twice in group {row.group!r} (first in row {spreadsheet_row(first[0])})",
        )
    for (lang, group), rows in table.groupby(["lang", "group"], sort=True):
        counts = rows["gender"].value_counts()
        for gender in GENDERS:
            if counts.get(gender, 0) < NAMES_PER_GENDER:
                raise InputError(
                    path,
                    spreadsheet_row(rows.index[0]),
                    f"group {group!r} ({lang}) has {counts.get(gender, 0)} {gender} names; "
                    f"at least {NAMES_PER_GENDER} are needed",
                )
    meets = None if facing is None else {frozenset((a, b)): where for a, b, where in facing}
    for (lang, name), rows in table.groupby(["lang", "name"], sort=True):
        owners = list(dict.fromkeys(rows["group"]))
        for i, a in enumerate(owners):
            for b in owners[i + 1 :]:
                where = "" if meets is None else meets.get(frozenset((a, b)))
                if where is None:
                    continue
                second = rows.index[rows["group"] == b][0]
                context = f" in template {where}" if where else ""
                raise InputError(
                    path,
                    spreadsheet_row(second),
                    f"name {name!r} ({lang}) is given to group {a!r} (row {spreadsheet_row(rows.index[0])}) and to "
                    f"group {b!r}, which meet in one example{context}: the proxy could not tell them apart",
                )
    return table


def load_name_table(path: Path, templates: pd.DataFrame | None = None) -> pd.DataFrame:
    """A name table (columns lang, group, gender, name, transliteration; others ignored), Persian normalised
    and validated. With ``templates`` (Persian), a name may be shared only by groups that never meet in one
    example; without, by no two groups of one language."""
    table = read_csv_checked(path, NAME_COLUMNS)[NAME_COLUMNS]
    persian = table["lang"] == "fa"
    for column in ("group", "name"):
        table.loc[persian, column] = table.loc[persian, column].map(normalize_fa)
    facing = None if templates is None else facing_groups(templates, table)
    return validate_name_table(table, path, facing).reset_index(drop=True)


# --- the stage ------------------------------------------------------------------------------------------------


class Unmapped(Exception):
    """An example the proxy cannot map: the reason, the entities it concerns and a detail."""

    def __init__(self, reason: str, entities: Sequence[str] = ("",), detail: str = "") -> None:
        super().__init__(reason)
        self.reason, self.entities, self.detail = reason, tuple(entities), detail


@dataclass
class Prepared:
    """One mappable example: its texts with slots, its entities' groups and name genders, the patterns used."""

    row: dict[str, Any]
    texts: dict[str, str]
    groups: tuple[str, str]
    genders: list[str]
    patterns: list[str]
    request_ids: list[str]


def _texts(row: Mapping[str, Any]) -> dict[str, str]:
    """The texts a name may go into: context, question and the two entity options (never 'unknown')."""
    roles = row["answer_info"]
    return {f: row[f] for f in TEXT_FIELDS if roles.get(f) != "unknown"}


def _residue(text: str, surface: str) -> str:
    """The words around a mention left in ``text`` (''), for the report of an unhandled reference."""
    match = re.search(rf"(?<![\w\u200c-]){re.escape(surface)}", text)
    return "" if match is None else text[max(0, match.start() - 30) : match.end() + 30]


def prepare(row: Mapping[str, Any], groups_by_lang: Mapping[str, tuple[str, ...]]) -> Prepared:
    """Rewrite one example, or raise :class:`Unmapped` with the reason."""
    lang = row["lang"]
    labels = groups_by_lang.get(lang)
    if not labels:
        raise Unmapped("no_names_for_language", detail=lang)
    entities = (row["stereo_entity"], row["nonstereo_entity"])
    found = [entity_groups(entity, labels) for entity in entities]
    nameless = [entity for entity, groups in zip(entities, found, strict=True) if not groups]
    if nameless:
        raise Unmapped("entity_not_in_name_table", nameless)
    several = [(entity, groups) for entity, groups in zip(entities, found, strict=True) if len(groups) > 1]
    if several:
        raise Unmapped("entity_names_several_groups", [several[0][0]], ", ".join(several[0][1]))
    groups = [g[0] for g in found]
    if groups[0] == groups[1]:
        raise Unmapped("entities_share_group", entities, groups[0])
    pair = (groups[0], groups[1])
    rewrites = {field: rewrite(text, lang, entities, pair, labels) for field, text in _texts(row).items()}
    surfaces = entities if lang != "en" else pair
    for field, result in rewrites.items():
        for entity, surface in zip(entities, surfaces, strict=True):
            left = _residue(result.text, surface)
            if left:
                raise Unmapped("unhandled_reference", [entity], f"{field}: …{left}…")
    for index, entity in enumerate(entities):
        if f"\ue000{index}" not in rewrites["context"].text:
            raise Unmapped("mention_not_found", [entity], "not in the context")
    cues = [c for result in rewrites.values() for c in result.cues]
    genders = [reference_gender(g for e, g in cues if e == index) for index in range(2)]
    return Prepared(
        row=dict(row),
        texts={field: result.text for field, result in rewrites.items()},
        groups=pair,
        genders=genders,
        patterns=[p for result in rewrites.values() for p in result.patterns],
        request_ids=[],
    )


def name_pools(table: pd.DataFrame) -> dict[tuple[str, str, str], tuple[str, ...]]:
    """(lang, group, female | male | neutral) → the names to draw from, sorted so the table's row order does not
    matter; neutral references draw from both genders (§4.1.1, 'Name Selection')."""
    pools: dict[tuple[str, str, str], tuple[str, ...]] = {}
    for (lang, group), rows in table.groupby(["lang", "group"], sort=True):
        for gender in GENDERS:
            pools[(lang, group, gender)] = tuple(sorted(rows.loc[rows["gender"] == gender, "name"]))
        pools[(lang, group, NEUTRAL)] = tuple(sorted(rows["name"]))
    return pools


def _example_seed(example_id: str) -> int:
    return int(hashlib.sha256(example_id.encode("utf-8")).hexdigest()[:16], 16)


def draw_names(pools: Sequence[Sequence[str]], example_id: str, sub_seed: int) -> list[str]:
    """One name per entity from its pool, by a generator seeded with the sub-seed and the example id; the second
    entity never gets the first one's name."""
    draws = np.random.default_rng([sub_seed, _example_seed(example_id)]).random(2)
    first = pools[0][int(draws[0] * len(pools[0]))]
    rest = [name for name in pools[1] if name != first]
    return [first, rest[int(draws[1] * len(rest))]]


def load_gender_prompt(path: Path = GENDER_PROMPT_FILE) -> str:
    """The LLM labeller's prompt (``prompts/names_gender.txt``); the flow passes its text so its hash is an input."""
    return path.read_text(encoding="utf-8")


def gender_request(row: Mapping[str, Any], entity: str, prompt: str) -> LLMRequest:
    """The question to the LLM labeller for one entity of one example (§4.1.1: GPT-4o labelled the genders)."""
    options = "\n".join(f"- {row[f]}" for f in ("ans0", "ans1", "ans2"))
    text = Template(prompt).substitute(
        context=row["context"], question=row["question"], options=options, mention=entity
    )
    return LLMRequest(
        messages=(("user", text),),
        prompt_hash=sha256_bytes(prompt.encode("utf-8")),
        stage=STAGE,
        context=f"example {row['example_id']}, entity {entity}",
    )


def label_undecided(prepared: Sequence[Prepared], client: LLMClient, prompt: str) -> None:
    """Ask the LLM for every undecided gender; an answer other than female, male or neutral leaves it undecided."""
    pending = [(item, index) for item in prepared for index, g in enumerate(item.genders) if g == UNDECIDED]
    entity_columns = ("stereo_entity", "nonstereo_entity")
    requests = [gender_request(item.row, item.row[entity_columns[index]], prompt) for item, index in pending]
    if not requests:
        return
    for (item, index), answer in zip(pending, client.complete_many(requests), strict=True):
        label = answer.text.strip().strip(".").lower()
        if label in (*GENDERS, NEUTRAL):
            item.genders[index] = label
        item.request_ids.append(answer.request_id)


def _listed(value: Iterable[str] | None) -> list[str]:
    """A list column's value as a list (parquet gives arrays, hand-made rows lists or None)."""
    return [] if value is None else list(value)


def _variant_row(item: Prepared, names: Sequence[str], sub_seed: int) -> dict[str, Any]:
    row = dict(item.row)
    row.update({field: fill(text, names) for field, text in item.texts.items()})
    row.update(
        example_id=f"{item.row['example_id']}-names-{sub_seed}",
        variant=f"names-{sub_seed}",
        source_example_id=item.row["example_id"],
        llm_request_ids=[*_listed(item.row["llm_request_ids"]), *item.request_ids],
    )
    return row


def names(
    examples: pd.DataFrame,
    name_table: pd.DataFrame,
    params: NamesParams,
    client: LLMClient | None = None,
    prompt: str = "",
) -> StageOutput:
    """The name-proxy variants of every mappable example, one per sub-seed, and every unmapped example with its
    reason (§4.1.1, Appendix C). ``client`` and ``prompt`` are needed only when ``params.gender_llm`` is on."""
    seeds = sub_seeds(params.seed, params.n_seeds)
    pools = name_pools(name_table)
    groups_by_lang = {lang: tuple(sorted(set(rows["group"]))) for lang, rows in name_table.groupby("lang")}
    prepared: list[Prepared] = []
    failures: list[tuple[dict[str, Any], Unmapped]] = []
    for row in examples.to_dict("records"):
        try:
            prepared.append(prepare(row, groups_by_lang))
        except Unmapped as unmapped:
            failures.append((row, unmapped))
    if params.gender_llm:
        if client is None:
            raise ValueError("names: gender_llm is on but no LLM client was given")
        label_undecided(prepared, client, prompt)
    entity_columns = ("stereo_entity", "nonstereo_entity")
    for item in [p for p in prepared if UNDECIDED in p.genders]:
        index = item.genders.index(UNDECIDED)
        entity = item.row[entity_columns[index]]
        failures.append((item.row, Unmapped("gender_undecided", [entity], "contradicting cues")))
    mapped = [p for p in prepared if UNDECIDED not in p.genders]
    rows, per_seed = [], []
    for sub_seed in seeds:
        drawn: set[str] = set()
        for item in mapped:
            lang = item.row["lang"]
            choice = [pools[(lang, group, gender)] for group, gender in zip(item.groups, item.genders, strict=True)]
            chosen = draw_names(choice, str(item.row["example_id"]), sub_seed)
            drawn.update(chosen)
            rows.append(_variant_row(item, chosen, sub_seed))
        counts = {"in": len(mapped), "out": len(mapped), "distinct_names": len(drawn)}
        per_seed.append({"sub_seed": sub_seed, "variant": f"names-{sub_seed}", **counts})
    variants = pd.DataFrame(rows, columns=EXAMPLE.names)
    unmapped = pd.DataFrame(
        [{**row, "reason": failure.reason} for row, failure in failures], columns=EXAMPLE_UNMAPPED.names
    )
    report = _report(examples, mapped, unmapped, failures, per_seed, params)
    if client is not None:
        report["llm"] = client.usage(STAGE).as_dict()
    return StageOutput(
        tables={"examples": variants, "unmapped": unmapped},
        schemas={"examples": EXAMPLE, "unmapped": EXAMPLE_UNMAPPED},
        report=report,
    )


def _report(
    examples: pd.DataFrame,
    mapped: Sequence[Prepared],
    unmapped: pd.DataFrame,
    failures: Sequence[tuple[dict[str, Any], Unmapped]],
    per_seed: Sequence[dict[str, Any]],
    params: NamesParams,
) -> dict[str, Any]:
    """Counts in and out, per sub-seed (with the number of distinct names drawn) and per category, the genders of
    the references, the patterns used and every unmapped mention."""
    seeds = [row["sub_seed"] for row in per_seed]
    mapped_categories = pd.Series([p.row["category"] for p in mapped], dtype="object")
    per_category = {}
    for category in sorted(set(examples["category"])):
        n_mapped = int((mapped_categories == category).sum())
        per_category[str(category)] = {
            "in": int((examples["category"] == category).sum()),
            "mapped": n_mapped,
            "unmapped": int((unmapped["category"] == category).sum()),
            "out": n_mapped * len(seeds),
        }
    genders = pd.Series([g for p in mapped for g in p.genders], dtype="object")
    patterns = pd.Series([pattern for p in mapped for pattern in p.patterns], dtype="object")
    return {
        "stage": STAGE,
        "parameters": asdict(params),
        "sub_seeds": list(seeds),
        "counts": {"in": len(examples), "out": len(mapped) * len(seeds), "mapped": len(mapped)},
        "dropped": {"total": len(unmapped), "by_reason": count_reasons(unmapped["reason"])},
        "drops": [
            {"example_id": str(row["example_id"]), "reason": f.reason, "entity": entity, "detail": f.detail}
            for row, f in failures
            for entity in f.entities
        ],
        "per_sub_seed": list(per_seed),
        "per_category": per_category,
        "reference_genders": count_reasons(genders),
        "patterns": count_reasons(patterns),
    }


def open_client(config: LLMConfig, transcript: Path | None) -> LLMClient:
    """An LLM client over the configured response store, with a transcript's answers imported first."""
    store = open_store(config.store_path)
    if transcript is not None:
        store.import_jsonl(transcript)
    return LLMClient(config, store)


def names_stage(
    examples: pd.DataFrame,
    name_table: pd.DataFrame,
    params: NamesParams,
    llm: LLMConfig | None = None,
    transcript: Path | None = None,
    prompt: str = "",
) -> StageOutput:
    """The stage as the flow runs it: the LLM labeller is opened only when ``params.gender_llm`` is on."""
    if not params.gender_llm:
        return names(examples, name_table, params)
    if llm is None or not prompt:
        raise ValueError("names: gender_llm is on; give the [llm] configuration and load_gender_prompt()")
    return names(examples, name_table, params, open_client(llm, transcript), prompt)


# --- BBQ records ----------------------------------------------------------------------------------------------

BBQ_KEYS = (
    "example_id",
    "question_index",
    "question_polarity",
    "context_condition",
    "category",
    "answer_info",
    "additional_metadata",
    *TEXT_FIELDS,
    "label",
)


def read_bbq_jsonl(path: Path) -> list[dict[str, Any]]:
    """BBQ records, one JSON object a line; a line that is not one names its number."""
    if not path.is_file():
        raise InputError(path, None, "file not found")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, number, f"not a JSON object ({exc.msg})") from None
        missing = [key for key in BBQ_KEYS if key not in record]
        if missing:
            raise InputError(path, number, f"missing key(s) {', '.join(missing)}")
        records.append(record)
    return records


def _bbq_assignment(record: Mapping[str, Any], target: int) -> str:
    """BBQ's disambiguated examples as PBBQ's assignments: biased when the stereotyped entity answers the negative
    question (or the other one the non-negative)."""
    if record["context_condition"] != "disambig":
        return "none"
    stereotyped_answers = (record["label"] == target) == (record["question_polarity"] == "neg")
    return "biased" if stereotyped_answers else "counter_biased"


def bbq_examples(records: Sequence[Mapping[str, Any]], lang: str) -> tuple[pd.DataFrame, list[dict[str, str]]]:
    """BBQ records as example rows: the answer labeled 'unknown' keeps that role, the one whose label is among
    the record's ``stereotyped_groups`` is stereotyped, the other non-stereotyped. A record without exactly one
    stereotyped answer is returned as rejected (it has no roles to carry over)."""
    rows, rejected = [], []
    for record in records:
        info = record["answer_info"]
        stereotyped = set(record["additional_metadata"].get("stereotyped_groups") or [])
        entity_options = [f"ans{i}" for i in range(3) if info[f"ans{i}"][1] != "unknown"]
        marked = [option for option in entity_options if info[option][0] in stereotyped]
        if len(entity_options) != 2 or len(marked) != 1:
            rejected.append({"example_id": str(record["example_id"]), "reason": "no_single_stereotyped_answer"})
            continue
        stereo = marked[0]
        other = next(option for option in entity_options if option != stereo)
        roles = {f"ans{i}": "unknown" for i in range(3)} | {stereo: "stereotyped", other: "non-stereotyped"}
        target = int(stereo[-1])
        first, second = (record["context"].find(info[o][0]) for o in (stereo, other))
        rows.append(
            {
                "example_id": str(record["example_id"]),
                "template_id": f"{record['category']}-{record['question_index']}",
                "stereotype_id": "",
                "category": record["category"],
                "question_index": str(record["question_index"]),
                "question_polarity": record["question_polarity"],
                "context_condition": record["context_condition"],
                **{field: record[field] for field in TEXT_FIELDS},
                "label": int(record["label"]),
                "answer_info": roles,
                "target_loc": target,
                "assignment": _bbq_assignment(record, target),
                "entity_order": "stereo_first" if 0 <= first < second or second < 0 else "nonstereo_first",
                "stereo_entity": info[stereo][0],
                "nonstereo_entity": info[other][0],
                "lexical_variant": "",
                "lang": lang,
                "variant": "original",
                "source_example_id": None,
                "llm_request_ids": [],
            }
        )
    return pd.DataFrame(rows, columns=EXAMPLE.names), rejected


def bbq_variants(records: Sequence[Mapping[str, Any]], variants: pd.DataFrame) -> list[dict[str, Any]]:
    """Each variant as a BBQ record: its source record with the new texts and id, ``variant`` and
    ``source_example_id`` (the source's own id, as BBQ wrote it)."""
    sources = {str(record["example_id"]): record for record in records}
    out = []
    for row in variants.itertuples():
        source = sources[row.source_example_id]
        record = {**source, **{field: getattr(row, field) for field in TEXT_FIELDS}}
        record.update(example_id=row.example_id, variant=row.variant, source_example_id=source["example_id"])
        out.append(record)
    return out


def with_rejected(report: Mapping[str, Any], rejected: Sequence[Mapping[str, str]], n_records: int) -> dict[str, Any]:
    """The stage's report for a BBQ file: the records that had no roles (:func:`bbq_examples`) counted in and
    listed with the unmapped ones."""
    reasons = [*[d["reason"] for d in report["drops"]], *[r["reason"] for r in rejected]]
    by_example = {d["example_id"]: d["reason"] for d in [*report["drops"], *rejected]}
    return {
        **report,
        "counts": {**report["counts"], "in": n_records},
        "dropped": {"total": len(by_example), "by_reason": count_reasons(pd.Series(list(by_example.values())))},
        "drops": [*report["drops"], *[{**r, "entity": "", "detail": ""} for r in rejected]],
        "mentions_by_reason": count_reasons(pd.Series(reasons, dtype="object")),
    }


names_task = stage_task(names_stage)
