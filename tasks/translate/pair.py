"""The languages a translate stage works in (:class:`Pair`: the source's and the target's names, the instructions
for each kind of segment, how a text not in the target is told), its parameters and the schemas of its segment and
attempt tables (PakBBQ §3.3)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from string import Template

import pyarrow as pa

from ..text.languages import NONE, Language, language
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


@dataclass(frozen=True)
class Pair:
    """The languages a translate stage works in, by code: from the source (the examples') into the target; a value
    of the stage's inputs, so its cache key and manifest name the pair."""

    source_code: str = SOURCE.code
    target_code: str = TARGET.code
    stage: str = STAGE_NAME
    """The stage's name: its requests' and its report's (``translate``, ``translate_ur``)."""

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

    def foreign(self, text: str) -> bool:
        """Whether a translation is (partly) not in the target language: it holds a letter of the source's script,
        or, where both write one script (Persian and Urdu), a letter only the source writes, or none that only the
        target writes in a text of :data:`MIN_WORDS_WITH_OWN_LETTER` words (``Language.own_letters``)."""
        source_own, target_own = self.source.own_letters, self.target.own_letters
        if not source_own or not target_own:
            return self.source.script.search(text) is not None
        if re.search(f"[{source_own}]", text):
            return True
        return len(text.split()) >= MIN_WORDS_WITH_OWN_LETTER and not re.search(f"[{target_own}]", text)

    @property
    def gender_words(self) -> dict[str, str]:
        return {"male": "male", "female": "female", NONE: f"of a gender the {self.source.name} does not give"}


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


SEGMENT = segment_schema(SOURCE, TARGET)
ATTEMPT = attempt_schema(TARGET)
