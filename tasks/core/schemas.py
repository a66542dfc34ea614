"""The tables between stages (docs/architecture.md §3), declared once as pyarrow schemas.

Every stage converts what it reads and what it writes with :func:`to_arrow`, which checks the column set
and casts each column to its declared type, so a wrong column fails where it is made, not three stages later.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa

UNKNOWN_GROUP = "unknown"
"""The group tag of the 'unknown' option in ``answer_info``, as BBQ writes it."""
RECORD_VERSION = "pbbq-1"
"""``additional_metadata.version`` of every example: the record format this builder writes."""
LM_EVAL_REWRITES: tuple[tuple[str, str], ...] = (
    ("woman", "woMan"), ("man", "Man"), ("girl", "Girl"), ("boy", "Boy"), ("M-", "m-"), ("F-", "f-"),
    ("lowSES", "lowses"), ("highSES", "highses"), ("nonObese", "nonobese"), ("nonDisabled", "nondisabled"),
    ("nonTrans", "nontrans"),
)  # fmt: skip
"""What lm-eval 0.4.13's BBQ ``process_docs`` rewrites in a tag before it splits it on ``_`` (it is case-sensitive,
and lower-cases afterwards), and the spelling that escapes the rewrite: 'Germans' would be read as ['germ',
'mans'], 'GerMans' is read as ['germans'] (docs/architecture.md §3)."""


def group_tag(group: str) -> str:
    """A group as ``answer_info`` tags it: spaces (and ``_``, which lm-eval's BBQ code splits on) become ``-``,
    and a substring lm-eval's BBQ code rewrites is spelled so that it does not (:data:`LM_EVAL_REWRITES`), so the
    tag is read back as one group equal to itself lower-cased."""
    tag = re.sub(r"[\s_]+", "-", group.strip())
    for pattern, escaped in LM_EVAL_REWRITES:
        tag = tag.replace(pattern, escaped)
    return tag


_strings = pa.list_(pa.string())

STEREOTYPE = pa.schema(
    [
        ("stereotype_id", pa.string()),
        ("category", pa.string()),
        ("statement_fa", pa.string()),
        ("statement_en", pa.string()),
        ("target_group", pa.string()),
        ("non_target_groups", _strings),
        ("source", pa.string()),
        ("n_respondents", pa.int64()),
        ("n_accepting", pa.int64()),
        ("acceptance", pa.float64()),
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("kept", pa.bool_()),
        ("reason", pa.string()),
    ]
)

GATE_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("n_items", pa.int64()),
    ("n_annotators", pa.int64()),
    ("kappa", pa.float64()),
    ("kappa_note", pa.string()),
    ("mean_relevance", pa.float64()),
    ("kept", pa.bool_()),
    ("reason", pa.string()),
)
"""What the annotation gate adds to a template it rated (PakBBQ §3.2): items and annotators, Fleiss' kappa, mean
relevance, and its decision with the reason."""
TEMPLATE = pa.schema(
    [
        ("template_id", pa.string()),
        ("stereotype_id", pa.string()),
        ("category", pa.string()),
        ("ambiguous_fa", pa.string()),
        ("disambiguated_fa", pa.string()),
        ("disambiguated_counter_biased_fa", pa.string()),
        ("mirror_exception", pa.string()),
        ("question_negative_fa", pa.string()),
        ("question_nonnegative_fa", pa.string()),
        ("stereo_entities", _strings),
        ("nonstereo_entities", _strings),
        ("lexical_variants", _strings),
        ("allowed_pairs", _strings),
        *GATE_FIELDS,
    ]
)

TEMPLATE_DISAMBIGUATED = pa.schema(
    [
        *TEMPLATE,
        ("disambiguated_source", pa.string()),
        ("counter_biased_source", pa.string()),
        ("mirror_diff", pa.string()),
        ("llm_request_ids", pa.list_(pa.string())),
    ]
)
"""A gated template after disambiguation. ``disambiguated_fa`` is the continuation of the biased assignment
(``{stereo}`` answers the negative question), ``disambiguated_counter_biased_fa`` that of the counter-biased one:
the same text with the two placeholders exchanged (BBQ's control), or, for a template that declares a
``mirror_exception``, its own text, with the token-level difference in ``mirror_diff``. Sources: human,
override, llm, mirror, review (failed validation: left out of the dataset)."""

OPTIONS = ("ans0", "ans1", "ans2")
ANSWER_INFO = pa.struct([(option, _strings) for option in OPTIONS])
"""BBQ's ``answer_info``: per option ``[text, group_tag]``; the 'unknown' option's tag is ``unknown``."""
ANSWER_ROLES = pa.struct([(option, pa.string()) for option in OPTIONS])
"""The role of each option: ``stereotyped``, ``non-stereotyped`` or ``unknown``."""
ADDITIONAL_METADATA = pa.struct(
    [
        ("subcategory", pa.string()),
        ("stereotyped_groups", _strings),
        ("version", pa.string()),
        ("source", pa.string()),
    ]
)
"""BBQ's ``additional_metadata``: ``stereotyped_groups`` holds the stereotyped entity's group tag, ``source``
the stereotype id and where the stereotype came from (``AGE-01 (expert)``)."""

EXAMPLE = pa.schema(
    [
        ("example_id", pa.string()),
        ("template_id", pa.string()),
        ("stereotype_id", pa.string()),
        ("category", pa.string()),
        ("question_index", pa.string()),
        ("question_polarity", pa.string()),
        ("context_condition", pa.string()),
        ("context", pa.string()),
        ("question", pa.string()),
        ("ans0", pa.string()),
        ("ans1", pa.string()),
        ("ans2", pa.string()),
        ("label", pa.int64()),
        ("answer_info", ANSWER_INFO),
        ("additional_metadata", ADDITIONAL_METADATA),
        ("answer_roles", ANSWER_ROLES),
        ("target_loc", pa.int64()),
        ("assignment", pa.string()),
        ("entity_order", pa.string()),
        ("stereo_entity", pa.string()),
        ("nonstereo_entity", pa.string()),
        ("lexical_variant", pa.string()),
        ("lang", pa.string()),
        ("variant", pa.string()),
        ("source_example_id", pa.string()),
        ("llm_request_ids", _strings),
    ]
)
"""BBQ-compatible example (docs/architecture.md, the example table): BBQ's own fields, so lm-evaluation-harness's
BBQ task reads it as it is (``answer_info`` as ``[text, group_tag]`` pairs, ``additional_metadata``), and the
project's: ``answer_roles``, stored when the example is made and never recovered by matching strings (nyu-mll/BBQ
issue 17); ``target_loc``, the option of the stereotyped entity; ``label``, the correct option."""

EXAMPLE_DROPPED = EXAMPLE.append(pa.field("reason", pa.string()))
"""An example a stage did not keep, with its reason: the drop table of every stage that drops examples."""


NAMES_SUFFIX = "-names"
"""A name-proxy config is its source config's name and this (``fa-names``, ``en-names``): how the evaluation pairs
the two for ε_c (:func:`pbbq.tasks.evaluation.metrics.names_pairs`) in a release that carries no declaration."""


def config_name(lang: str, variant: str) -> str:
    """The published config an example belongs to: ``fa``, ``fa-names``, ``en`` (``en-names`` if ever made)."""
    return lang if variant == "original" else f"{lang}{NAMES_SUFFIX}"


def example_configs(examples: pd.DataFrame) -> pd.Series:
    """:func:`config_name` of every example, named once per distinct (lang, variant)."""
    keys = pd.MultiIndex.from_arrays([examples["lang"], examples["variant"]])
    codes, distinct = keys.factorize(use_na_sentinel=False)
    names = np.array([config_name(lang, variant) for lang, variant in distinct], dtype=object)
    return pd.Series(names[codes], index=examples.index, dtype="object")


def empty_frame(schema: pa.Schema) -> pd.DataFrame:
    """A table of ``schema`` with no rows: what a stage writes when nothing reached it."""
    return schema.empty_table().to_pandas()


class SchemaError(ValueError):
    """A table does not have the columns or types its schema declares."""


def to_arrow(frame: pd.DataFrame, schema: pa.Schema, table: str) -> pa.Table:
    """Convert ``frame`` to an Arrow table of exactly ``schema`` (column order included).

    A missing or an unexpected column is an error naming ``table``; so is a value of the wrong type. An empty
    frame is the schema's empty table: its columns hold no value to convert, and the dtype pandas gave them (``str``
    for a column mapped from nothing) need not cast to the declared type (a list, a struct).
    """
    missing = [name for name in schema.names if name not in frame.columns]
    extra = [name for name in frame.columns if name not in schema.names]
    if missing or extra:
        raise SchemaError(f"table {table!r}: missing columns {missing}, unexpected columns {extra}")
    if frame.empty:
        return schema.empty_table()
    try:
        return pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"table {table!r}: {exc}") from exc
