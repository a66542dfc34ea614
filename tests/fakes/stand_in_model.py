"""A scripted stand-in for a model, answering the sample build's LLM requests from human-written files.

It is the answer function of the fake OpenAI server (``tests/fakes/llm_servers.py``) when the sample's
transcript is recorded (``prompts/transcripts/record_sample.py``) and in the tests that run the build in live
mode. It answers

- a disambiguation request (always the biased continuation: the counter-biased one is its mirror) with the
  ``stand_ins/disambiguations.csv`` answer of its template at that attempt (the number of user messages);
- a translation request with English composed from ``translations.csv`` (the template's English, with
  ``{stereo}``, ``{nonstereo}``, ``{lex}`` and pronoun slots) and ``phrases.csv`` (its entities and lexical
  variants), in the same order of mention as the Persian. A pronoun slot ``{stereo:they}`` is filled by the
  gender of that entity's English (its language's ``entity_gender``): he, she, or they for an entity whose
  words give no gender; the forms are those of :data:`SLOT_FORMS`. The counter-biased English is the biased
  English with the two roles exchanged, slots included, unless the template declares a ``mirror_exception``
  (then ``disambiguated_counter_biased_en``);
- designed translation rule-breakers (:data:`GLOSSARY_BREAKER`, :data:`PRONOUN_BREAKERS`), so that the retry
  and the review path of the translation validator are recorded: a wrong first answer, then the right one; or
  wrong every time;
- a translation request into Urdu (its system prompt names Urdu) with Urdu composed the same way from
  ``translations.ur.csv`` and ``phrases.ur.csv``, their slots filled as ``README.ur.md`` says (:func:`fill_urdu`);
  a question's agreement is the feminine when its request says both people are women
  (:data:`pbbq.tasks.translate.requests.AGREEMENT_INSTRUCTIONS`), else the masculine; and its back-translation
  (``<urdu_text>``) with the Persian it came from;
- a back-translation request with the Persian it came from, except that the segments whose paraphrase
  reads like a real model's (:data:`PARAPHRASE_CHRF`) get it (:func:`paraphrase_fa`: synonyms, the two clauses of a
  contrast exchanged, a fronted place moved back), so that the back-translation gate sees chrF of a real
  paraphrase, and ``poor_back_translations`` contexts get an unrelated sentence, so that it flags some.
"""

from __future__ import annotations

import csv
import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from sacrebleu.metrics import CHRF

from pbbq.flows.config import BuildConfig
from pbbq.tasks.core.artifacts import REPO_ROOT, StageOutput
from pbbq.tasks.core.inputs import swap_roles
from pbbq.tasks.disambiguate import Prompts, disambiguate
from pbbq.tasks.kappa_gate import kappa_gate
from pbbq.tasks.llm import LLMClient
from pbbq.tasks.survey_filter import survey_filter
from pbbq.tasks.text.languages import NONE, language
from pbbq.tasks.text.languages.fa import normalize_fa
from pbbq.tasks.text.languages.ur import normalize_ur
from pbbq.tasks.translate.requests import AGREEMENT_INSTRUCTIONS

STAND_INS = REPO_ROOT / "prompts" / "transcripts" / "stand_ins"
POOR_BACK_TRANSLATION = "متن ترجمه شده با متن اصلی هیچ ربطی ندارد."
SLOT_FORMS: dict[str, dict[str, str]] = {
    "they": {"male": "he", "female": "she", NONE: "they"},
    "them": {"male": "him", "female": "her", NONE: "them"},
    "their": {"male": "his", "female": "her", NONE: "their"},
    "theirs": {"male": "his", "female": "hers", NONE: "theirs"},
    "themselves": {"male": "himself", "female": "herself", NONE: "themselves"},
    "were": {"male": "was", "female": "was", NONE: "were"},
    "are": {"male": "is", "female": "is", NONE: "are"},
    "have": {"male": "has", "female": "has", NONE: "have"},
}
"""Pronoun slots (``{stereo:their}``; ``{stereo:Their}`` at the start of a sentence) and the verbs that agree
with them, by the entity's gender."""
GLOSSARY_BREAKER = ("مرد ترک", "Turkish man")
"""The entity phrase whose first translation breaks the glossary (a nationality it is not); the second is right."""
PRONOUN_BREAKERS: dict[str, tuple[str, str, str, int]] = {
    "singular_they": ("AGE-01-T1", "مرد هفتادساله", "مرد بیست‌وپنج‌ساله", 1),
    "review": ("AGE-01-T1", "پیرزن هشتادساله", "دختر دانشجو", 3),
}
"""(template, stereotyped entity, non-stereotyped entity, wrong answers): the first (in sorted order) biased
disambiguated context of that pair reads 'they' for the stereotyped entity, in the first answer
(``singular_they``: fixed at attempt 2) or in every answer (``review``: the segment goes to review and its
examples are dropped). The pairs are ones the confound gate builds (same gender)."""
POOR_BACK_TRANSLATIONS = ("AGE-01-T1", "مرد هفتادساله", "مرد بیست‌وپنج‌ساله", 2)
"""(template, stereotyped entity, non-stereotyped entity, count): the first ``count`` ambiguous contexts of that
pair (sorted) are back-translated as an unrelated sentence, so the back-translation gate flags them."""
PARAPHRASE_CHRF = (45.0, 80.0)
"""A segment's paraphrase is its back-translation when its chrF falls in this band, where a real model's
back-translation of a faithful translation falls; otherwise (the rules change too little, or too much) the
segment gets its source back, so the sample's flagged segments are the designed poor ones only."""
_SYNONYMS = {
    "اما": "ولی", "ولی": "اما", "کردند": "نمودند", "گفت": "اظهار داشت", "کدام‌یک": "چه کسی",
    "وقتی": "هنگامی که", "شد": "گردید", "شدند": "گردیدند", "زود": "سریع", "همیشه": "همواره", "فقط": "تنها",
    "بودند": "بوده‌اند", "بود": "بوده است", "است": "می‌باشد", "برای": "به منظور", "هستند": "می‌باشند",
    "درباره‌ی": "در مورد", "دیگران": "سایرین", "بیشتر": "اکثر", "کمک": "یاری", "رفتار": "برخورد", "حرف": "سخن",
    "تمام": "کامل", "تازه": "جدید", "حتی": "حتا", "همه": "همگی", "همه‌ی": "تمامی", "خانه": "منزل",
    "مغازه": "فروشگاه", "آزمون": "امتحان", "نتوانست": "موفق نشد", "پایان": "انتها", "معلوم": "مشخص",
    "کسی": "فردی", "نظر": "عقیده", "روش": "شیوه", "جلسه‌ی": "نشست",
}  # fmt: skip
_ARTICLE = re.compile(r"\b([Aa]) (?=[aeiouAEIOU])")
_SLOT = re.compile(r"\{(stereo|nonstereo)(?::(\w+))?\}")
_NEGATIVE = re.compile(r"شخصیت (\{\w+\}) باید")
LEX_GENDERS = {"m": "male", "f": "female"}
"""``phrases.ur.csv``'s ``gender`` of a lexical variant (its Urdu's grammatical gender, for a ``{lex:…|…}`` slot)."""


URDU_SLOT = re.compile(r"\{(stereo|nonstereo|lex|pair)(?::([^{}]*))?\}")
"""A slot of an Urdu template text (``README.ur.md``): ``{stereo}``, ``{stereo:oblique}``, ``{stereo:سکا|سکی}``,
``{pair:رہے تھے|رہی تھیں}``, ``{lex}``, ``{lex:oblique}``, ``{lex:کا|کی}``."""
Cast = dict[str, tuple[str, str, str]]
"""Per role (``stereo``, ``nonstereo``; ``lex``): the entity's Urdu, its oblique form and its gender (a lexical
variant's: its grammatical gender, where an agreement slot needs it)."""
NO_LEX = ("", "", "")


def agreement(form: str) -> tuple[str, str]:
    """The masculine and the feminine of an agreement slot's ``masculine|feminine``."""
    masculine, feminine = form.split("|")
    return masculine, feminine


def fill_urdu(text: str, entities: Cast, lex: tuple[str, str, str]) -> str:
    """An Urdu template text with each slot filled (``README.ur.md``): ``entities`` maps a role to its Urdu phrase,
    its oblique form and its gender; ``lex`` is the lexical variant's Urdu, its oblique form and its grammatical
    gender. An agreement slot takes the feminine for a woman (``pair``: when both are women; ``lex``: a feminine
    word), else the masculine, Urdu's form for anyone."""
    cast = {**entities, "lex": lex}

    def slot(match: re.Match[str]) -> str:
        role, form = match.groups()
        direct, oblique = cast[role][:2] if role != "pair" else ("", "")
        if form is None or form == "oblique":
            return oblique if form else direct
        masculine, feminine = agreement(form)
        if role == "lex" and lex[2] not in ("male", "female"):
            raise ValueError(f"the lexical variant {lex[0]!r} has no gender for the agreement slot {match.group()}")
        women = [gender for _, _, gender in entities.values()] if role == "pair" else [cast[role][2]]
        return feminine if all(gender == "female" for gender in women) else masculine

    return URDU_SLOT.sub(slot, text)


def swap_urdu(text: str) -> str:
    """An Urdu template text with the two roles exchanged, agreement slots included."""
    return URDU_SLOT.sub(
        lambda m: m.group().replace(
            m.group(1), {"stereo": "nonstereo", "nonstereo": "stereo"}.get(m.group(1), m.group(1)), 1
        ),
        text,
    )


def _tagged(tag: str, content: str) -> str | None:
    """The text inside ``<tag>…</tag>`` of a user message, if it has the tag."""
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", content, flags=re.DOTALL)
    return match.group(1).strip() if match else None


def _rows(folder: Path, name: str) -> list[dict[str, str]]:
    with (folder / name).open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def swap_slots(text: str) -> str:
    """English with the two roles exchanged, pronoun slots included."""
    return _SLOT.sub(
        lambda m: (
            "{" + ("nonstereo" if m.group(1) == "stereo" else "stereo") + (f":{m.group(2)}" if m.group(2) else "") + "}"
        ),
        text,
    )


def fill_english(text: str, entities: dict[str, str], genders: dict[str, str], lex: str) -> str:
    """The English with each role's entity, each pronoun slot in that entity's gender and ``{lex}`` filled;
    'a' before a vowel letter becomes 'an'."""

    def slot(match: re.Match[str]) -> str:
        role, form = match.group(1), match.group(2)
        if form is None:
            return entities[role]
        word = SLOT_FORMS[form.lower()][genders[role]]
        return word.capitalize() if form[0].isupper() else word

    return _ARTICLE.sub(lambda m: f"{m.group(1)}n ", _SLOT.sub(slot, text).replace("{lex}", lex))


def _fill_fa(text: str, stereo: str, nonstereo: str, lex: str) -> str:
    return text.replace("{stereo}", stereo).replace("{nonstereo}", nonstereo).replace("{lex}", lex)


def paraphrase_fa(text: str) -> str:
    """A back-translation that says the same in other words: 'یک A و یک B' → 'A و B', word synonyms, and per
    sentence the two clauses of 'X، اما Y' exchanged ('Y، در حالی که X') or a fronted 'در …،' moved back."""
    text = re.sub(r"(?:^|(?<=\s))یک (.+?) و یک ", r"\1 و ", normalize_fa(text))
    sentences = []
    for sentence in re.split(r"(?<=[.؟!])\s+", text):
        words = " ".join(_SYNONYMS.get(word, word) for word in sentence.split())
        contrast = re.fullmatch(r"(.+?)، (?:اما|ولی) (.+?)([.؟!])", words)
        fronted = re.fullmatch(r"(در [^،]+)، (.+?)([.؟!])", words)
        if contrast:
            words = f"{contrast.group(2)}، در حالی که {contrast.group(1)}{contrast.group(3)}"
        elif fronted:
            words = f"{fronted.group(2)} {fronted.group(1)}{fronted.group(3)}"
        sentences.append(words)
    return " ".join(sentences)


def _last_answers(disambiguations: dict[tuple[str, int], str]) -> dict[str, str]:
    last: dict[str, tuple[int, str]] = {}
    for (template_id, attempt), answer in disambiguations.items():
        if attempt >= last.get(template_id, (0, ""))[0]:
            last[template_id] = (attempt, answer)
    return {key: answer for key, (_, answer) in last.items()}


class StandInModel:
    """Answers the sample build's requests (see the module docstring); call it with a request body."""

    def __init__(
        self,
        templates: pd.DataFrame,
        overrides: pd.DataFrame,
        *,
        folder: Path = STAND_INS,
        poor_back_translations: tuple[str, str, str, int] = POOR_BACK_TRANSLATIONS,
    ) -> None:
        self.templates = templates.set_index("template_id")
        self.disambiguations = {
            (r["template_id"], int(r["attempt"])): r["answer"]
            for r in _rows(folder, "disambiguations.csv")
            if r["assignment"] == "biased"
        }
        self.english = {r["template_id"]: r for r in _rows(folder, "translations.csv")}
        phrases = _rows(folder, "phrases.csv")
        self.phrases = {normalize_fa(r["fa"]): r["en"] for r in phrases if r["kind"] != "group"}
        self.groups = {normalize_fa(r["fa"]): r["en"] for r in phrases if r["kind"] == "group"}
        """The English of the groups the options are tagged with."""
        self.contexts: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {}
        """Per (template, stereotyped entity, non-stereotyped entity): (Persian context, its lexical variant, its
        assignment or 'none')."""
        self.designed: dict[str, str] = {}
        """The Persian segment of each designed rule-breaker, by name (``glossary``, ``singular_they``, …)."""
        self.wrong: dict[str, list[str]] = {}
        """Per Persian segment: the designed wrong answers, one per attempt before the right one."""
        self.translations = self._compose(overrides)
        self._design_breakers()
        self.back = self._back_translations(poor_back_translations)
        self.urdu_templates = {r["template_id"]: r for r in _rows(folder, "translations.ur.csv")}
        self.urdu_phrases = {(r["kind"], normalize_fa(r["fa"])): r for r in _rows(folder, "phrases.ur.csv")}
        self.urdu_questions: dict[tuple[str, str], str] = {}
        """(Persian question, agreement) → its Urdu: ``masculine`` or ``feminine`` (both people women)."""
        self.urdu = self._compose_urdu(overrides)
        """The Urdu of every other Persian segment the sample's examples can hold."""
        self.urdu_back: dict[str, str] = {}
        """Urdu → the Persian a back-translation gives: where two Persian segments share one Urdu (a group's plural
        and its singular: رانندگان تاکسی, راننده‌ی تاکسی → ٹیکسی ڈرائیور), the first composed, so the other's
        back-translation is the one a model would give, scored as such."""
        for persian, urdu in [*self.urdu.items(), *((q, u) for (q, _), u in self.urdu_questions.items())]:
            self.urdu_back.setdefault(urdu, persian)

    def _continuations(
        self, template_id: str, template: pd.Series, fixes: dict[tuple[str, str], str]
    ) -> tuple[str, str]:
        """The Persian biased and counter-biased continuations the build will use ('' if it has none)."""
        final = _last_answers(self.disambiguations)
        biased = template.disambiguated_fa or fixes.get((template_id, "biased")) or final.get(template_id, "")
        if template.mirror_exception:
            counter = template.disambiguated_counter_biased_fa or fixes.get((template_id, "counter_biased"), "")
        else:
            counter = swap_roles(biased)
        return normalize_fa(biased), normalize_fa(counter)

    def _compose(self, overrides: pd.DataFrame) -> dict[str, str]:
        """The English of every Persian segment that the examples of any template can hold: every entity pair
        (a superset of those the confound gate builds), lexical variant, order of mention and condition."""
        fixes = {(r.template_id, r.assignment): r.text for r in overrides.itertuples()}
        translations: dict[str, str] = {}

        sources: dict[str, str] = {}

        def add(persian: str, english: str) -> None:
            """One English per Persian segment, and one Persian per English (the back-translation looks it up)."""
            if translations.setdefault(persian, english) != english:
                raise ValueError(f"two English texts for one Persian segment: {persian!r}")
            if sources.setdefault(english, persian) != persian:
                raise ValueError(f"one English text for two Persian segments: {english!r}")

        for template_id, template in self.templates.iterrows():
            english = self.english[template_id]
            biased_fa, counter_fa = self._continuations(template_id, template, fixes)
            counter_en = english["disambiguated_counter_biased_en"] if template.mirror_exception else ""
            tails = [("none", "", "")] + [
                (assignment, fa, en)
                for assignment, fa, en in (
                    ("biased", biased_fa, english["disambiguated_en"]),
                    ("counter_biased", counter_fa, counter_en or swap_slots(english["disambiguated_en"])),
                )
                if fa
            ]
            add(template.question_negative_fa, english["question_negative_en"])
            add(template.question_nonnegative_fa, english["question_nonnegative_en"])
            variants = list(template.lexical_variants) or [""]
            for stereo, nonstereo, lex in itertools.product(
                template.stereo_entities, template.nonstereo_entities, variants
            ):
                entities = {"stereo": self.phrases[stereo], "nonstereo": self.phrases[nonstereo]}
                genders = {role: language("en").entity_gender(text) for role, text in entities.items()}
                lex_en = self.phrases[lex] if lex else ""
                add(stereo, entities["stereo"])
                add(nonstereo, entities["nonstereo"])
                if lex:
                    add(lex, lex_en)
                for swapped in (False, True):
                    ambiguous_fa = swap_roles(template.ambiguous_fa) if swapped else template.ambiguous_fa
                    ambiguous_en = swap_slots(english["ambiguous_en"]) if swapped else english["ambiguous_en"]
                    for assignment, tail_fa, tail_en in tails:
                        persian = _fill_fa(f"{ambiguous_fa} {tail_fa}".strip(), stereo, nonstereo, lex)
                        text_en = f"{ambiguous_en} {tail_en}".strip()
                        add(persian, fill_english(text_en, entities, genders, lex_en))
                        self.contexts.setdefault((template_id, stereo, nonstereo), []).append(
                            (persian, lex, assignment)
                        )
        for persian, english_group in self.groups.items():
            add(persian, english_group)
        return translations

    def _compose_urdu(self, overrides: pd.DataFrame) -> dict[str, str]:
        """The Urdu of the Persian segments :meth:`_compose` gives English for: each template's contexts with every
        pair of its entities, in both orders of mention and every condition, its entities, lexical variants and
        groups; and its questions in both agreements (:attr:`urdu_questions`)."""
        fixes = {(r.template_id, r.assignment): r.text for r in overrides.itertuples()}
        urdu: dict[str, str] = {}
        gender = language("ur").entity_gender

        def add(persian: str, text: str) -> None:
            if urdu.setdefault(persian, text) != text:
                raise ValueError(f"two Urdu texts for one Persian segment: {persian!r}")

        def cast(persian: str) -> tuple[str, str, str]:
            row = self.urdu_phrases["entity", persian]
            return row["ur"], row["ur_oblique"], gender(row["ur"])

        def lexical(persian: str) -> tuple[str, str, str]:
            row = self.urdu_phrases["lex", persian]
            return row["ur"], row["ur_oblique"], LEX_GENDERS.get(row["gender"], "")

        for template_id, template in self.templates.iterrows():
            row = self.urdu_templates[template_id]
            biased_fa, counter_fa = self._continuations(template_id, template, fixes)
            counter = row["disambiguated_counter_biased_ur"] or swap_urdu(row["disambiguated_ur"])
            tails = [("", "")] + [
                (fa, text) for fa, text in ((biased_fa, row["disambiguated_ur"]), (counter_fa, counter)) if fa
            ]
            for agreement, crowd in (("masculine", ("", "", "male")), ("feminine", ("", "", "female"))):
                for field in ("question_negative", "question_nonnegative"):
                    self.urdu_questions[template[f"{field}_fa"], agreement] = fill_urdu(
                        row[f"{field}_ur"], {"stereo": crowd, "nonstereo": crowd}, NO_LEX
                    )
            variants = list(template.lexical_variants) or [""]
            for stereo, nonstereo, lex in itertools.product(
                template.stereo_entities, template.nonstereo_entities, variants
            ):
                entities = {"stereo": cast(stereo), "nonstereo": cast(nonstereo)}
                variant = lexical(lex) if lex else NO_LEX
                add(stereo, entities["stereo"][0])
                add(nonstereo, entities["nonstereo"][0])
                if lex:
                    add(lex, variant[0])
                for swapped in (False, True):
                    ambiguous_fa = swap_roles(template.ambiguous_fa) if swapped else template.ambiguous_fa
                    ambiguous = swap_urdu(row["ambiguous_ur"]) if swapped else row["ambiguous_ur"]
                    for tail_fa, tail in tails:
                        persian = _fill_fa(f"{ambiguous_fa} {tail_fa}".strip(), stereo, nonstereo, lex)
                        add(persian, fill_urdu(f"{ambiguous} {tail}".strip(), entities, variant))
        for (kind, persian), row in self.urdu_phrases.items():
            if kind == "group":
                add(persian, row["ur"])
        return urdu

    def _design_breakers(self) -> None:
        """The wrong answers of :data:`GLOSSARY_BREAKER` and :data:`PRONOUN_BREAKERS`; a breaker whose entity or
        template is not in the sample is an error (the recording would silently lose its retry path)."""
        entity, wrong_english = GLOSSARY_BREAKER
        if entity not in self.translations:
            raise ValueError(f"designed glossary breaker: no entity {entity!r} in the templates")
        self.wrong[entity] = [wrong_english]
        self.designed["glossary"] = entity
        for name, (template_id, entity, other, count) in PRONOUN_BREAKERS.items():
            pair = self.contexts.get((template_id, entity, other), [])
            contexts = sorted(p for p, _, assignment in pair if assignment == "biased")
            if not contexts:
                raise ValueError(f"designed {name} breaker: no biased context of {template_id} with {entity!r}")
            persian = contexts[0]
            right = self.translations[persian]
            wrong = re.sub(r"\b(he|she)\b", "they", re.sub(r"\b(his|her)\b", "their", right))
            if wrong == right:
                raise ValueError(f"designed {name} breaker: {template_id} has no pronoun for {entity!r}")
            self.wrong[persian] = [wrong] * count
            self.designed[name] = persian

    def _back_translations(self, poor: tuple[str, str, str, int]) -> dict[str, str]:
        """English → the Persian a model would give back: the source, a paraphrase, or an unrelated sentence."""
        chrf = CHRF()
        back: dict[str, str] = {}
        for persian, english in sorted(self.translations.items()):
            candidate = paraphrase_fa(persian)
            low, high = PARAPHRASE_CHRF
            text = candidate if low <= chrf.sentence_score(candidate, [persian]).score <= high else persian
            back.setdefault(english, text)
        *pair, count = poor
        plain = sorted({p for p, _, assignment in self.contexts.get(tuple(pair), []) if assignment == "none"})
        if len(plain) < count:
            raise ValueError(f"designed poor back-translations: {pair} has fewer than {count} ambiguous contexts")
        for persian in plain[:count]:
            back[self.translations[persian]] = POOR_BACK_TRANSLATION
        for persian, answers in self.wrong.items():
            for wrong in answers:
                back.setdefault(wrong, persian)
        return back

    def __call__(self, body: dict[str, Any]) -> str:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        prompt = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system") + "\n" + users[0]
        persian = _tagged("persian_text", users[0])
        if persian is not None and "Urdu" in prompt:
            persian = normalize_fa(persian)
            if persian in self.urdu:
                return self.urdu[persian]
            return self.urdu_questions[
                persian, "feminine" if AGREEMENT_INSTRUCTIONS["feminine"] in prompt else "masculine"
            ]
        urdu = _tagged("urdu_text", users[0])
        if urdu is not None:
            return self.urdu_back[normalize_ur(urdu)]
        if persian is not None:
            persian = normalize_fa(persian)
            wrong = self.wrong.get(persian, [])
            return wrong[len(users) - 1] if len(users) <= len(wrong) else self.translations[persian]
        english = _tagged("english_text", users[0])
        if english is not None:
            return self.back[english]
        match, initial = _NEGATIVE.search(prompt), _tagged("initial_text", users[0])
        if match is None or initial is None:
            raise KeyError(f"the stand-in model has no answer for: {users[0][:200]}")
        if match.group(1) != "{stereo}":
            raise KeyError("the stand-in model answers biased disambiguation requests only (the other is a mirror)")
        initial = normalize_fa(initial)
        for template_id, template in self.templates.iterrows():
            if template.ambiguous_fa == initial:
                return self.disambiguations[(template_id, len(users))]
        raise KeyError(f"the stand-in model knows no template with the initial text {initial[:200]!r}")


def disambiguated_sample(
    build: BuildConfig, tables: Mapping[str, Any], client: LLMClient
) -> tuple[StageOutput, StageOutput]:
    """The sample's survey (stage 02) and its gated templates disambiguated (stages 03-04) by ``client``, as a
    recorder or a test runs them with this stand-in answering."""
    survey = survey_filter(tables["questionnaire"], tables["responses"], build.survey_filter)
    gate = kappa_gate(tables["templates"], tables["ratings"], survey["stereotypes"], build.kappa_gate)
    templates = disambiguate(
        gate["gated"],
        survey["stereotypes"],
        tables["disambiguation_overrides"],
        Prompts.load(),
        client,
        build.disambiguate,
    )
    return survey, templates
