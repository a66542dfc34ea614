"""Translation of generated instances, not templates (PakBBQ §3.3: placeholders break in translation), from the
source language (Persian; English on the adaptation path, whose entities are its options without BBQ's article:
:func:`with_option_entities`) into each target language of ``[translate] targets`` (English first: ``["en",
"ur"]``), one stage per target (:func:`translate_stage`). The rules below are told for English; each target's own
come from its :class:`~pbbq.tasks.text.languages.Language` (Urdu: agreement instead of pronouns, no article, a
mention in its direct or oblique form) and its prompts are ``translate.<source>-<target>.txt`` and siblings.

Each distinct Persian segment is translated once, since contexts, questions and options recur across
examples (a question, into a target whose verbs agree with their subject's gender, once per gender of its pairs:
:func:`question_agreement`): entity phrases and lexical variants first (as bare phrases), then questions and
contexts, each context told the English of the entity phrases it holds, so that the English options occur in the English
context; and the groups the options are tagged with (``answer_info``), so that an English record's tags are
English. The 'unknown' phrasings are not translated: they map to a fixed English list
(``annotations/unknown_phrases.csv``).

Every translation is validated (:func:`translation_failures`): English only; each group term of the
segment's entities and lexical variant named as ``annotations/glossary.csv`` names it
(:mod:`pbbq.tasks.translate.glossary`); an entity phrase keeps the gender its Persian gives
(:mod:`pbbq.tasks.text.cues`; English compounds such as 'businessman' read by their morphology), no more and no
less; a context holds each of its entities' English and its pronouns agree
with the gender of the entity they refer to (no 'they' for a man, no 'she' for him); a question genders no one it may be
about. A failing translation is sent back with the failures named (``prompts/translate.retry.fa-en.txt``), up to
``max_attempts`` answers in all; what still fails goes to review and its examples are dropped (``failed_validation``).

Every English segment is translated back to Persian and scored with chrF (sacrebleu's, all segments at once:
:mod:`pbbq.tasks.translate.chrf`) against the original; a segment under ``min_chrf`` is flagged for review, and
``keep_flagged`` decides whether its examples stay (``flagged_translation``). Whatever its chrF, a
back-translation must name each group of the segment's glossary entries by a Persian term of the same English name
(«راننده‌ی کرد» coming back as «راننده‌ی نمود» has lost the Kurd): else the segment fails (``group_term_lost``),
goes to review and its examples are dropped.

English examples keep the Persian example's id stem (``<id>-en``), point to it in ``source_example_id``, and keep
its record in BBQ's English surface: an entity option is its phrase with the article, as BBQ writes it ("The
taxi driver"); ``answer_info`` holds each option's text and the English of its group tag (``additional_metadata``'s
``stereotyped_groups`` too, so lm-eval's BBQ code still finds the biased answer); ``answer_roles`` are the Persian
example's, and ``lexical_variant`` is the variant's English.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from string import Template
from typing import Any, NamedTuple

import pandas as pd
import pyarrow as pa

from ..core.artifacts import REPO_ROOT, StageOutput, count_reasons, sha256_bytes
from ..core.inputs import TEMPLATES, UNKNOWN_PHRASES, read_csv_checked, require_filled, require_none
from ..core.prompts import PromptBundle, retry_request
from ..core.schemas import EXAMPLE, EXAMPLE_DROPPED, OPTIONS, UNKNOWN_GROUP, group_tag
from ..core.stage import Client, Input, Resource, Stage, Table, listed
from ..llm import LLMClient, LLMRequest, LLMResponse
from ..text.languages import LANGUAGES, NONE, Language, language
from .chrf import chrf_scores
from .glossary import SOURCE, TARGET, Glossary, load_english_glossary, load_glossary, rendered

STAGE_NAME = "translate"
PROMPTS = REPO_ROOT / "prompts"
KIND_NAMES = {"entity": "phrase", "lex": "phrase", "group": "phrase", "question": "question", "context": "text"}
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
AGREEMENT_INSTRUCTIONS = {
    "feminine": "Both people it may be about are women.",
    "masculine": "The two people it may be about are not both women.",
}
"""What a question's request adds in a target whose verbs agree with their subject's gender
(:func:`question_agreement`): whether the people it asks about are both women."""
FAILURES: dict[str, str] = {
    "empty": "The answer is empty.",
    "not_target": "The answer has {source} letters: translate all of it into {target}.",
    "glossary": 'It does not name {fa} "{term}", as the glossary does.',
    "entity_missing": 'It does not hold the phrase "{phrase}" exactly as given.',
    "entity_gender": "{detail}",
    "pronoun_gender": "{detail}",  # the target language's gender rules (Language.gender_failures): English's
    "singular_they": "{detail}",
    "verb_gender": "{detail}",  # Urdu's
    "group_term_lost": "The back-translation does not name {fa} ({term}).",
}
"""Every rule a translation can break, with the English sentence that names it in the follow-up message (a lost
group term is found in the back-translation, after the last attempt: it names nothing to the model). A text not in
the target language is recorded as ``not_<target name>`` (``not_english``, ``not_urdu``)."""
OWN_LETTERS = {"fa": "\u0647\u06c0", "ur": "\u0679\u0688\u0691\u06ba\u06be\u06c1\u06c2\u06d2\u06d3"}
"""Letters that one language of the Perso-Arabic script writes and the other does not, the only sign of which
language a text of that script is in: Persian's ه and ۀ (Urdu writes ہ and ھ); Urdu's retroflex ٹ ڈ ڑ, its nasal ں,
ھ ہ ۂ and its ے ۓ."""
MIN_WORDS_WITH_OWN_LETTER = 8
"""A sentence of this many words in a language of :data:`OWN_LETTERS` holds one of its own letters (Urdu's ہے، نے،
کے، میں); a phrase may not (نرس, مخالف جنس پرست مرد اداکار), so a short one is told only by the source's letters."""
OPTION_ARTICLE = {"en": "The "}
"""The article before an entity option, as BBQ writes it in English ("The taxi driver"); a language without one
(Urdu) gives the bare phrase."""


def segment_schema(source: Language, target: Language) -> pa.Schema:
    """A translated segment: its source text (``text_fa``), its glossary entries (``term_fa → term_en``), the
    target's text of its last attempt (``text_en``), the rules that attempt broke (``;``-separated, empty when it
    passed), the back-translation into the source (``back_fa``) and its chrF, whether the chrF is under
    ``min_chrf``, and every request behind it. A target whose verbs agree with their subject's gender (Urdu) also
    has each question's ``agreement`` (:func:`question_agreement`; empty for the other kinds)."""
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
GROUP_SEPARATOR = "-"
"""How a group tag joins the words of its group's name (:func:`pbbq.tasks.core.schemas.group_tag`)."""
_PUNCTUATION = re.compile(r"[^\w\u200c\s]")


@dataclass(frozen=True)
class TranslateParams:
    min_chrf: float = 40.0
    """Back-translation chrF (0–100) under which a segment is flagged for review."""
    keep_flagged: bool = False
    """Keep the examples of flagged segments in the dataset (they are reported either way)."""
    max_attempts: int = 3
    """Answers asked for per segment: the first and the retries with the failures named."""


def prompt_files(source: Language, target: Language) -> tuple[str, ...]:
    """In :class:`TranslatePrompts`' order: instructions, data, retry (each of the pair, ``fa-en``); back-translation
    instructions and data (the pair reversed, ``en-fa``)."""
    pair, back = f"{source.code}-{target.code}", f"{target.code}-{source.code}"
    return (
        f"translate.{pair}.txt",
        f"translate.input.{pair}.txt",
        f"translate.retry.{pair}.txt",
        f"back_translate.{back}.txt",
        f"back_translate.input.{back}.txt",
    )


PROMPT_FILES = prompt_files(SOURCE, TARGET)


@dataclass(frozen=True)
class TranslatePrompts(PromptBundle):
    """``forward`` and ``back`` are system messages (the instructions); ``data`` and ``back_data`` the user
    messages, where the segment's text travels inside tags, after the instructions; ``retry`` names the broken
    rules."""

    forward: str
    data: str
    retry: str
    back: str
    back_data: str

    @classmethod
    def load(cls, folder: Path = PROMPTS, source: Language = SOURCE, target: Language = TARGET) -> TranslatePrompts:
        return cls.read(tuple(folder / name for name in prompt_files(source, target)))


class Failure(NamedTuple):
    """A broken rule: its code (a key of :data:`FAILURES`) and the sentence that names it to the model."""

    code: str
    message: str


def _failure(code: str, **details: str) -> Failure:
    return Failure(code, FAILURES[code].format(**details))


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

    @property
    def instructions(self) -> dict[str, str]:
        """:data:`KIND_INSTRUCTIONS` with the pair's names."""
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
        target writes in a text of :data:`MIN_WORDS_WITH_OWN_LETTER` words (:data:`OWN_LETTERS`)."""
        own = {code: OWN_LETTERS.get(code) for code in (self.source.code, self.target.code)}
        source_own, target_own = own[self.source.code], own[self.target.code]
        if source_own is None or target_own is None:
            return self.source.script.search(text) is not None
        if re.search(f"[{source_own}]", text):
            return True
        return len(text.split()) >= MIN_WORDS_WITH_OWN_LETTER and not re.search(f"[{target_own}]", text)

    @property
    def gender_words(self) -> dict[str, str]:
        return {"male": "male", "female": "female", NONE: f"of a gender the {self.source.name} does not give"}


def _segment_id(kind: str, text: str, agreement: str = "") -> str:
    return f"{kind}-{sha256_bytes(text.encode('utf-8'))[:12]}" + (f"-{agreement}" if agreement else "")


def question_agreement(entities: Iterable[str], source: Language, target: Language) -> str:
    """The agreement of a question's translation about the ``entities`` (source phrases) of one pair, in a target
    whose verbs agree with their subject's gender (:attr:`~pbbq.tasks.text.languages.Language.marks_gender_on_verbs`;
    else ``""``: one translation for every pair): ``feminine`` when the source gives both as women, else
    ``masculine``, the form for anyone ('کون نہیں سنبھال سکی؟' asks about two women, 'سکا' about anyone else)."""
    if not target.marks_gender_on_verbs:
        return ""
    return "feminine" if all(source.entity_gender(e) == "female" for e in entities) else "masculine"


def segments(examples: pd.DataFrame, glossary: Glossary, column: str = "text_fa") -> pd.DataFrame:
    """The distinct source segments of the examples with what validates them: ``entities`` (those of a context's two
    that its text holds, as BBQ's "two friends, one Afghan and the other Nigerian" holds no "Afghan friend"; a
    question's every entity it is asked about; an entity phrase itself), ``lexicals`` (a context's lexical
    variant; a variant itself) and ``glossary``, the ``(term, rendering)`` entries of its entities (a context's
    two) and lexical variant (a question names no entity, so it has none). In a target whose verbs agree with
    their subject's gender, a question is one segment per ``agreement`` of its pairs (:func:`question_agreement`),
    its entities those of those pairs."""
    rows: list[dict[str, Any]] = []
    entities = sorted(set(examples["stereo_entity"]) | set(examples["nonstereo_entity"]))
    rows += [{"kind": "entity", column: e, "entities": (e,), "lexicals": ()} for e in entities]
    variants = sorted(set(examples["lexical_variant"]) - {""})
    rows += [{"kind": "lex", column: v, "entities": (), "lexicals": (v,)} for v in variants]
    rows += [{"kind": "group", column: g, "entities": (), "lexicals": (g,)} for g in sorted(_groups(examples))]
    agreements = [
        question_agreement(pair, glossary.source, glossary.target)
        for pair in zip(examples["stereo_entity"], examples["nonstereo_entity"], strict=True)
    ]
    for (question, agreement), group in examples.assign(agreement=agreements).groupby(["question", "agreement"]):
        asked = sorted(set(group["stereo_entity"]) | set(group["nonstereo_entity"]))
        rows.append(
            {"kind": "question", column: question, "entities": tuple(asked), "lexicals": (), "agreement": agreement}
        )
    contexts = examples.groupby("context", sort=True).agg(
        stereo=("stereo_entity", "first"), nonstereo=("nonstereo_entity", "first"), lex=("lexical_variant", "first")
    )
    for context, row in contexts.iterrows():
        lexicals = (row.lex,) if row.lex else ()
        named = (row.stereo, row.nonstereo)
        held = tuple(e for e in named if glossary.source.mention(e).search(context))
        rows.append({"kind": "context", column: context, "entities": held, "named": named, "lexicals": lexicals})
    frame = pd.DataFrame(rows, columns=["kind", column, "entities", "lexicals", "agreement"]).fillna({"agreement": ""})
    frame.insert(
        0,
        "segment_id",
        [_segment_id(*key) for key in zip(frame["kind"], frame[column], frame["agreement"], strict=True)],
    )
    frame["glossary"] = [
        () if row["kind"] == "question" else _entries(glossary, (*row.get("named", row["entities"]), *row["lexicals"]))
        for row in rows
    ]
    return frame


def group_name(tag: str) -> str:
    """The Persian name of the group a tag names (its words joined by spaces again)."""
    return tag.replace(GROUP_SEPARATOR, " ")


def _groups(examples: pd.DataFrame) -> set[str]:
    """The Persian names of the groups the examples' entity options are tagged with."""
    return {
        group_name(str(list(info[option])[1]))
        for info, roles in zip(examples["answer_info"], examples["answer_roles"], strict=True)
        for option in OPTIONS
        if roles[option] != "unknown"
    }


def _entries(glossary: Glossary, phrases: Iterable[str]) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    for phrase in phrases:
        found.update(glossary.terms_in(phrase))
    return tuple(sorted(found.items()))


def entity_gender_failures(source_text: str, translated: str, pair: Pair = Pair()) -> list[Failure]:
    """A translated entity phrase must give the gender its Persian gives, and none it does not
    ('جوان' is a young person, not a young man): both by their language's ``entity_gender``, the target's form for
    anyone aside (:meth:`~pbbq.tasks.text.languages.Language.keeps_gender`)."""
    given, read = pair.source.entity_gender(source_text), pair.target.entity_gender(translated)
    if pair.target.keeps_gender(translated, given):
        return []
    words = pair.gender_words
    detail = (
        f'The {pair.source.name} phrase names someone {words[given]}, but "{translated}" names someone '
        f"{words[read]}: keep the {pair.source.name}'s gender."
    )
    return [_failure("entity_gender", detail=detail)]


def translation_failures(
    kind: str,
    source_text: str,
    translated: str,
    entities: Mapping[str, str],
    glossary: Iterable[tuple[str, str]],
    pair: Pair = Pair(),
) -> list[Failure]:
    """The rules one translation breaks (empty: it is accepted); see the module docstring. ``entities`` maps the
    segment's source entities to their translation, ``glossary`` holds its ``(term_fa, rendering)``. The letters
    are read as the model wrote them; every other rule on the text normalised by the target's ``normalize``."""
    if not translated.strip():
        return [_failure("empty")]
    failures = []
    if pair.foreign(translated):
        failures.append(
            Failure(pair.not_target, _failure("not_target", source=pair.source.name, target=pair.target.name).message)
        )
    target = pair.target
    text = target.normalize(translated)
    failures += [_failure("glossary", fa=fa, term=term) for fa, term in glossary if not rendered(text, term, target)]
    if kind == "entity":
        failures += entity_gender_failures(source_text, text, pair)
    if kind == "context":
        failures += [
            _failure("entity_missing", phrase=phrase)
            for phrase in entities.values()
            if not target.mention(phrase).search(text)
        ]
    if kind in ("context", "question"):
        failures += [Failure(*found) for found in target.gender_failures(text, list(entities.values()), kind)]
    return failures


def lost_group_terms(entries: Iterable[tuple[str, str]], back: str, glossary: Glossary) -> list[Failure]:
    """The glossary entries of a segment whose group its back-translation does not name: by the term itself or by
    another term of the same rendering ('آذری' for 'ترک'), whatever the chrF."""
    named = {rendering for _, rendering in glossary.terms_in(_PUNCTUATION.sub(" ", back))}
    return [_failure("group_term_lost", fa=fa, term=term) for fa, term in entries if term not in named]


def delimited(text: str) -> str:
    """Text as it goes inside a prompt's tag: angle brackets become look-alikes, so it cannot close its block or
    open another."""
    return text.replace("<", "‹").replace(">", "›")


def _lines(entries: Iterable[tuple[str, str]], empty: str) -> str:
    lines = [f"{delimited(fa)} → {delimited(en)}" for fa, en in entries]
    return "\n".join(lines) if lines else empty


def forward_request(
    segment: Mapping[str, Any], entities: Mapping[str, str], prompts: TranslatePrompts, pair: Pair = Pair()
) -> LLMRequest:
    """The translation request of one segment: the instructions for its kind (system message), and in the user
    message its glossary entries, the translation of a context's entity phrases and its text, each in its tag."""
    kind = segment["kind"]
    note = AGREEMENT_INSTRUCTIONS.get(segment.get("agreement", ""))
    instructions = pair.instructions[kind] + (f" {note}" if note else "")
    data = Template(prompts.data).substitute(
        glossary=_lines(segment["glossary"], "(no group names in this text)"),
        phrases=_lines(entities.items(), "(none)"),
        text=delimited(segment[pair.source_column]),
    )
    return LLMRequest(
        messages=(("user", data),),
        system=Template(prompts.forward).substitute(kind=KIND_NAMES[kind], instructions=instructions),
        prompt_hash=prompts.sha256,
        stage=pair.stage,
        context=segment["segment_id"],
    )


def back_request(segment_id: str, translated: str, prompts: TranslatePrompts, pair: Pair = Pair()) -> LLMRequest:
    """The back-translation request of one segment's translation."""
    return LLMRequest(
        messages=(("user", Template(prompts.back_data).substitute(text=delimited(translated))),),
        system=prompts.back,
        prompt_hash=prompts.sha256,
        stage=pair.stage,
        context=f"back {segment_id}",
    )


def follow_up(
    request: LLMRequest, answer: str, failures: list[Failure], kind: str, prompts: TranslatePrompts
) -> LLMRequest:
    """The conversation so far, the answer, and a message that names every rule it broke."""
    named = " ".join(failure.message for failure in failures)
    return retry_request(request, answer, Template(prompts.retry).substitute(failure=named, kind=KIND_NAMES[kind]))


def _clean(text: str, kind: str, target: Language) -> str:
    """The answer's words, one space apart; a bare phrase (an entity, a group) without its article."""
    text = " ".join(text.split())
    return target.without_article(text) if kind in ("entity", "group") else text


def _translate_batch(
    batch: pd.DataFrame,
    translations: dict[str, str],
    prompts: TranslatePrompts,
    client: LLMClient,
    params: TranslateParams,
    log: list[dict[str, Any]],
    pair: Pair,
) -> dict[str, tuple[str, list[Failure], list[str]]]:
    """Translate, validate and retry one batch of segments; per segment id its last translation (normalised by
    the target's ``normalize``), the rules that answer broke and every request id."""
    rows = {row["segment_id"]: row for row in batch.to_dict(orient="records")}
    entities = {
        sid: {e: translations[e] for e in row["entities"]} if row["kind"] in ("question", "context") else {}
        for sid, row in rows.items()
    }
    pending = {
        sid: forward_request(row, entities[sid] if row["kind"] == "context" else {}, prompts, pair)
        for sid, row in rows.items()
    }
    results: dict[str, tuple[str, list[Failure], list[str]]] = {}
    for attempt in range(1, params.max_attempts + 1):
        if not pending:
            break
        answers: list[LLMResponse] = client.complete_many(list(pending.values()))
        still: dict[str, LLMRequest] = {}
        for (sid, request), answer in zip(pending.items(), answers, strict=True):
            row = rows[sid]
            written = _clean(answer.text, row["kind"], pair.target)
            failures = translation_failures(
                row["kind"], row[pair.source_column], written, entities[sid], row["glossary"], pair
            )
            text = pair.target.normalize(written)
            ids = [*results.get(sid, ("", [], []))[2], answer.request_id]
            results[sid] = (text, failures, ids)
            log.append(
                {
                    "segment_id": sid,
                    "kind": row["kind"],
                    "attempt": attempt,
                    pair.target_column: text,
                    "failures": ";".join(f.code for f in failures),
                    "messages": " ".join(f.message for f in failures),
                    "request_id": answer.request_id,
                }
            )
            if failures:
                still[sid] = follow_up(request, answer.text, failures, row["kind"], prompts)
        pending = still
    return results


def translate_segments(
    table: pd.DataFrame,
    prompts: TranslatePrompts,
    client: LLMClient,
    params: TranslateParams,
    glossary: Glossary,
    pair: Pair = Pair(),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every segment's translation (validated, retried), its back-translation into the source (normalised by the
    source's ``normalize``), chrF and lost group terms (:func:`lost_group_terms`); and every attempt.

    Entity phrases, lexical variants and groups go first: a context's request holds its entities' translation."""
    translations: dict[str, str] = {}
    results: dict[str, tuple[str, list[Failure], list[str]]] = {}
    log: list[dict[str, Any]] = []
    for kinds in (("entity", "lex", "group"), ("question", "context")):
        batch = table[table["kind"].isin(kinds)]
        done = _translate_batch(batch, translations, prompts, client, params, log, pair)
        results.update(done)
        translations.update(
            {text: done[sid][0] for sid, text in zip(batch["segment_id"], batch[pair.source_column], strict=True)}
        )
    back_requests = [back_request(sid, results[sid][0], prompts, pair) for sid in table["segment_id"]]
    answers = client.complete_many(back_requests)
    backs = [pair.source.normalize(answer.text) for answer in answers]
    scores = chrf_scores(backs, table[pair.source_column].tolist())
    rows = []
    for sid, kind, agreement, source_text, entries, answer, back, score in zip(
        table["segment_id"],
        table["kind"],
        table["agreement"],
        table[pair.source_column],
        table["glossary"],
        answers,
        backs,
        scores,
        strict=True,
    ):
        text, failures, ids = results[sid]
        failures = [*failures, *lost_group_terms(entries, back, glossary)]
        rows.append(
            {
                "segment_id": sid,
                "kind": kind,
                "agreement": agreement,
                pair.source_column: source_text,
                "glossary": [f"{fa} → {term}" for fa, term in entries],
                pair.target_column: text,
                "attempts": len(ids),
                "failures": ";".join(dict.fromkeys(f.code for f in failures)),
                f"back_{pair.source.code}": back,
                "chrf": score,
                "flagged": score < params.min_chrf,
                "request_ids": [*ids, answer.request_id],
            }
        )
    segment, attempt = segment_schema(pair.source, pair.target), attempt_schema(pair.target)
    return pd.DataFrame(rows, columns=segment.names), pd.DataFrame(log, columns=attempt.names)


def translated_examples(
    examples: pd.DataFrame,
    translated: pd.DataFrame,
    unknown_phrases: pd.DataFrame,
    params: TranslateParams,
    pair: Pair = Pair(),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The target's examples aligned with the source ones, and those dropped with their reason.

    An example is dropped when one of its segments (context, question, entities, lexical variant) failed
    validation (``failed_validation``) or, unless ``keep_flagged``, was flagged by its back-translation
    (``flagged_translation``); then the other examples of its entity pair (template, entities, lexical variant)
    are dropped too (``pair_incomplete``), so that every pair of the target keeps its mirrors and both contexts.
    Each target drops on its own: a pair failing in Urdu stays in English."""
    source_column = pair.source_column
    agreements = translated["agreement"] if "agreement" in translated else [""] * len(translated)
    # A segment's key, as an example's keys below name it: (kind, source text, agreement).
    segment_keys = list(zip(translated["kind"], translated[source_column], agreements, strict=True))
    rendering = dict(zip(segment_keys, translated[pair.target_column], strict=True))
    failed = {key for key, f in zip(segment_keys, translated["failures"], strict=True) if f}
    flagged = {key for key, f in zip(segment_keys, translated["flagged"], strict=True) if f}
    request_ids = {key: list(ids) for key, ids in zip(segment_keys, translated["request_ids"], strict=True)}
    unknown = dict(
        zip(unknown_phrases[pair.source.unknown_column], unknown_phrases[pair.target.unknown_column], strict=True)
    )
    tags = {text: group_tag(target) for (kind, text, _), target in rendering.items() if kind == "group"}
    article = OPTION_ARTICLE.get(pair.target.code, "")
    rows, reasons, pairs = [], [], []
    for row in examples.to_dict(orient="records"):
        pairs.append((row["template_id"], row["stereo_entity"], row["nonstereo_entity"], row["lexical_variant"]))
        agreement = question_agreement((row["stereo_entity"], row["nonstereo_entity"]), pair.source, pair.target)
        keys = [("context", row["context"], ""), ("question", row["question"], agreement)]
        keys += [("entity", row["stereo_entity"], ""), ("entity", row["nonstereo_entity"], "")]
        keys += [("lex", row["lexical_variant"], "")] if row["lexical_variant"] else []
        entity_options = [option for option in OPTIONS if row["answer_roles"][option] != "unknown"]
        groups = {option: group_name(str(list(row["answer_info"][option])[1])) for option in entity_options}
        keys += [("group", group, "") for group in groups.values()]
        texts = {
            option: f"{article}{rendering[('entity', pair.source.without_article(row[option]), '')]}"
            if option in groups
            else unknown[row[option]]
            for option in OPTIONS
        }
        info = {option: [texts[option], tags.get(groups.get(option, ""), UNKNOWN_GROUP)] for option in OPTIONS}
        [stereotyped] = [option for option in entity_options if row["answer_roles"][option] == "stereotyped"]
        reason = ""
        if failed.intersection(keys):
            reason = "failed_validation"
        elif not params.keep_flagged and flagged.intersection(keys):
            reason = "flagged_translation"
        rows.append(
            row
            | texts
            | {
                "example_id": f"{row['example_id']}-{pair.target.code}",
                "context": rendering[keys[0]],
                "question": rendering[keys[1]],
                "answer_info": info,
                "additional_metadata": row["additional_metadata"] | {"stereotyped_groups": [info[stereotyped][1]]},
                "stereo_entity": rendering[keys[2]],
                "nonstereo_entity": rendering[keys[3]],
                "lexical_variant": rendering[keys[4]] if row["lexical_variant"] else "",
                "lang": pair.target.code,
                "source_example_id": row["example_id"],
                "llm_request_ids": sorted({*row["llm_request_ids"], *(r for key in keys for r in request_ids[key])}),
            }
        )
        reasons.append(reason)
    broken = {pair for pair, reason in zip(pairs, reasons, strict=True) if reason}
    reasons = [
        reason or ("pair_incomplete" if pair in broken else "") for pair, reason in zip(pairs, reasons, strict=True)
    ]
    frame = pd.DataFrame(rows, columns=EXAMPLE.names)
    reason_series = pd.Series(reasons, index=frame.index, dtype="object")
    kept = frame[reason_series == ""].reset_index(drop=True)
    dropped = frame[reason_series != ""].assign(reason=reason_series[reason_series != ""]).reset_index(drop=True)
    return kept, dropped


def with_option_entities(examples: pd.DataFrame, source: Language) -> pd.DataFrame:
    """The examples with each entity as its option names it, without the source's article: BBQ's options name a
    person ("The Nigerian man") where the adaptation's entity is the group ("Nigerian"), and the person is what a
    context holds and what an option's translation is. A source without an article (Persian) names its options by
    its entities already."""
    if source.article is None:
        return examples
    roles = {"stereo_entity": "stereotyped", "nonstereo_entity": "non-stereotyped"}
    phrases = {
        column: [
            source.without_article(next(row[o] for o in OPTIONS if row["answer_roles"][o] == role))
            for row in examples[[*OPTIONS, "answer_roles"]].to_dict(orient="records")
        ]
        for column, role in roles.items()
    }
    return examples.assign(**phrases)


def translate(
    examples: pd.DataFrame,
    unknown_phrases: pd.DataFrame,
    glossary: pd.DataFrame,
    prompts: TranslatePrompts,
    client: LLMClient,
    params: TranslateParams,
    pair: Pair = Pair(),
) -> StageOutput:
    """The target's config of the source's original examples, with the segment table, every attempt, the
    review table (segments that failed validation or were flagged) and what was dropped."""
    originals = examples[(examples["lang"] == pair.source.code) & (examples["variant"] == "original")]
    phrasings = {
        text
        for option in OPTIONS
        for text, roles in zip(originals[option], originals["answer_roles"], strict=True)
        if roles[option] == "unknown"
    }
    if pair.target.unknown_column not in unknown_phrases.columns:
        raise ValueError(f"the 'unknown' phrase list has no column {pair.target.unknown_column} ({pair.target.name})")
    unmapped = sorted(phrasings - set(unknown_phrases[pair.source.unknown_column]))
    if unmapped:
        raise ValueError(f"'unknown' phrasing(s) with no {pair.target.name} in the phrase list: {unmapped}")
    originals = with_option_entities(originals, pair.source)
    lookup = Glossary(glossary, pair.target, pair.source)
    table = segments(originals, lookup, pair.source_column)
    translated, attempts = translate_segments(table, prompts, client, params, lookup, pair)
    kept, dropped = translated_examples(originals, translated, unknown_phrases, params, pair)
    review = translated[translated["flagged"] | (translated["failures"] != "")].reset_index(drop=True)
    lost = translated["failures"].str.split(";").explode()
    broken = pd.concat([attempts["failures"].str.split(";").explode(), lost[lost == "group_term_lost"]])
    segment = segment_schema(pair.source, pair.target)
    report = {
        "stage": pair.stage,
        "parameters": asdict(params),
        "prompt_sha256": prompts.sha256,
        "counts": {
            "in": len(originals),
            "out": len(kept),
            "segments": len(translated),
            "failed_validation": int((translated["failures"] != "").sum()),
            "flagged": int(translated["flagged"].sum()),
            "attempts": len(attempts),
        },
        "segments_by_kind": {str(k): int(v) for k, v in sorted(translated["kind"].value_counts().items())},
        "retried_segments": int((translated["attempts"] > 1).sum()),
        "failures_by_rule": count_reasons(broken[broken != ""]),
        "dropped": {"total": len(dropped), "by_reason": count_reasons(dropped["reason"])},
        "drops": [
            {"example_id": e, "reason": r} for e, r in zip(dropped["example_id"], dropped["reason"], strict=True)
        ],
        "review": review[["segment_id", "kind", "failures", "chrf"]].to_dict(orient="records"),
        "llm": client.usage(pair.stage).as_dict(),
    }
    return StageOutput(
        tables={"examples": kept, "segments": translated, "attempts": attempts, "review": review, "dropped": dropped},
        schemas={
            "examples": EXAMPLE,
            "segments": segment,
            "attempts": attempt_schema(pair.target),
            "review": segment,
            "dropped": EXAMPLE_DROPPED,
        },
        report=report,
        csv=("review",),
    )


GLOSSARY = Input("glossary", load_glossary, needs=(TEMPLATES,))
"""``[inputs] glossary``: each group term's fixed name in every target language, checked against the templates'
groups."""


BBQ_GLOSSARY = Input("bbq_glossary", load_english_glossary)
"""``[inputs] bbq_glossary``: an English source's group terms (the adaptation path's) and each one's fixed name in
every target language."""


def load_english_unknown_phrases(path: Path) -> pd.DataFrame:
    """BBQ's English phrasings of the 'unknown' option (``phrase_en``) and the fixed rendering of each in every
    other language whose column the file has (``phrase_ur``, normalised by that language): the adaptation path's
    list. Every cell is filled and a phrasing appears once."""
    raw = read_csv_checked(path, [TARGET.unknown_column])
    others = [lang for lang in LANGUAGES.values() if lang != TARGET and lang.unknown_column in raw.columns]
    frame = raw[[TARGET.unknown_column, *(lang.unknown_column for lang in others)]]
    for lang in others:
        frame[lang.unknown_column] = frame[lang.unknown_column].map(lang.normalize)
    require_filled(frame, frame.columns, path)
    require_none(
        path,
        frame[TARGET.unknown_column].duplicated(),
        lambda i: f"phrase_en {frame.at[i, 'phrase_en']!r} appears twice",
    )
    return frame


BBQ_UNKNOWN_PHRASES = Input("bbq_unknown_phrases", load_english_unknown_phrases)
"""``[inputs] bbq_unknown_phrases``: BBQ's 'unknown' phrasings and each one's fixed rendering per target."""


def translate_stage(target: str = TARGET.code, first: bool = True, source: str = SOURCE.code) -> Stage:
    """The translate stage into one target language: the first target's is ``07_translate`` (``translate``), every
    other's ``07_translate_<code>`` (``translate_<code>``, its parameters in ``[translate_<code>]``, by default those
    of ``[translate]``). Each reads the source's original examples, its pair's prompts, the glossary's and the
    'unknown' list's column of its target."""
    pair = Pair(source, target, STAGE_NAME if first else f"{STAGE_NAME}_{target}")
    name = pair.target.name
    segment = segment_schema(pair.source, pair.target)
    return Stage(
        "07_translate" if first else f"07_translate_{target}",
        pair.stage,
        translate,
        inputs={
            "examples": Table("05_instantiate", "examples"),
            "unknown_phrases": UNKNOWN_PHRASES,
            "glossary": GLOSSARY,
            "prompts": Resource(
                partial(TranslatePrompts.load, pair.target.prompts or PROMPTS, pair.source, pair.target)
            ),
            "client": Client(),
            "pair": Resource(lambda: pair),
        },
        outputs={
            "examples": EXAMPLE,
            "segments": segment,
            "attempts": attempt_schema(pair.target),
            "review": segment,
            "dropped": EXAMPLE_DROPPED,
        },
        params=TranslateParams,
        ranges={"min_chrf": (0, 100), "max_attempts": (1, 20)},
        drops=("dropped",),
        words=(
            f"examples ({pair.source.code})",
            f"{name} examples ({target})",
            f"examples without {'an' if name[0] in 'AEIOU' else 'a'} {name} version (they stay in {pair.source.code})",
        ),
        funnel={f"examples_{target}": f"{name} examples (`{target}`)"},
        request_ids=lambda out: listed(out["segments"]["request_ids"]),
    )


STAGE = translate_stage()
