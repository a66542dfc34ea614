"""How a group is mentioned, and how the mention becomes a name (Obscured but Not Erased §4.1.1, 'Identifying
Gender Requirements' and 'String Substitution').

- **Substitution**: the reference patterns of :data:`REFERENCE_PATTERNS` keep the grammar ('the Italian father'
  → "Paolo's father", Persian ezafe 'پدر ترک' → 'پدر آیدین'). A text is first rewritten with a slot per entity
  (:func:`rewrite`), then each slot is filled with the entity's name (:func:`fill`), so one rewrite serves every
  variant.
- **Gender**: each reference's own words (:data:`pbbq.tasks.text.cues.PERSON_GENDER`, :data:`KIN_NAME_GENDER`) and, in
  English, he/she pronouns. No cue: neutral. Cues that contradict each other leave the gender undecided
  (:func:`reference_gender`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from ..text.cues import KIN_GENDER, PERSON_GENDER, PRONOUN_GENDER, SPOUSES

NEUTRAL = "neutral"
"""A reference without a gender cue."""
UNDECIDED = "undecided"
"""A reference whose cues contradict each other."""
_WORD = r"[\w\u200c]"
"""A Persian word character: a letter or the zero-width non-joiner inside a word."""

# --- gender rules ---------------------------------------------------------------------------------------------

KIN_NAME_GENDER: dict[str, dict[str, str | None]] = {
    lang: {
        word: ({"male": "female", "female": "male"}[gender] if word in SPOUSES and gender else gender)
        for word, gender in table.items()
    }
    for lang, table in KIN_GENDER.items()
}
"""Kinship nouns, whose name becomes the possessor ("Paolo's father", 'پدر آیدین'), and the gender of that
name. As in the paper, it is the gender of the reference ('the Italian father' is male, so Paolo); for a spouse
it is the other spouse's ('شوهر ترک' → 'شوهر آیلار', the husband of Aylar; 'the Italian wife' → "Paolo's
wife"); None (parents, همسر 'spouse') draws from both genders."""


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


def rewrite(
    text: str, lang: str, entities: tuple[str, str], groups: tuple[str, str], labels: tuple[str, ...]
) -> Rewrite:
    """``text`` with every mention of the two entities replaced by their slots, and the gender cues it holds
    (memoised for a run of the stage by :class:`pbbq.tasks.names.prepare.Lexicon`).

    ``groups`` are the words by which the two entities name their groups ('ترک' in 'مرد ترک', also when the
    table files ترک as an alias of آذری); ``labels`` every such word of the language's name table (English
    mentions are found by them)."""
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
