"""The synthetic build's phrase book: the placeholder terms, groups, categories, traits, frames and lexical
variants of ``phrases.toml`` (its header says how a block is written), in Persian and English.

Everything the generator writes and the stand-in model answers is built from these phrases (:mod:`.generate`,
:mod:`.model`); they are placeholders and state no finding about any group.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..text.categories import SURVEY_CODES
from ..text.languages.fa import normalize_fa

PHRASES: dict[str, Any] = tomllib.loads(Path(__file__).with_name("phrases.toml").read_text(encoding="utf-8"))
"""The phrase book's blocks (``phrases.toml`` beside this module; its header says how a block is written)."""


@dataclass(frozen=True)
class Term:
    """A Persian phrase (normalised as the loaders normalise it) and its English."""

    fa: str
    en: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "fa", normalize_fa(self.fa))


def _terms(block: str) -> tuple[Term, ...]:
    """``fa = en`` pairs separated by ``;`` or by lines."""
    pairs = [item.split("=") for line in block.strip().splitlines() for item in line.split(";") if item.strip()]
    return tuple(Term(fa.strip(), en.strip()) for fa, en in pairs)


@dataclass(frozen=True)
class Group:
    """A group: its plural label (the questionnaire's target or non-target group) and the words that make its
    entities (adjectives after a head noun, a gender head, or whole entity phrases: see :class:`Category`)."""

    label: Term
    words: tuple[Term, ...]


def _groups(block: str) -> tuple[Group, ...]:
    """One group per line, ``label_fa = label_en | word_fa = word_en; ...``; a line without ``|`` goes on with
    the words of the group above."""
    rows: list[list[str]] = []
    for line in block.strip().splitlines():
        if "|" in line:
            rows.append(line.split("|"))
        else:
            rows[-1][1] += f"; {line}"
    return tuple(Group(_terms(label)[0], _terms(words)) for label, words in rows)


@dataclass(frozen=True)
class Category:
    """How a category's entities are made. ``modifier``: a head noun and the group's adjective ('همسایه‌ی کرد',
    'Kurdish neighbor'); ``gender``: the group's gender head and a descriptor ('زن راننده', 'female driver');
    ``form``: the group's own phrases ('راننده‌ی تاکسی'). ``glossary``: the adjectives are glossary terms."""

    code: str
    kind: str
    groups: tuple[Group, ...]
    glossary: bool


NEUTRAL_HEADS = _terms(PHRASES["neutral_heads"])
"""Head nouns that give neither a gender nor an age (:mod:`pbbq.tasks.text.cues`), so no pair of them is confounded."""
HEADS: dict[str, tuple[Term, ...]] = {
    "neutral": NEUTRAL_HEADS,
    "male": _terms(PHRASES["heads"]["male"]),
    "female": _terms(PHRASES["heads"]["female"]),
}
DESCRIPTORS = _terms(PHRASES["descriptors"])
"""What follows the gender head of a Gender entity ('زن راننده'): a word that gives no gender or age."""

GROUPS: dict[str, str] = PHRASES["category_groups"]
ENTITY_KINDS: dict[str, tuple[str, bool]] = {
    "Age": ("modifier", False),
    "Profession": ("form", False),
    "Socio-economic Status": ("modifier", True),
    "Educational Background": ("modifier", True),
    "Disability": ("modifier", True),
    "Disease": ("modifier", True),
    "Domestic Area": ("modifier", True),
    "Ethnicity": ("modifier", True),
    "Family Structure": ("modifier", True),
    "Gender": ("gender", False),
    "Property Ownership": ("form", False),
    "Nationality": ("modifier", True),
    "Physical Appearance": ("modifier", True),
    "Political Orientation": ("modifier", True),
    "Religion": ("modifier", True),
    "Sexual Orientation": ("modifier", True),
}
"""Per category of PBBQ §3.1 (:mod:`pbbq.tasks.text.categories`), how its entities are made and whether its
adjectives are glossary terms (:class:`Category`)."""
CATEGORY_SPECS: dict[str, Category] = {
    name: Category(SURVEY_CODES[name], kind, _groups(GROUPS[name]), glossary)
    for name, (kind, glossary) in ENTITY_KINDS.items()
}
"""Per category of PBBQ §3.1, its groups and how their entities are made (placeholders, not the paper's)."""


@dataclass(frozen=True)
class Trait:
    """A stereotyped trait: the questionnaire's statement, the two questions (PBBQ §3.4) and the two clauses of
    a disambiguated continuation (negative, non-negative), in Persian and English. No English pronoun."""

    statement: Term
    negative: Term
    nonnegative: Term
    negative_clause: Term
    nonnegative_clause: Term

    @property
    def continuation(self) -> Term:
        """The biased continuation: ``{stereo}`` has the negative trait (PBBQ §3.3.3, Appendix D)."""
        return Term(
            f"{{stereo}} {self.negative_clause.fa}، اما {{nonstereo}} {self.nonnegative_clause.fa}.",
            f"The {{stereo}} {self.negative_clause.en}, but the {{nonstereo}} {self.nonnegative_clause.en}.",
        )


def _traits(block: str) -> tuple[Trait, ...]:
    """Traits separated by blank lines, each five ``fa = en`` lines (see :class:`Trait`)."""
    return tuple(Trait(*_terms(chunk)) for chunk in block.strip().split("\n\n"))


TRAITS = _traits(PHRASES["traits"])
"""The traits the stereotypes are about: generic placeholders, each usable in any category."""

LEX_POOLS: dict[str, tuple[Term, ...]] = {
    "place": _terms(PHRASES["lex_pools"]["place"]),
    "occasion": _terms(PHRASES["lex_pools"]["occasion"]),
}
"""Lexical variants (PBBQ §3.3: the optional third placeholder), by the slot a frame has for them."""


def _frames(block: str) -> tuple[tuple[str, Term], ...]:
    """Two lines per opening: ``slot | Persian`` (slot ``-``: no lexical variant), then its English."""
    lines = block.strip().splitlines()
    pairs = [(head.split("|", 1), english.strip()) for head, english in zip(lines[::2], lines[1::2], strict=True)]
    return tuple((slot.strip().strip("-"), Term(fa.strip(), english)) for (slot, fa), english in pairs)


FRAMES = _frames(PHRASES["frames"])
"""Ambiguous-context openings (slot: the kind of lexical variant, '' for none). Symmetric in the two entities, so
they read right with the placeholders exchanged (instantiate's other order of mention)."""
CLOSERS = _terms(PHRASES["closers"])
"""Neutral sentences after an opening, so that every template's ambiguous context is its own."""
UNKNOWN_PHRASES = _terms(PHRASES["unknown_phrases"])
"""The 'unknown' option's phrasings, as annotations/unknown_phrases.csv has them."""
