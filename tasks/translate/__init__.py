"""Translation fa → en of generated instances, not templates (PakBBQ §3.3: placeholders break in translation).

Each distinct Persian segment is translated once, since contexts, questions and options recur across
examples: entity phrases and lexical variants first (as bare phrases), then questions and contexts, each
context told the English of the entity phrases it holds, so that the English options occur in the English
context; and the groups the options are tagged with (``answer_info``), so that an English record's tags are
English. The 'unknown' phrasings are not translated: they map to a fixed English list
(``annotations/unknown_phrases.csv``).

Every translation is validated (:func:`translation_failures`): English only; each group term of the
segment's entities and lexical variant named as ``annotations/glossary.csv`` names it
(:mod:`pbbq.tasks.translate.glossary`); an entity phrase keeps the gender its Persian gives
(:mod:`pbbq.tasks.text.cues`; English compounds such as 'businessman' read by their morphology), no more and no
less; a context holds each of its entities' English and its pronouns agree
with the gender of the entity they refer to (no 'they' for a man, no 'she' for him); a question genders no one it may be
about. A failing translation is sent back with the failures named (``prompts/translate.retry.en.txt``), up to
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
from pathlib import Path
from string import Template
from typing import Any, NamedTuple

import pandas as pd
import pyarrow as pa

from ..core.artifacts import REPO_ROOT, StageOutput, count_reasons, sha256_bytes
from ..core.inputs import TEMPLATES, UNKNOWN_PHRASES
from ..core.prompts import PromptBundle, retry_request
from ..core.schemas import EXAMPLE, EXAMPLE_DROPPED, OPTIONS, UNKNOWN_GROUP, group_tag
from ..core.stage import Client, Input, Resource, Stage, Table, listed
from ..llm import LLMClient, LLMRequest, LLMResponse
from ..text.languages import NONE
from ..text.languages.fa import normalize_fa
from .chrf import chrf_scores
from .glossary import SOURCE, TARGET, Glossary, load_glossary, rendered

STAGE_NAME = "translate"
PROMPTS = REPO_ROOT / "prompts"
PROMPT_FILES = (
    "translate.fa-en.txt",
    "translate.input.fa-en.txt",
    "translate.retry.en.txt",
    "back_translate.en-fa.txt",
    "back_translate.input.en-fa.txt",
)
"""In :class:`TranslatePrompts`' order: instructions, data, retry; back-translation instructions and data."""
KIND_NAMES = {"entity": "phrase", "lex": "phrase", "group": "phrase", "question": "question", "context": "text"}
KIND_INSTRUCTIONS = {
    "entity": "It is a noun phrase naming a person or a group: translate it as a bare noun phrase, without an article.",
    "lex": "It is a word or short phrase that fills a slot in a sentence (a place, an occasion, a trade, a time): "
    "translate it as a short phrase that could fill the same slot in an English sentence.",
    "group": "It names a group of people: translate it as a short plural noun phrase that names the group, "
    "without an article.",
    "question": "It is a question about one of two people: keep it a question.",
    "context": "It is a short story about two people: render each Persian phrase listed in <phrases> exactly as the "
    "English given there.",
}
FAILURES: dict[str, str] = {
    "empty": "The answer is empty.",
    "not_english": "The answer has Persian letters: translate all of it into English.",
    "glossary": 'It does not name {fa} "{en}", as the glossary does.',
    "entity_missing": 'It does not hold the phrase "{en}" exactly as given.',
    "entity_gender": "{detail}",
    "pronoun_gender": "{detail}",  # the target language's gender rules (Language.gender_failures): English's
    "singular_they": "{detail}",
    "group_term_lost": "The back-translation does not name {fa} ({en}).",
}
"""Every rule a translation can break, with the English sentence that names it in the follow-up message (a lost
group term is found in the back-translation, after the last attempt: it names nothing to the model)."""
GENDER_WORDS = {"male": "male", "female": "female", NONE: "of a gender the Persian does not give"}

SEGMENT = pa.schema(
    [
        ("segment_id", pa.string()),
        ("kind", pa.string()),
        ("text_fa", pa.string()),
        ("glossary", pa.list_(pa.string())),
        ("text_en", pa.string()),
        ("attempts", pa.int64()),
        ("failures", pa.string()),
        ("back_fa", pa.string()),
        ("chrf", pa.float64()),
        ("flagged", pa.bool_()),
        ("request_ids", pa.list_(pa.string())),
    ]
)
"""A translated segment: its glossary entries (``term_fa → term_en``), the English of its last attempt, the rules
that attempt broke (``;``-separated, empty when it passed), the back-translation and its chrF, whether the chrF
is under ``min_chrf``, and every request behind it."""
ATTEMPT = pa.schema(
    [
        ("segment_id", pa.string()),
        ("kind", pa.string()),
        ("attempt", pa.int64()),
        ("text_en", pa.string()),
        ("failures", pa.string()),
        ("messages", pa.string()),
        ("request_id", pa.string()),
    ]
)
"""Every translation answer, with the rules it broke and the sentences that named them in the retry."""
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
    def load(cls, folder: Path = PROMPTS) -> TranslatePrompts:
        return cls.read(tuple(folder / name for name in PROMPT_FILES))


class Failure(NamedTuple):
    """A broken rule: its code (a key of :data:`FAILURES`) and the sentence that names it to the model."""

    code: str
    message: str


def _failure(code: str, **details: str) -> Failure:
    return Failure(code, FAILURES[code].format(**details))


def _segment_id(kind: str, text: str) -> str:
    return f"{kind}-{sha256_bytes(text.encode('utf-8'))[:12]}"


def segments(examples: pd.DataFrame, glossary: Glossary) -> pd.DataFrame:
    """The distinct Persian segments of the examples with what validates them: ``entities`` (a context's two; a
    question's every entity it is asked about; an entity phrase itself), ``lexicals`` (a context's lexical
    variant; a variant itself) and ``glossary``, the ``(term_fa, term_en)`` entries of its entities and lexical
    variant (a question names no entity, so it has none)."""
    rows: list[dict[str, Any]] = []
    entities = sorted(set(examples["stereo_entity"]) | set(examples["nonstereo_entity"]))
    rows += [{"kind": "entity", "text_fa": e, "entities": (e,), "lexicals": ()} for e in entities]
    variants = sorted(set(examples["lexical_variant"]) - {""})
    rows += [{"kind": "lex", "text_fa": v, "entities": (), "lexicals": (v,)} for v in variants]
    rows += [{"kind": "group", "text_fa": g, "entities": (), "lexicals": (g,)} for g in sorted(_groups(examples))]
    for question, group in examples.groupby("question", sort=True):
        asked = sorted(set(group["stereo_entity"]) | set(group["nonstereo_entity"]))
        rows.append({"kind": "question", "text_fa": question, "entities": tuple(asked), "lexicals": ()})
    contexts = examples.groupby("context", sort=True).agg(
        stereo=("stereo_entity", "first"), nonstereo=("nonstereo_entity", "first"), lex=("lexical_variant", "first")
    )
    for context, row in contexts.iterrows():
        lexicals = (row.lex,) if row.lex else ()
        rows.append(
            {"kind": "context", "text_fa": context, "entities": (row.stereo, row.nonstereo), "lexicals": lexicals}
        )
    frame = pd.DataFrame(rows, columns=["kind", "text_fa", "entities", "lexicals"])
    frame.insert(0, "segment_id", [_segment_id(k, t) for k, t in zip(frame["kind"], frame["text_fa"], strict=True)])
    frame["glossary"] = [
        () if kind == "question" else _entries(glossary, (*ents, *lexs))
        for kind, ents, lexs in zip(frame["kind"], frame["entities"], frame["lexicals"], strict=True)
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


def entity_gender_failures(persian: str, english: str) -> list[Failure]:
    """An English entity phrase must give the gender its Persian gives, and none it does not
    ('جوان' is a young person, not a young man): both by :func:`pbbq.tasks.text.cues.entity_gender`."""
    fa, en = SOURCE.entity_gender(persian), TARGET.entity_gender(english)
    if fa == en:
        return []
    detail = (
        f'The {SOURCE.name} phrase names someone {GENDER_WORDS[fa]}, but "{english}" names someone {GENDER_WORDS[en]}: '
        f"keep the Persian's gender."
    )
    return [_failure("entity_gender", detail=detail)]


def translation_failures(
    kind: str,
    persian: str,
    english: str,
    entities_en: Mapping[str, str],
    glossary: Iterable[tuple[str, str]],
) -> list[Failure]:
    """The rules one translation breaks (empty: it is accepted); see the module docstring. ``entities_en``
    maps the segment's Persian entities to their English, ``glossary`` holds its ``(term_fa, term_en)``."""
    if not english.strip():
        return [_failure("empty")]
    failures = []
    if SOURCE.script.search(english):
        failures.append(_failure("not_english"))
    failures += [_failure("glossary", fa=fa, en=en) for fa, en in glossary if not rendered(english, en)]
    if kind == "entity":
        failures += entity_gender_failures(persian, english)
    if kind == "context":
        failures += [
            _failure("entity_missing", en=en) for en in entities_en.values() if not TARGET.mention(en).search(english)
        ]
    if kind in ("context", "question"):
        failures += [Failure(*found) for found in TARGET.gender_failures(english, list(entities_en.values()), kind)]
    return failures


def lost_group_terms(entries: Iterable[tuple[str, str]], back: str, glossary: Glossary) -> list[Failure]:
    """The glossary entries of a segment whose group its back-translation does not name: by the term itself or by
    another term of the same English name ('آذری' for 'ترک'), whatever the chrF."""
    named = {english for _, english in glossary.terms_in(_PUNCTUATION.sub(" ", back))}
    return [_failure("group_term_lost", fa=fa, en=en) for fa, en in entries if en not in named]


def delimited(text: str) -> str:
    """Text as it goes inside a prompt's tag: angle brackets become look-alikes, so it cannot close its block or
    open another."""
    return text.replace("<", "‹").replace(">", "›")


def _lines(entries: Iterable[tuple[str, str]], empty: str) -> str:
    lines = [f"{delimited(fa)} → {delimited(en)}" for fa, en in entries]
    return "\n".join(lines) if lines else empty


def forward_request(
    segment: Mapping[str, Any], entities_en: Mapping[str, str], prompts: TranslatePrompts
) -> LLMRequest:
    """The translation request of one segment: the instructions for its kind (system message), and in the user
    message its glossary entries, the English of a context's entity phrases and its text, each in its tag."""
    kind = segment["kind"]
    data = Template(prompts.data).substitute(
        glossary=_lines(segment["glossary"], "(no group names in this text)"),
        phrases=_lines(entities_en.items(), "(none)"),
        text=delimited(segment["text_fa"]),
    )
    return LLMRequest(
        messages=(("user", data),),
        system=Template(prompts.forward).substitute(kind=KIND_NAMES[kind], instructions=KIND_INSTRUCTIONS[kind]),
        prompt_hash=prompts.sha256,
        stage=STAGE_NAME,
        context=segment["segment_id"],
    )


def back_request(segment_id: str, english: str, prompts: TranslatePrompts) -> LLMRequest:
    """The back-translation request of one segment's English."""
    return LLMRequest(
        messages=(("user", Template(prompts.back_data).substitute(text=delimited(english))),),
        system=prompts.back,
        prompt_hash=prompts.sha256,
        stage=STAGE_NAME,
        context=f"back {segment_id}",
    )


def follow_up(
    request: LLMRequest, answer: str, failures: list[Failure], kind: str, prompts: TranslatePrompts
) -> LLMRequest:
    """The conversation so far, the answer, and a message that names every rule it broke."""
    named = " ".join(failure.message for failure in failures)
    return retry_request(request, answer, Template(prompts.retry).substitute(failure=named, kind=KIND_NAMES[kind]))


def _clean(text: str, kind: str) -> str:
    text = " ".join(text.split())
    return TARGET.without_article(text) if kind in ("entity", "group") else text


def _translate_batch(
    batch: pd.DataFrame,
    english: dict[str, str],
    prompts: TranslatePrompts,
    client: LLMClient,
    params: TranslateParams,
    log: list[dict[str, Any]],
) -> dict[str, tuple[str, list[Failure], list[str]]]:
    """Translate, validate and retry one batch of segments; per segment id its last English, the rules that
    answer broke and every request id."""
    rows = {row["segment_id"]: row for row in batch.to_dict(orient="records")}
    entities_en = {
        sid: {e: english[e] for e in row["entities"]} if row["kind"] in ("question", "context") else {}
        for sid, row in rows.items()
    }
    pending = {
        sid: forward_request(row, entities_en[sid] if row["kind"] == "context" else {}, prompts)
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
            text = _clean(answer.text, row["kind"])
            failures = translation_failures(row["kind"], row["text_fa"], text, entities_en[sid], row["glossary"])
            ids = [*results.get(sid, ("", [], []))[2], answer.request_id]
            results[sid] = (text, failures, ids)
            log.append(
                {
                    "segment_id": sid,
                    "kind": row["kind"],
                    "attempt": attempt,
                    "text_en": text,
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
    table: pd.DataFrame, prompts: TranslatePrompts, client: LLMClient, params: TranslateParams, glossary: Glossary
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every segment's English (validated, retried), its back-translation, chrF and lost group terms
    (:func:`lost_group_terms`); and every attempt.

    Entity phrases, lexical variants and groups go first: a context's request holds its entities' English."""
    english: dict[str, str] = {}
    results: dict[str, tuple[str, list[Failure], list[str]]] = {}
    log: list[dict[str, Any]] = []
    for kinds in (("entity", "lex", "group"), ("question", "context")):
        batch = table[table["kind"].isin(kinds)]
        done = _translate_batch(batch, english, prompts, client, params, log)
        results.update(done)
        english.update({fa: done[sid][0] for sid, fa in zip(batch["segment_id"], batch["text_fa"], strict=True)})
    back_requests = [back_request(sid, results[sid][0], prompts) for sid in table["segment_id"]]
    answers = client.complete_many(back_requests)
    backs = [normalize_fa(answer.text) for answer in answers]
    scores = chrf_scores(backs, table["text_fa"].tolist())
    rows = []
    for row, answer, back, score in zip(table.itertuples(), answers, backs, scores, strict=True):
        text, failures, ids = results[row.segment_id]
        failures = [*failures, *lost_group_terms(row.glossary, back, glossary)]
        rows.append(
            {
                "segment_id": row.segment_id,
                "kind": row.kind,
                "text_fa": row.text_fa,
                "glossary": [f"{fa} → {en}" for fa, en in row.glossary],
                "text_en": text,
                "attempts": len(ids),
                "failures": ";".join(dict.fromkeys(f.code for f in failures)),
                "back_fa": back,
                "chrf": score,
                "flagged": score < params.min_chrf,
                "request_ids": [*ids, answer.request_id],
            }
        )
    return pd.DataFrame(rows, columns=SEGMENT.names), pd.DataFrame(log, columns=ATTEMPT.names)


def english_examples(
    examples: pd.DataFrame, translated: pd.DataFrame, unknown_phrases: pd.DataFrame, params: TranslateParams
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """English examples aligned with the Persian ones, and those dropped with their reason.

    An example is dropped when one of its segments (context, question, entities, lexical variant) failed
    validation (``failed_validation``) or, unless ``keep_flagged``, was flagged by its back-translation
    (``flagged_translation``); then the other examples of its entity pair (template, entities, lexical variant)
    are dropped too (``pair_incomplete``), so that every English pair keeps its mirrors and both contexts."""
    by_kind = {kind: group for kind, group in translated.groupby("kind")}
    english = {
        (kind, fa): en
        for kind, group in by_kind.items()
        for fa, en in zip(group["text_fa"], group["text_en"], strict=True)
    }
    failed = {
        (k, fa) for k, fa, f in zip(translated["kind"], translated["text_fa"], translated["failures"], strict=True) if f
    }
    flagged = set(
        zip(
            translated.loc[translated["flagged"], "kind"], translated.loc[translated["flagged"], "text_fa"], strict=True
        )
    )
    request_ids = {
        (k, fa): list(ids)
        for k, fa, ids in zip(translated["kind"], translated["text_fa"], translated["request_ids"], strict=True)
    }
    unknown = dict(zip(unknown_phrases[SOURCE.unknown_column], unknown_phrases[TARGET.unknown_column], strict=True))
    tags = {fa: group_tag(en) for (kind, fa), en in english.items() if kind == "group"}
    rows, reasons, pairs = [], [], []
    for row in examples.to_dict(orient="records"):
        pairs.append((row["template_id"], row["stereo_entity"], row["nonstereo_entity"], row["lexical_variant"]))
        keys = [("context", row["context"]), ("question", row["question"])]
        keys += [("entity", row["stereo_entity"]), ("entity", row["nonstereo_entity"])]
        keys += [("lex", row["lexical_variant"])] if row["lexical_variant"] else []
        entity_options = [option for option in OPTIONS if row["answer_roles"][option] != "unknown"]
        groups = {option: group_name(str(list(row["answer_info"][option])[1])) for option in entity_options}
        keys += [("group", group) for group in groups.values()]
        texts = {
            option: f"The {english[('entity', row[option])]}" if option in groups else unknown[row[option]]
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
                "example_id": f"{row['example_id']}-en",
                "context": english[keys[0]],
                "question": english[keys[1]],
                "answer_info": info,
                "additional_metadata": row["additional_metadata"] | {"stereotyped_groups": [info[stereotyped][1]]},
                "stereo_entity": english[keys[2]],
                "nonstereo_entity": english[keys[3]],
                "lexical_variant": english[keys[4]] if row["lexical_variant"] else "",
                "lang": "en",
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


def translate(
    examples: pd.DataFrame,
    unknown_phrases: pd.DataFrame,
    glossary: pd.DataFrame,
    prompts: TranslatePrompts,
    client: LLMClient,
    params: TranslateParams,
) -> StageOutput:
    """The English config of the Persian original examples, with the segment table, every attempt, the
    review table (segments that failed validation or were flagged) and what was dropped."""
    originals = examples[(examples["lang"] == SOURCE.code) & (examples["variant"] == "original")]
    phrasings = {
        text
        for option in OPTIONS
        for text, roles in zip(originals[option], originals["answer_roles"], strict=True)
        if roles[option] == "unknown"
    }
    unmapped = sorted(phrasings - set(unknown_phrases[SOURCE.unknown_column]))
    if unmapped:
        raise ValueError(f"'unknown' phrasing(s) with no English in the phrase list: {unmapped}")
    lookup = Glossary(glossary)
    table = segments(originals, lookup)
    translated, attempts = translate_segments(table, prompts, client, params, lookup)
    kept, dropped = english_examples(originals, translated, unknown_phrases, params)
    review = translated[translated["flagged"] | (translated["failures"] != "")].reset_index(drop=True)
    lost = translated["failures"].str.split(";").explode()
    broken = pd.concat([attempts["failures"].str.split(";").explode(), lost[lost == "group_term_lost"]])
    report = {
        "stage": STAGE_NAME,
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
        "llm": client.usage(STAGE_NAME).as_dict(),
    }
    return StageOutput(
        tables={"examples": kept, "segments": translated, "attempts": attempts, "review": review, "dropped": dropped},
        schemas={
            "examples": EXAMPLE,
            "segments": SEGMENT,
            "attempts": ATTEMPT,
            "review": SEGMENT,
            "dropped": EXAMPLE_DROPPED,
        },
        report=report,
        csv=("review",),
    )


GLOSSARY = Input("glossary", load_glossary, needs=(TEMPLATES,))
"""``[inputs] glossary``: the fixed English of each group term, checked against the templates' groups."""

STAGE = Stage(
    "07_translate",
    "translate",
    translate,
    inputs={
        "examples": Table("05_instantiate", "examples"),
        "unknown_phrases": UNKNOWN_PHRASES,
        "glossary": GLOSSARY,
        "prompts": Resource(TranslatePrompts.load),
        "client": Client(),
    },
    outputs={
        "examples": EXAMPLE,
        "segments": SEGMENT,
        "attempts": ATTEMPT,
        "review": SEGMENT,
        "dropped": EXAMPLE_DROPPED,
    },
    params=TranslateParams,
    ranges={"min_chrf": (0, 100), "max_attempts": (1, 20)},
    drops=("dropped",),
    words=("examples (fa)", "English examples (en)", "examples without an English version (they stay in fa)"),
    funnel={"examples_en": "English examples (`en`)"},
    request_ids=lambda out: listed(out["segments"]["request_ids"]),
)
