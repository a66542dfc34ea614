"""The synthetic build's stand-in model (:class:`StandInModel`): an in-process LLM transport that answers every
request the build's stages make from the phrase book and the generated templates, so that ``pbbq synth`` records
a transcript the build replays. Not the test suite's stand-in for the sample build (tests/fakes/stand_in_model.py).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from ..core.inputs import swap_roles
from ..instantiate import NOT_TARGET
from ..llm import InProcessTransport, LLMRequest
from ..translate.pair import Pair
from .generate import SynthTemplate
from .phrases import CATEGORY_SPECS, TRAITS, Group, Term
from .scale import SynthError

FIRST_FAILURES = {"disambiguate": 0.10, "context": 0.015}
"""Share of first answers that break a rule on purpose (no {nonstereo}; an untranslated context)."""


def _tag(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, flags=re.DOTALL)
    if match is None:
        raise SynthError(f"the synthetic stand-in found no <{tag}> block in a request")
    return match.group(1)


def _fill(text: str, lex: str) -> str:
    return text.replace("{lex}", lex)


def _fails_first(seed: int, request: LLMRequest, share: float) -> bool:
    """Whether the first answer to this request breaks a rule on purpose (seeded, from the request)."""
    digest = hashlib.sha256(f"{seed}|{request.stage}|{request.context}".encode()).hexdigest()
    return len(request.messages) == 1 and int(digest[:8], 16) / 16**8 < share


def _group_english(group: Group) -> str:
    """A group's name in English as the translate stage checks it: without a leading article, and naming the group
    by its glossary word when its label holds one ('Jewish people' for «یهودی‌ها», where the label says 'Jews')."""
    english = re.sub(r"^(the|a|an)\s+", "", group.label.en, flags=re.IGNORECASE)
    for word in group.words:
        if word.fa in group.label.fa and word.en.lower() not in english.lower():
            return f"{word.en} people"
    return english


class StandInModel(InProcessTransport):
    """Answers the build's LLM requests from the synthetic phrase book, as a model that always follows the
    prompt would (PBBQ Appendix D; the translation prompts): each answer computed from the request.

    - disambiguate: the continuation of the trait its negative question names, ``{stereo}`` with the negative
      clause; a seeded tenth of first answers leaves out ``{nonstereo}`` (the retry then passes);
    - translate: an entity, a lexical variant or a question from the phrase book; a context by replacing its two
      entities (given in ``<phrases>``) with placeholders and looking the rest up among every template's
      contexts, then putting the entities' English in; a seeded 1.5 % of first answers are the Persian itself;
    - back-translation: the Persian the English was translated from, so chrF is 100.
    """

    def __init__(self, templates: Sequence[SynthTemplate], seed: int, targets: Sequence[str] = ("en",)) -> None:
        self.seed = seed
        self.traits = {t.negative.fa: t for t in TRAITS}
        self.phrases: dict[str, dict[str, str]] = {"entity": {}, "lex": {}, "question": {}, "context": {}}
        labels = {group.label.fa: _group_english(group) for spec in CATEGORY_SPECS.values() for group in spec.groups}
        self.phrases["group"] = labels | {f"{NOT_TARGET} {fa}": f"people other than {en}" for fa, en in labels.items()}
        for trait in TRAITS:
            self.phrases["question"].update(
                {trait.negative.fa: trait.negative.en, trait.nonnegative.fa: trait.nonnegative.en}
            )
        for t in templates:
            self.phrases["entity"].update({e.fa: e.en for e in (*t.stereo, *t.nonstereo)})
            self.phrases["lex"].update({v.fa: v.en for v in t.lex})
            cont = t.stereotype.trait.continuation
            for lex in t.lex or (Term("", ""),):
                for a_fa, a_en in (
                    (t.ambiguous.fa, t.ambiguous.en),
                    (swap_roles(t.ambiguous.fa), swap_roles(t.ambiguous.en)),
                ):
                    ambiguous = (_fill(a_fa, lex.fa), _fill(a_en, lex.en))
                    self.phrases["context"][ambiguous[0]] = ambiguous[1]
                    for c_fa, c_en in ((cont.fa, cont.en), (swap_roles(cont.fa), swap_roles(cont.en))):
                        self.phrases["context"][f"{ambiguous[0]} {c_fa}"] = f"{ambiguous[1]} {c_en}"
        self.kinds = {text: kind for code in targets for kind, text in Pair("fa", code).instructions.items()}
        self.sources: dict[str, set[str]] = {}

    def text(self, request: LLMRequest) -> str:
        first = request.messages[0][1]
        if request.stage == "disambiguate":
            trait = self.traits.get(_tag(first, "negative_trait"))
            if trait is None:
                raise SynthError(f"the synthetic stand-in knows no trait for {request.context}")
            text = trait.continuation.fa
            return (
                text.replace("{nonstereo}", "دیگری")
                if _fails_first(self.seed, request, FIRST_FAILURES["disambiguate"])
                else text
            )
        translating = request.stage.split("_")[0] == "translate"  # translate, translate_xa
        if translating and request.context.startswith("back "):
            english = _tag(first, "english_text")
            if english not in self.sources:
                raise SynthError(f"the synthetic stand-in translated nothing into {english[:60]!r}")
            return min(self.sources[english])
        if translating:
            kind = next((k for text, k in self.kinds.items() if text in (request.system or "")), None)
            persian = _tag(first, "persian_text")
            english = self._english(str(kind), persian, _tag(first, "phrases"))
            if kind == "context" and _fails_first(self.seed, request, FIRST_FAILURES["context"]):
                return persian
            self.sources.setdefault(" ".join(english.split()), set()).add(persian)
            return english
        raise SynthError(f"the synthetic stand-in has no answer for stage {request.stage!r}")

    def _english(self, kind: str, persian: str, phrases: str) -> str:
        if kind != "context":
            english = self.phrases.get(kind, {}).get(persian)
            if english is None:
                raise SynthError(f"the synthetic stand-in has no English for the {kind} {persian!r}")
            return english
        given = dict(line.split(" → ", 1) for line in phrases.splitlines() if " → " in line)
        if len(given) != 2:
            raise SynthError(f"a context request names {len(given)} entities, not 2: {persian[:60]!r}")
        entities = list(given)
        slots = dict(zip(entities, ("{stereo}", "{nonstereo}"), strict=True))
        pattern = "|".join(re.escape(e) for e in sorted(entities, key=len, reverse=True))
        skeleton = re.sub(rf"(?<![\w\u200c])(?:{pattern})(?![\w\u200c])", lambda m: slots[m.group(0)], persian)
        english = self.phrases["context"].get(skeleton)
        if english is None:
            raise SynthError(f"the synthetic stand-in has no English for the context {persian[:60]!r}")
        return english.replace("{stereo}", given[entities[0]]).replace("{nonstereo}", given[entities[1]])
