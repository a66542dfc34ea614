"""Stand-in answers (``[llm] mode = "stand-in"``, ``pbbq build --stand-in``): every LLM request answered offline
with deterministic placeholder text that passes the stages' validators, so that a curator can try a change of
the inputs (a survey answer, a template) on a build with no recorded answer for it (docs/architecture.md §6).

The answers say nothing about any group: a continuation is a fixed Persian sentence with the two placeholders; a
translation, between any pair of the build's languages (the request names them, ``LLMRequest.languages``), is a
labelled placeholder that carries the segment's glossary terms, its entities' phrases in the target as the request
gives them and, for an entity, a person word of the target of the gender its source gives; a back-translation
returns the source text it came from. A placeholder is in no language: the translate stage does not ask the
language identifier about it and its report says so (:attr:`pbbq.tasks.translate.pair.Pair.placeholders`). The
build's transcript says ``"stand_in": true``, its dataset card says STAND-IN, and publish refuses to upload it
(:mod:`pbbq.tasks.publish`).
"""

from __future__ import annotations

import hashlib
import re

from ..text.languages import NONE, Language, language
from .config import LLMError, LLMRequest
from .transport import InProcessTransport

CONTINUATION_FA = "[پاسخ جایگزین] {stereo} این کار را کرد و {nonstereo} نکرد."
"""Every disambiguated continuation: the stereotyped entity answers the negative question (PBBQ Appendix D)."""
PERSON_EN = {"female": "woman", "male": "man"}
"""The head noun of an entity's stand-in English, by the gender its source gives (none: 'person')."""
GENDER_LABEL = "neutral"
"""The names stage's gender question: the stand-in never decides a gender the rule table left open."""
LABEL = "[STAND-IN]"
"""What a translation placeholder starts with, in a target that writes its letters (or whose source does not)."""
LETTERLESS_LABEL = "⟦⁂⟧"
"""The label of a placeholder in a target of another script than its source's: no letter of the source's script
(which the target's check would read as left untranslated), none of the target's (which would claim a language)."""
BACK_PLACEHOLDER = {"fa": "[ترجمه‌ی جایگزین]"}
"""A back-translation of a text the stand-in did not write, by the language it is into ([STAND-IN] otherwise)."""
_BLOCK = re.compile(r"<(\w+)>\n(.*?)\n</\1>", re.DOTALL)


def _text_block(text: str) -> str:
    """The text a translation request asks about: its last tagged block that is not ``<glossary>`` or
    ``<phrases>`` (``<english_text>``, ``<urdu_text>``: the pair's input prompt names it)."""
    blocks = [content for tag, content in _BLOCK.findall(text) if tag not in ("glossary", "phrases")]
    if not blocks:
        raise LLMError("stand-in answers: no tagged text block in the translation request")
    return blocks[-1]


def _pairs(block: str) -> list[tuple[str, str]]:
    """The ``source → target`` lines of a glossary or phrases block."""
    return [tuple(line.split(" → ", 1)) for line in block.splitlines() if " → " in line]  # type: ignore[misc]


def _optional_pairs(message: str, tag: str) -> list[tuple[str, str]]:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", message, flags=re.DOTALL)
    return _pairs(match.group(1)) if match else []


def _number(text: str) -> int:
    """A short number that tells two placeholders apart (digits only: no letters an English rule could read)."""
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16) % 10**9


def person_word(target: Language, gender: str) -> str | None:
    """A person noun of the target that gives ``gender`` (its first listed), or None for no gender."""
    if gender == NONE:
        return None
    return next((word for word in target.person_gender if target.gender_of_word(word) == gender), None)


class StandInAnswerer(InProcessTransport):
    """The answers of the stages that ask an LLM (disambiguate, translate into any target, the names stage's
    gender question, the crawl's extractor), each computed from the request. It remembers the source text of every
    translation it wrote, so that a back-translation returns it (chrF 100)."""

    def __init__(self) -> None:
        self._sources: dict[tuple[str, str], dict[str, str]] = {}

    def text(self, request: LLMRequest) -> str:
        first = request.messages[0][1]
        if request.stage == "disambiguate":
            return CONTINUATION_FA
        if request.stage.startswith("translate"):
            return self._translation(request, first)
        if request.stage == "names":
            return GENDER_LABEL
        if request.stage == "crawl":
            return '{"stereotypes": []}'
        raise LLMError(f"stand-in answers: no stand-in for stage {request.stage!r} ({request.context})")

    def _translation(self, request: LLMRequest, message: str) -> str:
        back = request.context.startswith("back ")
        codes = request.languages or (("en", "fa") if back else ("fa", "en"))  # a request made before they were named
        if len(codes) != 2:
            raise LLMError(f"stand-in answers: a translation request names languages {codes!r}, not a pair")
        text = _text_block(message)
        if back:
            written = self._sources.get((codes[1], codes[0]), {})
            return written.get(text, BACK_PLACEHOLDER.get(codes[1], LABEL))
        source, target = language(codes[0]), language(codes[1])
        answer = self._placeholder(request.context.split("-", 1)[0], source, target, text, message)
        self._sources.setdefault((source.code, target.code), {})[answer] = text
        return answer

    @staticmethod
    def _placeholder(kind: str, source: Language, target: Language, text: str, message: str) -> str:
        """A placeholder translation of one segment (its kind is its id's prefix, ``tasks/translate``) that names
        every glossary term the segment holds, and a context's entities as given in ``<phrases>``; in English, a
        sentence of English words, in any other target the label, the terms and phrases and a number."""
        terms = [rendering for _, rendering in _optional_pairs(message, "glossary")]
        phrases = [rendering for _, rendering in _optional_pairs(message, "phrases")]
        number = _number(text)
        gender = source.entity_gender(text) if kind == "entity" else NONE
        if target.code == "en":
            if kind == "entity":
                return " ".join(["stand-in", *terms, PERSON_EN.get(gender, "person"), str(number)])
            if kind in ("lex", "group"):
                return " ".join(["stand-in", *terms, "phrase" if kind == "lex" else "group", str(number)])
            if kind == "question":
                return f"Who is meant by stand-in question {number}?"
            named = f", naming {', '.join(terms)}" if terms else ""
            return f"{LABEL} Stand-in story {number} about the {' and the '.join(phrases)}{named}."
        label = LABEL if target.script.search("S") or not source.script.search("S") else LETTERLESS_LABEL
        person = person_word(target, gender) if kind == "entity" else None
        words = [label, *terms, *([person] if person else []), *phrases, str(number)]
        return " ".join(words) + ("?" if kind == "question" else "")
