"""The languages a translate stage works in (:class:`Pair`: the source's and the target's names, the instructions
for each kind of segment, how a text not in the target is told), its parameters and the schemas of its segment and
attempt tables (PakBBQ §3.3)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from string import Template
from typing import Literal

import pyarrow as pa

from ..text.languages import NONE, Language, identify, language
from .glossary import SOURCE, TARGET

STAGE_NAME = "translate"
KIND_INSTRUCTIONS = {
    "entity": "It is a noun phrase naming a person or a group: translate it as a bare noun phrase, without an article.",
    "lex": "It is a word or short phrase that fills a slot in a sentence (a place, an occasion, a trade, a time): "
    "translate it as a short phrase that could fill the same slot in $an $target sentence.",
    "group": "It names a group of people: translate it as a short plural noun phrase that names the group, "
    "without an article.",
    "question": "It is a question about one of two people: keep it a question.",
    "context": "It is a short story about two people: render each $source phrase listed in <phrases> exactly as the "
    "$target given there.",
}
"""The instructions of each kind of segment, with the source's and the target's names (``$source``, ``$target``,
``$an``: the target name's article)."""
MIN_WORDS_WITH_OWN_LETTER = 8
"""A sentence of this many words in a language with :attr:`~pbbq.tasks.text.languages.Language.own_letters` holds
one of them (Urdu's ہے، نے، کے، میں); a phrase may not (نرس, مخالف جنس پرست مرد اداکار), so a short one is told
only by the source's letters."""
MIN_WORDS_TO_IDENTIFY = 3
"""A text of this many words is long enough for the language identifier to tell which of the pair it is in."""
SOURCE_TEXT_CONFIDENCE = 0.9
"""A text the identifier gives to the source with this confidence (against the target) is the source left as it
is."""
SOURCE_WORD_CONFIDENCE = 0.6
"""A stop word of the source (not one of the target's) that the identifier gives to the source with this
confidence is a source word left untranslated ('if' in Turkish: 0.75; 'at', a Turkish word too, is listed in the
target's ``shared_words``)."""
Foreign = Literal["letters", "words", "text"]
"""Why a text is not in the target: it has the source's letters, an untranslated source word, or reads as the
source (:meth:`Pair.foreign_reason`)."""
_WORD = re.compile(r"[^\W\d_]{2,}")


@dataclass(frozen=True)
class Pair:
    """The languages a translate stage works in, by code: from the source (the examples') into the target; a value
    of the stage's inputs, so its cache key and manifest name the pair."""

    source_code: str = SOURCE.code
    target_code: str = TARGET.code
    stage: str = STAGE_NAME
    """The stage's name: its requests' and its report's (``translate``, ``translate_ur``)."""
    placeholders: bool = field(default=False, repr=False)
    """Its answers are the stand-in's placeholders (:mod:`pbbq.tasks.llm.stand_in`), in no language: the
    language identifier is not asked about them, and the stage's report says so (``language_id``)."""

    def cache_identity(self) -> dict[str, str]:
        """What a stage's key names of it (its manifest its ``repr``): its languages and stage, not
        :attr:`placeholders`, which follows from the client the key names apart."""
        return {"source_code": self.source_code, "target_code": self.target_code, "stage": self.stage}

    @property
    def source(self) -> Language:
        return language(self.source_code)

    @property
    def target(self) -> Language:
        return language(self.target_code)

    @property
    def source_column(self) -> str:
        return f"text_{self.source.code}"

    @property
    def target_column(self) -> str:
        return f"text_{self.target.code}"

    @cached_property
    def instructions(self) -> dict[str, str]:
        """:data:`KIND_INSTRUCTIONS` with the pair's names (once per pair: every request reads them)."""
        name = self.target.name
        words = {"source": self.source.name, "target": name, "an": "an" if name[0] in "AEIOU" else "a"}
        return {kind: Template(text).substitute(words) for kind, text in KIND_INSTRUCTIONS.items()}

    @property
    def not_target(self) -> str:
        """The failure code of a text not in the target language: ``not_english``."""
        return f"not_{self.target.name.lower()}"

    @property
    def shares_script(self) -> bool:
        """Whether source and target write one script (English and Turkish; Persian and Urdu), so that letters
        alone do not tell a text in the source: by their scripts' names, or both declaring letters of their own."""
        return one_script(self.source, self.target)

    @property
    def identified(self) -> bool:
        """Whether the language identifier (:mod:`~pbbq.tasks.text.languages.identify`) tells the pair apart and
        is asked: a pair of one script, whose answers are not placeholders."""
        source, target = self.source.identify_as, self.target.identify_as
        return self.shares_script and not self.placeholders and identify.knows(source, target)

    def foreign(self, text: str) -> bool:
        """Whether a translation is (partly) not in the target language (:meth:`foreign_reason`)."""
        return self.foreign_reason(text) is not None

    def foreign_reason(self, text: str) -> Foreign | None:
        """Why a translation is not in the target language, or None. Where the scripts differ: a letter of the
        source's script. Where they are one: a letter only the source writes, or none that only the target
        writes in a text of :data:`MIN_WORDS_WITH_OWN_LETTER` words (``Language.own_letters``); and, by the
        language identifier (:attr:`identified`), a source stop word left untranslated (``words``: not one of the
        target's stop words or ``shared_words``), where own letters do not tell the pair apart, or a text of
        :data:`MIN_WORDS_TO_IDENTIFY` words that reads as the source (``text``)."""
        source, target = self.source, self.target
        if not one_script(source, target):
            return "letters" if source.script.search(text) is not None else None
        if source.own_letters and re.search(f"[{source.own_letters}]", text):
            return "letters"
        words = len(text.split())
        if (
            not self.placeholders
            and target.own_letters
            and words >= MIN_WORDS_WITH_OWN_LETTER
            and not re.search(f"[{target.own_letters}]", text)
        ):
            return "letters"
        if not self.identified:
            return None
        if self.untranslated_words(text):
            return "words"
        if words >= MIN_WORDS_TO_IDENTIFY and self._source_confidence(text) >= SOURCE_TEXT_CONFIDENCE:
            return "text"
        return None

    def untranslated_words(self, text: str) -> list[str]:
        """The source's stop words left in a translation into a target of its script ('if' in Turkish), where
        letters of their own do not already tell the two apart: words of the source's stop-word list that are
        neither the target's stop words nor its ``shared_words``, which the identifier gives to the source."""
        source, target = self.source, self.target
        if not self.identified or (source.own_letters and target.own_letters):
            return []
        ignored = target.stop_words | target.shared_words
        candidates = dict.fromkeys(
            word
            for word in _WORD.findall(text)
            if source.lower(word) in source.stop_words and target.lower(word) not in ignored
        )
        return [word for word in candidates if self._source_confidence(word) >= SOURCE_WORD_CONFIDENCE]

    def _source_confidence(self, text: str) -> float:
        source, target = self.source.identify_as, self.target.identify_as
        assert source is not None and target is not None
        return identify.confidence(text, source, target)

    @property
    def gender_words(self) -> dict[str, str]:
        return {"male": "male", "female": "female", NONE: f"of a gender the {self.source.name} does not give"}


@lru_cache(maxsize=64)
def one_script(source: Language, target: Language) -> bool:
    """:attr:`Pair.shares_script` of two languages (once per pair of a build's languages: every text asks)."""
    named = source.script_name and source.script_name == target.script_name
    return bool(named) or bool(source.own_letters and target.own_letters)


PERSIAN_ENGLISH = Pair()
"""The first target's pair, the default of every function that takes one: Persian into English."""


@dataclass(frozen=True)
class TranslateParams:
    min_chrf: float = 40.0
    """Back-translation chrF (0–100) under which a segment is flagged for review."""
    keep_flagged: bool = False
    """Keep the examples of flagged segments in the dataset (they are reported either way)."""
    max_attempts: int = 3
    """Answers asked for per segment: the first and the retries with the failures named."""


def segment_schema(source: Language, target: Language) -> pa.Schema:
    """A translated segment: its source text (``text_fa``), its glossary entries (``term_fa → term_en``), the target's
    text of its last attempt (``text_en``), the rules that attempt broke (``;``-separated, empty when it passed), the
    back-translation into the source (``back_fa``) and its chrF, whether the chrF is under ``min_chrf``, and every
    request behind it. A target whose verbs agree with their subject's gender (Urdu) also has each question's
    ``agreement`` (:func:`~pbbq.tasks.translate.segments.question_agreement`; empty for the other kinds)."""
    agreement = [("agreement", pa.string())] if target.marks_gender_on_verbs else []
    return pa.schema(
        [
            ("segment_id", pa.string()),
            ("kind", pa.string()),
            *agreement,
            (f"text_{source.code}", pa.string()),
            ("glossary", pa.list_(pa.string())),
            (f"text_{target.code}", pa.string()),
            ("attempts", pa.int64()),
            ("failures", pa.string()),
            (f"back_{source.code}", pa.string()),
            ("chrf", pa.float64()),
            ("flagged", pa.bool_()),
            ("request_ids", pa.list_(pa.string())),
        ]
    )


def attempt_schema(target: Language) -> pa.Schema:
    """Every translation answer (``text_en``), with the rules it broke and the sentences that named them in the
    retry."""
    return pa.schema(
        [
            ("segment_id", pa.string()),
            ("kind", pa.string()),
            ("attempt", pa.int64()),
            (f"text_{target.code}", pa.string()),
            ("failures", pa.string()),
            ("messages", pa.string()),
            ("request_id", pa.string()),
        ]
    )
