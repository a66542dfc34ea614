"""Stand-in answers (``[llm] mode = "stand-in"``, ``pbbq build --stand-in``): every LLM request answered offline
with deterministic placeholder text that passes the stages' validators, so that a curator can try a change of
the inputs (a survey answer, a template) on a build with no recorded answer for it (docs/architecture.md §6).

The answers say nothing about any group: a continuation is a fixed Persian sentence with the two placeholders, a
translation is a labelled placeholder that carries the segment's glossary terms, its entities' English and the
gender its Persian gives, and a back-translation returns the Persian it came from. The build's transcript says
``"stand_in": true``, its dataset card says STAND-IN, and publish refuses to upload it (:mod:`pbbq.tasks.publish`).
"""

from __future__ import annotations

import hashlib
import re

from ..text.languages import language
from .config import LLMError, LLMRequest
from .transport import InProcessTransport

CONTINUATION_FA = "[پاسخ جایگزین] {stereo} این کار را کرد و {nonstereo} نکرد."
"""Every disambiguated continuation: the stereotyped entity answers the negative question (PBBQ Appendix D)."""
PERSON_EN = {"female": "woman", "male": "man"}
"""The head noun of an entity's stand-in English, by the gender its Persian gives (none: 'person')."""
GENDER_LABEL = "neutral"
"""The names stage's gender question: the stand-in never decides a gender the rule table left open."""


def _block(text: str, tag: str) -> str:
    """The content of ``<tag>`` in a request's message (the stages' prompts delimit their data so)."""
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, flags=re.DOTALL)
    if match is None:
        raise LLMError(f"stand-in answers: no <{tag}> block in the request")
    return match.group(1)


def _pairs(block: str) -> list[tuple[str, str]]:
    """The ``Persian → English`` lines of a glossary or phrases block."""
    return [tuple(line.split(" → ", 1)) for line in block.splitlines() if " → " in line]  # type: ignore[misc]


def _number(text: str) -> int:
    """A short number that tells two placeholders apart (digits only: no letters an English rule could read)."""
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16) % 10**9


class StandInAnswerer(InProcessTransport):
    """The answers of the stages that ask an LLM (disambiguate, translate, the names stage's gender question, the
    crawl's extractor), each computed from the request. It remembers the Persian of every English it wrote, so
    that a back-translation returns it (chrF 100)."""

    def __init__(self) -> None:
        self._persian: dict[str, str] = {}

    def text(self, request: LLMRequest) -> str:
        first = request.messages[0][1]
        if request.stage == "disambiguate":
            return CONTINUATION_FA
        if request.stage == "translate" and request.context.startswith("back "):
            english = _block(first, "english_text")
            return self._persian.get(english, "[ترجمه‌ی جایگزین]")
        if request.stage == "translate":
            persian = _block(first, "persian_text")
            english = self._english(request.context.split("-", 1)[0], persian, first)
            self._persian[english] = persian
            return english
        if request.stage == "names":
            return GENDER_LABEL
        if request.stage == "crawl":
            return '{"stereotypes": []}'
        raise LLMError(f"stand-in answers: no stand-in for stage {request.stage!r} ({request.context})")

    @staticmethod
    def _english(kind: str, persian: str, message: str) -> str:
        """A placeholder English of one segment (its kind is its id's prefix, ``tasks/translate.py``) that names
        every glossary term the segment holds, and a context's entities as given in ``<phrases>``."""
        terms = [en for _, en in _pairs(_block(message, "glossary"))]
        number = _number(persian)
        if kind == "entity":
            person = PERSON_EN.get(language("fa").entity_gender(persian), "person")
            return " ".join(["stand-in", *terms, person, str(number)])
        if kind in ("lex", "group"):
            return " ".join(["stand-in", *terms, "phrase" if kind == "lex" else "group", str(number)])
        if kind == "question":
            return f"Who is meant by stand-in question {number}?"
        entities = " and the ".join(en for _, en in _pairs(_block(message, "phrases")))
        named = f", naming {', '.join(terms)}" if terms else ""
        return f"[STAND-IN] Stand-in story {number} about the {entities}{named}."
