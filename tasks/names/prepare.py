"""An example made ready for names: its mentions replaced by slots, its entities' groups, genders and age bands, or
why it cannot be mapped (:class:`Unmapped`)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pandas as pd

from ..text.cues import NONE, entity_age_band
from .draw import PairRequest, pair_eras
from .patterns import persian_entity, reference_gender, rewrite
from .tables import entity_mentions, group_words

TEXT_FIELDS = ("context", "question", "ans0", "ans1", "ans2")
ENTITY_COLUMNS = ("stereo_entity", "nonstereo_entity")


class Unmapped(Exception):
    """An example the proxy cannot map: the reason, the entities it concerns and a detail."""

    def __init__(self, reason: str, entities: Sequence[str] = ("",), detail: str = "") -> None:
        super().__init__(reason)
        self.reason, self.entities, self.detail = reason, tuple(entities), detail


Failure = tuple[int, str, Unmapped]
"""An example the stage cannot map: its row number in the input, its ``example_id`` and why."""


DrawKey = tuple[str, tuple[str, ...]]
"""An entity pair (:meth:`Prepared.pair_key`) and the genders of its two entities' names."""
DrawOrder = tuple[DrawKey, DrawKey] | tuple[()]
"""Where an example's draw came (its group of pairs reading alike, by its first key, and its own key); ``()`` for
an example never drawn."""


@dataclass
class Prepared:
    """One mappable example: its texts with slots, its entities' groups, name genders and age bands, the patterns
    used and the LLM requests that decided a gender."""

    row: dict[str, Any]
    """The example's :data:`ROW_COLUMNS`."""
    position: int
    """The example's row number in the stage's input (its variants and drops are taken from there)."""
    texts: dict[str, str]
    groups: tuple[str, str]
    genders: list[str]
    age_bands: tuple[str, str]
    patterns: list[str]
    request_ids: list[str]

    @property
    def example_id(self) -> str:
        return str(self.row["example_id"])

    def request(self) -> PairRequest:
        """What the example asks of its names (:mod:`pbbq.tasks.names.draw`)."""
        genders = (self.genders[0], self.genders[1])
        return PairRequest(self.row["lang"], self.groups, genders, pair_eras(self.age_bands))

    def pair_key(self) -> str:
        """The entity pair the example instantiates: its template, two entities and lexical variant. The twelve
        examples of a pair (conditions, polarities, assignments, orders) take the same names, so that a mirrored
        pair of examples still differs only in who did what (BBQ's control)."""
        fields = ("lang", "template_id", *ENTITY_COLUMNS, "lexical_variant")
        return "|".join(str(self.row.get(field) or "") for field in fields)

    def draw_key(self) -> DrawKey:
        """The examples that take one draw of names: those of one entity pair whose entities have one gender."""
        return self.pair_key(), tuple(self.genders)

    def reading(self) -> tuple[str, ...]:
        """The example's context and question with slots for the names: two examples that read the same would
        differ only in their names (and in the order and wording of their options)."""
        return (self.row["lang"], *(self.texts.get(field, self.row[field]) for field in ("context", "question")))


def _texts(row: Mapping[str, Any]) -> dict[str, str]:
    """The texts a name may go into: context, question and the two entity options (never 'unknown')."""
    roles = row["answer_roles"]
    return {f: row[f] for f in TEXT_FIELDS if roles.get(f) != "unknown"}


def _residue(text: str, surface: str) -> str:
    """The words around a mention left in ``text`` (''), for the report of an unhandled reference."""
    match = re.search(rf"(?<![\w\u200c-]){re.escape(surface)}", text)
    return "" if match is None else text[max(0, match.start() - 30) : match.end() + 30]


def _age_band(entity: str, surface: str, lang: str) -> str:
    """The age band of the person a name stands for: the entity's (:func:`pbbq.tasks.text.cues.entity_age_band`) when
    the name is the person mentioned; none when it is a possessor ('پدربزرگ آیدین': Aydin's grandfather)."""
    if lang == "fa":
        form = persian_entity(entity, surface)
        if form is None or not form[2]:
            return NONE
    return entity_age_band(entity, lang)


MEMO_SIZE = 1 << 16
"""How many texts a :class:`Lexicon` keeps rewritten (:attr:`Lexicon.rewrite`) and searched
(:attr:`Lexicon.residue`)."""


class Lexicon:
    """Per language, the words that name a group (:func:`pbbq.tasks.names.tables.group_words`), and the groups
    each entity names, looked up once per entity: an entity pair recurs in every example of its template. It
    memoises the texts rewritten (an ambiguous context and its options recur across an example's questions and
    conditions) for as long as it lives: one run of the stage, never after (issue 35)."""

    def __init__(self, name_table: pd.DataFrame) -> None:
        self.words = group_words(name_table)
        self.labels = {lang: tuple(sorted(words)) for lang, words in self.words.items()}
        self._mentions: dict[tuple[str, str], dict[str, str]] = {}
        self.rewrite = lru_cache(maxsize=MEMO_SIZE)(rewrite)
        """:func:`pbbq.tasks.names.patterns.rewrite`, memoised."""
        self.residue = lru_cache(maxsize=MEMO_SIZE)(_residue)
        """:func:`_residue`, memoised: a rewritten text recurs across an entity pair's examples."""

    def forget(self) -> None:
        """Let go of the texts memoised: once every example of a run is prepared, none is rewritten again."""
        self.rewrite.cache_clear()
        self.residue.cache_clear()

    def mentions(self, entity: str, lang: str) -> dict[str, str]:
        """:func:`pbbq.tasks.names.tables.entity_mentions` of ``entity`` in ``lang`` (which has a name table)."""
        key = (entity, lang)
        if key not in self._mentions:
            self._mentions[key] = entity_mentions(entity, self.words[lang])
        return self._mentions[key]


def prepare(row: Mapping[str, Any], position: int, lexicon: Lexicon) -> Prepared:
    """Rewrite one example (row ``position`` of the input), or raise :class:`Unmapped` with the reason."""
    lang = row["lang"]
    if not lexicon.words.get(lang):
        raise Unmapped("no_names_for_language", detail=lang)
    entities = (row["stereo_entity"], row["nonstereo_entity"])
    found = [lexicon.mentions(entity, lang) for entity in entities]
    nameless = [entity for entity, groups in zip(entities, found, strict=True) if not groups]
    if nameless:
        raise Unmapped("entity_not_in_name_table", nameless)
    several = [(entity, groups) for entity, groups in zip(entities, found, strict=True) if len(groups) > 1]
    if several:
        raise Unmapped("entity_names_several_groups", [several[0][0]], ", ".join(several[0][1]))
    (first, first_word), (second, second_word) = (next(iter(groups.items())) for groups in found)
    if first == second:
        raise Unmapped("entities_share_group", entities, first)
    surfaces = (first_word, second_word)
    labels = lexicon.labels[lang]
    rewrites = {field: lexicon.rewrite(text, lang, entities, surfaces, labels) for field, text in _texts(row).items()}
    for field, result in rewrites.items():
        for entity, surface in zip(entities, entities if lang != "en" else surfaces, strict=True):
            left = lexicon.residue(result.text, surface)
            if left:
                raise Unmapped("unhandled_reference", [entity], f"{field}: …{left}…")
    for index, entity in enumerate(entities):
        if f"\ue000{index}" not in rewrites["context"].text:
            raise Unmapped("mention_not_found", [entity], "not in the context")
    bands = (_age_band(entities[0], surfaces[0], lang), _age_band(entities[1], surfaces[1], lang))
    if not pair_eras(bands):
        raise Unmapped("no_common_era", entities, f"age bands {bands[0]} and {bands[1]}")
    found_cues = [c for result in rewrites.values() for c in result.cues]
    genders = [reference_gender(g for e, g in found_cues if e == index) for index in range(2)]
    return Prepared(
        row=dict(row),
        position=position,
        texts={field: result.text for field, result in rewrites.items()},
        groups=(first, second),
        genders=genders,
        age_bands=bands,
        patterns=[p for result in rewrites.values() for p in result.patterns],
        request_ids=[],
    )


def row_records(frame: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """The rows of ``frame`` as dicts of Python values, what ``to_dict("records")`` gives, a column at a time
    (``to_dict`` boxes each Arrow-backed string of every row on its own), one row at a time: a row the stage
    does not keep is freed at once."""
    columns = list(frame.columns)
    for values in zip(*(frame[c].tolist() for c in columns), strict=True):
        yield dict(zip(columns, values, strict=True))


ROW_COLUMNS = (
    "example_id", "template_id", "lang", "category", *TEXT_FIELDS, "answer_roles", "answer_info",
    *ENTITY_COLUMNS, "lexical_variant", "llm_request_ids",
)  # fmt: skip
"""The columns of an example :func:`prepare` and the variants read (:attr:`Prepared.row`): its other columns are
taken from the input's frame when its variants are made, never boxed a row at a time."""


def prepared_examples(examples: pd.DataFrame, lexicon: Lexicon) -> tuple[list[Prepared], list[Failure]]:
    """Every example rewritten (:func:`prepare`), and those it could not be, in the input's order."""
    prepared: list[Prepared] = []
    failures: list[Failure] = []
    for position, row in enumerate(row_records(examples[[c for c in ROW_COLUMNS if c in examples.columns]])):
        try:
            prepared.append(prepare(row, position, lexicon))
        except Unmapped as unmapped:
            # neither its row nor the exception's frames are kept: 30,000 of them at paper scale, each would make
            # the garbage collector's full passes over the whole process more frequent
            failures.append((position, row["example_id"], unmapped.with_traceback(None)))
    return prepared, failures
