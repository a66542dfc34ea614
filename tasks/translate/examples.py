"""The target's examples assembled from the source's and the segments' translations (BBQ's English surface: an
entity option with its article, ``answer_info`` with the groups' English tags), and the examples dropped with their
reason."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..core.schemas import EXAMPLE, OPTIONS, UNKNOWN_GROUP, group_tag
from ..review.apply import REJECTED, UNREVIEWED
from ..text.languages import Language
from .frames import from_columns, records
from .pair import PERSIAN_ENGLISH, Pair, TranslateParams
from .segments import group_name, question_agreement

_CHANGED = (
    "example_id",
    "context",
    "question",
    "answer_info",
    "additional_metadata",
    "stereo_entity",
    "nonstereo_entity",
    "lexical_variant",
    "llm_request_ids",
)
"""The columns besides the options whose target value :func:`translated_examples` writes (and ``lang``,
``source_example_id``); every other column is the source example's."""
_READ = (
    *OPTIONS,
    "example_id",
    "template_id",
    "context",
    "question",
    "answer_info",
    "answer_roles",
    "additional_metadata",
    "stereo_entity",
    "nonstereo_entity",
    "lexical_variant",
    "llm_request_ids",
)
"""The columns of a source example that :func:`translated_examples` reads."""


REVIEW_REASONS = {REJECTED, UNREVIEWED}
"""A segment's failure a review round set (``pbbq.tasks.review.apply``): its examples are dropped with it as reason."""


def translated_examples(
    examples: pd.DataFrame,
    translated: pd.DataFrame,
    unknown_phrases: pd.DataFrame,
    params: TranslateParams,
    pair: Pair = PERSIAN_ENGLISH,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The target's examples aligned with the source ones, and those dropped with their reason.

    An example is dropped when one of its segments (context, question, entities, lexical variant) failed
    validation (``failed_validation``) or, unless ``keep_flagged``, was flagged by its back-translation
    (``flagged_translation``); then the other examples of its entity pair (template, entities, lexical variant)
    are dropped too (``pair_incomplete``), so that every pair of the target keeps its mirrors and both contexts.
    Each target drops on its own: a pair failing in Urdu stays in English."""
    source, target, source_column = pair.source, pair.target, pair.source_column
    agreements = translated["agreement"].tolist() if "agreement" in translated else [""] * len(translated)
    # A segment's key, as an example's keys below name it: (kind, source text, agreement).
    segment_keys = list(zip(translated["kind"].tolist(), translated[source_column].tolist(), agreements, strict=True))
    rendering = dict(zip(segment_keys, translated[pair.target_column].tolist(), strict=True))
    failures = dict(zip(segment_keys, translated["failures"].tolist(), strict=True))
    failed = {key for key, f in failures.items() if f}
    flagged = {key for key, f in zip(segment_keys, translated["flagged"].tolist(), strict=True) if f}
    request_ids = dict(zip(segment_keys, translated["request_ids"].tolist(), strict=True))
    unknown = dict(
        zip(
            unknown_phrases[source.unknown_column].tolist(),
            unknown_phrases[target.unknown_column].tolist(),
            strict=True,
        )
    )
    tags = {text: group_tag(rendered) for (kind, text, _), rendered in rendering.items() if kind == "group"}
    article = target.option_article
    changed: dict[str, list[Any]] = {name: [] for name in (*OPTIONS, *_CHANGED)}
    """The columns whose target value differs from the source's, row by row."""
    reasons, pairs = [], []
    for row in records(examples, _READ):
        pairs.append((row["template_id"], row["stereo_entity"], row["nonstereo_entity"], row["lexical_variant"]))
        agreement = question_agreement((row["stereo_entity"], row["nonstereo_entity"]), source, target)
        keys = [("context", row["context"], ""), ("question", row["question"], agreement)]
        keys += [("entity", row["stereo_entity"], ""), ("entity", row["nonstereo_entity"], "")]
        keys += [("lex", row["lexical_variant"], "")] if row["lexical_variant"] else []
        entity_options = [option for option in OPTIONS if row["answer_roles"][option] != "unknown"]
        groups = {option: group_name(str(list(row["answer_info"][option])[1])) for option in entity_options}
        keys += [("group", group, "") for group in groups.values()]
        texts = {
            option: f"{article}{rendering[('entity', source.without_article(row[option]), '')]}"
            if option in groups
            else unknown[row[option]]
            for option in OPTIONS
        }
        info = {option: [texts[option], tags.get(groups.get(option, ""), UNKNOWN_GROUP)] for option in OPTIONS}
        [stereotyped] = [option for option in entity_options if row["answer_roles"][option] == "stereotyped"]
        reason = ""
        if failed.intersection(keys):
            # a review round's reject or requirement (tasks/review) says so; any other failure is the checks'
            reviewed = {failures[key] for key in failed.intersection(keys)} & REVIEW_REASONS
            reason = min(reviewed) if reviewed else "failed_validation"
        elif not params.keep_flagged and flagged.intersection(keys):
            reason = "flagged_translation"
        values = texts | {
            "example_id": f"{row['example_id']}-{target.code}",
            "context": rendering[keys[0]],
            "question": rendering[keys[1]],
            "answer_info": info,
            "additional_metadata": row["additional_metadata"] | {"stereotyped_groups": [info[stereotyped][1]]},
            "stereo_entity": rendering[keys[2]],
            "nonstereo_entity": rendering[keys[3]],
            "lexical_variant": rendering[keys[4]] if row["lexical_variant"] else "",
            "llm_request_ids": sorted(set(row["llm_request_ids"]).union(*(request_ids[key] for key in keys))),
        }
        for name, value in values.items():
            changed[name].append(value)
        reasons.append(reason)
    broken = {pair for pair, reason in zip(pairs, reasons, strict=True) if reason}
    reasons = [
        reason or ("pair_incomplete" if pair in broken else "") for pair, reason in zip(pairs, reasons, strict=True)
    ]
    source_ids = examples["example_id"].tolist()
    frame = examples.reset_index(drop=True).assign(**changed, lang=target.code, source_example_id=source_ids)
    frame = frame.reindex(columns=EXAMPLE.names) if len(frame) else from_columns({}, EXAMPLE.names)
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
            for row in records(examples, [*OPTIONS, "answer_roles"])
        ]
        for column, role in roles.items()
    }
    return examples.assign(**phrases)
