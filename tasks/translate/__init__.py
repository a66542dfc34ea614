"""Translation of generated instances, not templates (PakBBQ §3.3: placeholders break in translation), from the source
language (Persian; English on the adaptation path, whose entities are its options without BBQ's article:
:func:`~pbbq.tasks.translate.examples.with_option_entities`) into each target language of ``[translate] targets``
(English first: ``["en", "ur"]``), one stage per target (:func:`translate_stage`). The rules below are told for English;
each target's own come from its :class:`~pbbq.tasks.text.languages.Language` (Urdu: agreement instead of pronouns, no
article, a mention in its direct or oblique form) and its prompts are ``translate.<source>-<target>.txt`` and siblings.

Each distinct Persian segment is translated once, since contexts, questions and options recur across examples (a
question, into a target whose verbs agree with their subject's gender, once per gender of its pairs:
:func:`~pbbq.tasks.translate.segments.question_agreement`): entity phrases and lexical variants first (as bare phrases),
then questions and contexts, each context told the English of the entity phrases it holds, so that the English options
occur in the English context; and the groups the options are tagged with (``answer_info``), so that an English record's
tags are English. The 'unknown' phrasings are not translated: they map to a fixed English list
(``annotations/unknown_phrases.csv``).

Every translation is validated (:func:`~pbbq.tasks.translate.checks.translation_failures`): English only; each group
term of the segment's entities and lexical variant named as ``annotations/glossary.csv`` names it
(:mod:`pbbq.tasks.translate.glossary`); an entity phrase keeps the gender its Persian gives
(:mod:`pbbq.tasks.text.cues`; English compounds such as 'businessman' read by their morphology), no more and no less; a
context holds each of its entities' English and its pronouns agree with the gender of the entity they refer to (no
'they' for a man, no 'she' for him); a question genders no one it may be about. A failing translation is sent back with
the failures named (``prompts/translate.retry.fa-en.txt``), up to ``max_attempts`` answers in all; what still fails goes
to review and its examples are dropped (``failed_validation``).

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

**Split by template** (docs/architecture.md §9). A template's part (:func:`template_translations`) translates the
segments its examples use as the segment table of every template gives them (:func:`template_segments`: a question
with the entities of every template that asks it, a context with the entity phrases its request is told), so a
rebuild in which one template changed translates that template's segments again (and those of the templates
sharing a segment whose entities changed); :func:`translated_output` keeps each segment and attempt once, in the
order the stage on whole tables gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import pandas as pd

from ..core.artifacts import StageOutput, count_reasons
from ..core.inputs import TEMPLATES, UNKNOWN_PHRASES, read_csv_checked, require_filled, require_none
from ..core.schemas import EXAMPLE, EXAMPLE_DROPPED, OPTIONS
from ..core.stage import Client, Input, Resource, Separable, Stage, Table, listed, ordered
from ..llm import LLMClient
from ..review.apply import REJECTED, UNREVIEWED, resolve
from ..review.items import content_hash
from ..review.stage import ReviewRules
from ..text.languages import LANGUAGES
from .batch import translate_segments
from .examples import translated_examples, with_option_entities
from .glossary import SOURCE, TARGET, Glossary, load_english_glossary, load_glossary
from .pair import PERSIAN_ENGLISH, STAGE_NAME, Pair, TranslateParams, attempt_schema, segment_schema
from .requests import PROMPTS, TranslatePrompts
from .segments import KINDS, own_segments, per_template


def _originals(examples: pd.DataFrame, pair: Pair) -> pd.DataFrame:
    """The source language's original examples: those the stage translates."""
    return examples[(examples["lang"] == pair.source.code) & (examples["variant"] == "original")]


def _checked_originals(examples: pd.DataFrame, unknown_phrases: pd.DataFrame, pair: Pair) -> pd.DataFrame:
    """The original examples with their option entities (:func:`with_option_entities`), once every 'unknown'
    phrasing they use is known to have a rendering in the target."""
    originals = _originals(examples, pair)
    roles = originals["answer_roles"].tolist()
    phrasings = {
        text
        for option in OPTIONS
        for text, role in zip(originals[option].tolist(), roles, strict=True)
        if role[option] == "unknown"
    }
    if pair.target.unknown_column not in unknown_phrases.columns:
        raise ValueError(f"the 'unknown' phrase list has no column {pair.target.unknown_column} ({pair.target.name})")
    unmapped = sorted(phrasings - set(unknown_phrases[pair.source.unknown_column]))
    if unmapped:
        raise ValueError(f"'unknown' phrasing(s) with no {pair.target.name} in the phrase list: {unmapped}")
    return with_option_entities(originals, pair.source)


def _in_table_order(table: pd.DataFrame, pair: Pair) -> pd.DataFrame:
    """Distinct segments (by ``segment_id``) in the segment table's order: by kind, source text and agreement."""
    table = table.drop_duplicates("segment_id")
    agreements = table["agreement"].tolist() if "agreement" in table else [""] * len(table)
    keys = zip(table["kind"].map(KINDS.index).tolist(), table[pair.source_column].tolist(), agreements, strict=True)
    return ordered(table, list(keys))


@dataclass(frozen=True, eq=False)
class TranslateGiven:
    """What every hook of a translate stage split by template takes besides its tables: the stage's arguments other
    than the examples (:attr:`pbbq.tasks.core.stage.Separable.given`)."""

    unknown_phrases: pd.DataFrame
    glossary: pd.DataFrame
    prompts: TranslatePrompts
    client: LLMClient
    params: TranslateParams
    pair: Pair = PERSIAN_ENGLISH
    decisions: pd.DataFrame | None = None
    rules: ReviewRules | None = None


def template_own_segments(examples: pd.DataFrame, given: TranslateGiven) -> dict[str, pd.DataFrame]:
    """Each template's segments on its own (:func:`~.segments.own_segments`): what :func:`template_segments` reads
    of a template, made from its rows alone."""
    pair = given.pair
    originals = _checked_originals(examples, given.unknown_phrases, pair)
    lookup = Glossary(given.glossary, pair.target, pair.source)
    return {"own": own_segments(originals, lookup, pair.source_column)}


def template_segments(examples: pd.DataFrame, own: pd.DataFrame, given: TranslateGiven) -> dict[str, pd.DataFrame]:
    """What each template's translations read of every template's examples: the segments of all of them
    (:func:`~.segments.segments`: a question holds the entities of every template that asks it), a row per template
    that uses one (:func:`~.segments.per_template`), from each template's own (``own``,
    :func:`template_own_segments`)."""
    return {"segments": per_template(_originals(examples, given.pair), own, given.pair.source_column)}


def template_translations(
    examples: pd.DataFrame, segments: pd.DataFrame, given: TranslateGiven
) -> dict[str, pd.DataFrame]:
    """The work of the stage per template (``segments``: the templates' rows of :func:`template_segments`): each
    distinct segment translated once, and the templates' target examples, kept and dropped; the segments and their
    attempts a row per template that uses them."""
    client, params, unknown_phrases = given.client, given.params, given.unknown_phrases
    pair = replace(
        given.pair, placeholders=getattr(client, "stand_in", False)
    )  # no language to identify in a placeholder
    originals = _checked_originals(examples, unknown_phrases, pair)
    lookup = Glossary(given.glossary, pair.target, pair.source)
    table = _in_table_order(segments.drop(columns="template_id"), pair)
    translated, attempts = translate_segments(table, given.prompts, client, params, lookup, pair)
    translated = reviewed_segments(translated, given.decisions, given.rules, pair)
    kept, dropped = translated_examples(originals, translated, unknown_phrases, params, pair)
    used = list(zip(segments["template_id"].tolist(), segments["segment_id"].tolist(), strict=True))
    return {
        "examples": kept,
        "dropped": dropped,
        "segments": _per_template(used, translated),
        "attempts": _per_template(used, attempts),
    }


def reviewed_segments(
    translated: pd.DataFrame, decisions: pd.DataFrame | None, rules: ReviewRules | None, pair: Pair
) -> pd.DataFrame:
    """The segments with a review round's decisions on the target's translations applied, by the hash of the source
    and the translation the checks passed: a fix replaces the translation, a reject (and, under ``require``, no
    decision) fails the segment (``review_rejected``, ``review_required``: its examples are dropped so)."""
    if decisions is None:
        return translated
    source, target = pair.source_column, pair.target_column
    passed = translated["failures"] == ""
    current = {
        segment: content_hash(original, text)
        for segment, original, text in zip(
            *(translated.loc[passed, c] for c in ("segment_id", source, target)), strict=True
        )
    }
    applied = resolve(decisions, f"translations:{pair.target.code}", current)
    translated = translated.copy()
    ids = translated["segment_id"]
    fixed = ids.isin(list(applied.fixes)) & passed
    translated.loc[fixed, target] = ids[fixed].map(applied.fixes).map(pair.target.normalize)
    translated.loc[ids.isin(list(applied.rejects)) & passed, "failures"] = REJECTED
    if rules is not None and rules.require:
        translated.loc[passed & ~ids.isin(list(applied.reviewed)), "failures"] = UNREVIEWED
    return translated


def _per_template(used: list[tuple[str, str]], frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` of each ``(template_id, segment_id)`` in ``used``, in that order (a segment's rows in
    ``frame``'s), with ``template_id`` first."""
    rows: dict[str, list[int]] = {}
    for i, segment_id in enumerate(frame["segment_id"].tolist()):
        rows.setdefault(segment_id, []).append(i)
    at = [(template, i) for template, segment_id in used for i in rows.get(segment_id, ())]
    taken = frame.take([i for _, i in at]).reset_index(drop=True)
    taken.insert(0, "template_id", pd.Series([template for template, _ in at], dtype="object"))
    return taken


def translated_output(parts: Mapping[str, pd.DataFrame], examples: pd.DataFrame, given: TranslateGiven) -> StageOutput:
    """The stage's output from every template's part (:func:`template_translations`): each segment and attempt once,
    in the segment table's order (attempts as they were asked: entity phrases, variants and groups first, each
    round of retries after the one before), the examples in the source's order, the review table and the report.
    Its ``llm`` usage counts the requests of the parts this run computed."""
    pair, client, params, prompts = given.pair, given.client, given.params, given.prompts
    originals = _originals(examples, pair)
    translated = _in_table_order(parts["segments"].drop(columns="template_id"), pair)
    told = {"question", "context"}  # translated after the others (:func:`~.batch.translate_segments`)
    order = {
        sid: (kind in told, i)
        for i, (sid, kind) in enumerate(
            zip(translated["segment_id"].tolist(), translated["kind"].tolist(), strict=True)
        )
    }
    asked = parts["attempts"].drop(columns="template_id").drop_duplicates(["segment_id", "attempt"])
    attempts = ordered(
        asked,
        [
            (order[sid][0], attempt, order[sid][1])
            for sid, attempt in zip(asked["segment_id"].tolist(), asked["attempt"].tolist(), strict=True)
        ],
    )
    at = {example_id: i for i, example_id in enumerate(originals["example_id"].tolist())}
    kept, dropped = (
        ordered(parts[name], [(at[e],) for e in parts[name]["source_example_id"].tolist()])
        for name in ("examples", "dropped")
    )
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
            {"example_id": e, "reason": r}
            for e, r in zip(dropped["example_id"].tolist(), dropped["reason"].tolist(), strict=True)
        ],
        "review": review[["segment_id", "kind", "failures", "chrf"]].to_dict(orient="records"),
        "llm": client.usage(pair.stage).as_dict(),
    }
    if getattr(client, "stand_in", False):
        report["language_id"] = "not asked: the answers are stand-in placeholders, in no language"
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


def translate(
    examples: pd.DataFrame,
    unknown_phrases: pd.DataFrame,
    glossary: pd.DataFrame,
    prompts: TranslatePrompts,
    client: LLMClient,
    params: TranslateParams,
    pair: Pair = PERSIAN_ENGLISH,
    decisions: pd.DataFrame | None = None,
    rules: ReviewRules | None = None,
) -> StageOutput:
    """The target's config of the source's original examples, with the segment table, every attempt, the
    review table (segments that failed validation or were flagged) and what was dropped: every template's part
    (:func:`template_translations`) at once."""
    given = TranslateGiven(unknown_phrases, glossary, prompts, client, params, pair, decisions, rules)
    spread = template_segments(examples, **template_own_segments(examples, given), given=given)
    parts = template_translations(examples, **spread, given=given)
    return translated_output(parts, examples, given)


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
        per=Separable(
            "template_id",
            ("examples",),
            template_translations,
            translated_output,
            template_segments,
            template_own_segments,
            given=TranslateGiven,
        ),
        imports=("sacrebleu.metrics",),  # chrF of the back-translations
    )


STAGE = translate_stage()
