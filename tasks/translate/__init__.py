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
"""

from __future__ import annotations

from dataclasses import asdict
from functools import partial
from pathlib import Path

import pandas as pd

from ..core.artifacts import StageOutput, count_reasons
from ..core.inputs import TEMPLATES, UNKNOWN_PHRASES, read_csv_checked, require_filled, require_none
from ..core.schemas import EXAMPLE, EXAMPLE_DROPPED, OPTIONS
from ..core.stage import Client, Input, Resource, Stage, Table, listed
from ..llm import LLMClient
from ..text.languages import LANGUAGES
from .batch import translate_segments
from .examples import translated_examples, with_option_entities
from .glossary import SOURCE, TARGET, Glossary, load_english_glossary, load_glossary
from .pair import PERSIAN_ENGLISH, STAGE_NAME, Pair, TranslateParams, attempt_schema, segment_schema
from .requests import PROMPTS, TranslatePrompts
from .segments import segments


def translate(
    examples: pd.DataFrame,
    unknown_phrases: pd.DataFrame,
    glossary: pd.DataFrame,
    prompts: TranslatePrompts,
    client: LLMClient,
    params: TranslateParams,
    pair: Pair = PERSIAN_ENGLISH,
) -> StageOutput:
    """The target's config of the source's original examples, with the segment table, every attempt, the
    review table (segments that failed validation or were flagged) and what was dropped."""
    originals = examples[(examples["lang"] == pair.source.code) & (examples["variant"] == "original")]
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
