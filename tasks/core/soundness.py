"""Soundness checks of a built dataset, per config (docs/architecture.md §4): the rules a BBQ example must obey,
checked on every row of every config in the build, not only in tests.

- ``duplicate_example``: two rows of one config with the same (context, question, ans0, ans1, ans2);
- ``unfilled_placeholder``: a ``{…}`` or ``[[…]]`` left in a text field (:data:`UNFILLED`);
- ``label_role``: the correct option's role is not the one its cell demands (PBBQ §3.3: 'unknown' in an
  ambiguous context; in a biased context the stereotyped entity answers the negative question, in a
  counter-biased one the other entity does; the non-negative question is answered by the other one);
- ``target_loc``: the option at ``target_loc`` is not the stereotyped one;
- ``answer_info_text``: BBQ's ``answer_info`` names a text other than the option's;
- ``gender_confound``, ``age_confound``, ``number_confound``, ``role_confound``, ``status_confound``: a pair whose
  entities differ in gender, age band or maturity, number, role or status outside the category that is about it
  (:func:`pbbq.tasks.text.cues.pair_confound`, the instantiate stage's own gate), that no template's ``allowed_pairs``
  keeps (original Persian rows).
- ``gender_added``: an English row whose entity's English gives a gender its Persian does not give, or another
  ('an Indian businessman' for «بازرگان هندی»; English compounds read by their morphology,
  :mod:`pbbq.tasks.text.cues`).

**The release gate.** Three checks block a release (:data:`RELEASE_BLOCKERS`, :func:`unsound_rows`): a placeholder
left unfilled, a pair whose two entities are one, two options with one text. The stages that make examples
(both instantiate stages) drop such rows with the check as their reason and say so in the run's manifest
(:func:`unsound_drops`); the statistics stage, before anything is published, fails the build when any config
still holds one (a names variant or a translation that made it): :func:`refuse_unsound`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..text.cues import CONFOUNDS, pair_confound
from ..text.languages import language
from .inputs import PAIR_SEPARATOR
from .schemas import EXAMPLE, OPTIONS, example_configs

DUPLICATE_KEY = ["context", "question", *OPTIONS]
CELL_COLUMNS = ["context_condition", "assignment", "question_polarity"]
CELL_ROLE: dict[tuple[str, str, str], str] = {
    ("ambig", "none", "neg"): "unknown",
    ("ambig", "none", "nonneg"): "unknown",
    ("disambig", "biased", "neg"): "stereotyped",
    ("disambig", "biased", "nonneg"): "non-stereotyped",
    ("disambig", "counter_biased", "neg"): "non-stereotyped",
    ("disambig", "counter_biased", "nonneg"): "stereotyped",
}
"""The role of the correct answer in each cell (:data:`CELL_COLUMNS`)."""
CHECKS = (
    "duplicate_example",
    "unfilled_placeholder",
    "label_role",
    "target_loc",
    "answer_info_text",
    *CONFOUNDS,
    "gender_added",
)
UNFILLED = re.compile(r"\{[^{}]*\}|\[\[[^\[\]]*\]\]")
"""A placeholder left in a text: ``{…}`` (PBBQ's slots, BBQ's double-braced ones, a typo's) or ``[[…]]``."""
RELEASE_BLOCKERS = ("unfilled_placeholder", "equal_entities", "identical_options")
"""The checks no released row may fail (:func:`unsound_rows`), the cause first (one entity twice gives two options
alike)."""
SOURCE_COLUMNS = {"stereo_entity": "stereo_source", "nonstereo_entity": "nonstereo_source"}
"""An original example's entities as :func:`source_entities` names them beside a translated row's own."""
PBBQ_SOURCE = "fa"
"""The language PBBQ's examples are written in: the checks' source where no pipeline declares another (the
adaptation path's is BBQ's English, :attr:`~pbbq.tasks.core.stage.ReleaseConfig.made_from`)."""
SOUNDNESS = pa.schema(
    [("config", pa.string()), ("check", pa.string()), ("examples", pa.int64()), ("violations", pa.int64())]
)


def _per_distinct(frame: pd.DataFrame, columns: list[str], rows: pd.Series, decide: Callable[..., object]) -> pd.Series:
    """``decide(*values)`` of the ``columns`` of every row where ``rows`` holds, called once per distinct values (an
    entity pair recurs in every example of its template); None for the other rows."""
    chosen = frame.loc[rows, columns]
    distinct = chosen.drop_duplicates()
    decided = np.array([decide(*values) for values in distinct.itertuples(index=False)], dtype=object)
    every = np.full(len(frame), None, dtype=object)
    every[rows.to_numpy()] = decided[pd.MultiIndex.from_frame(distinct).get_indexer(pd.MultiIndex.from_frame(chosen))]
    return pd.Series(every, index=frame.index)


def _gender_added(
    source_lang: str, lang: str, stereo: str, nonstereo: str, stereo_source: str, nonstereo_source: str
) -> bool:
    """Whether a translated pair's entities give a gender their sources (in ``source_lang``) do not give, or
    another."""
    source = language(source_lang)
    return any(
        not language(lang).keeps_gender(entity, source.entity_gender(original))
        for entity, original in ((stereo, stereo_source), (nonstereo, nonstereo_source))
    )


def _per_option(column: pd.Series, schema_field: str) -> pa.StructArray:
    """A column of per-option dicts (``answer_roles``, ``answer_info``) as one Arrow struct array of the example
    table's type: the dicts read once, in C, and each option's values a field."""
    return pa.array(column.tolist(), type=EXAMPLE.field(schema_field).type)


def _differs(values: pa.Array, expected: pa.Array | str) -> np.ndarray:
    """Where ``values`` is not ``expected`` (a missing value on either side differs)."""
    return pc.fill_null(pc.not_equal(values, expected), True).to_numpy(zero_copy_only=False)


def _cell_roles(frame: pd.DataFrame) -> pa.Array:
    """The role each row's correct answer must have (:data:`CELL_ROLE`; missing for a cell not in it)."""
    cells = pd.MultiIndex.from_frame(frame[CELL_COLUMNS])
    roles = np.array([*CELL_ROLE.values(), None], dtype=object)  # the last: where get_indexer finds no cell (-1)
    return pa.array(roles[pd.MultiIndex.from_tuples(CELL_ROLE).get_indexer(cells)], pa.string())


def row_violations(
    frame: pd.DataFrame,
    allowed: set[tuple[str, str, str]],
    sources: pd.DataFrame | None = None,
    source: str = PBBQ_SOURCE,
) -> dict[str, pd.Series]:
    """A boolean Series per check over the rows of one config; ``sources`` holds the (stereotyped,
    non-stereotyped) entities of each original example in the ``source`` language, by id
    (:func:`source_entities`), which a translated row is checked against. The per-option checks read the option
    dicts as Arrow structs and the texts as they are (no Python string per value)."""
    roles = _per_option(frame["answer_roles"], "answer_roles")
    role = [roles.field(option) for option in OPTIONS]
    info = _per_option(frame["answer_info"], "answer_info")
    info_text = np.logical_or.reduce(
        [_differs(pc.list_element(info.field(option), 0), pa.array(frame[option], pa.string())) for option in OPTIONS]
    )
    original = (frame["lang"] == source) & (frame["variant"] == "original")
    pair = ["template_id", "stereo_entity", "nonstereo_entity"]
    kept = pd.Series(pd.MultiIndex.from_frame(frame[pair]).isin(list(allowed)), index=frame.index)
    confound = _per_distinct(
        entity_phrases(frame).assign(category=frame["category"]),
        ["stereo_entity", "nonstereo_entity", "category"],
        original,
        lambda stereo, nonstereo, category: pair_confound(stereo, nonstereo, category, source),
    )
    originals = source_entities(frame.iloc[:0], source) if sources is None else sources
    originals = originals.reindex(frame["source_example_id"])
    sourced = frame.assign(**{column: originals[column].to_numpy() for column in originals.columns})
    added = _per_distinct(
        sourced,
        ["lang", "stereo_entity", "nonstereo_entity", *SOURCE_COLUMNS.values()],
        (frame["lang"] != source) & sourced["stereo_source"].notna(),
        partial(_gender_added, source),
    )
    labels, targets = (pa.array(frame[column], pa.int64()) for column in ("label", "target_loc"))
    return {
        "duplicate_example": frame.duplicated(DUPLICATE_KEY, keep="first"),
        "unfilled_placeholder": unfilled(frame),
        "label_role": pd.Series(_differs(pc.choose(labels, *role), _cell_roles(frame)), index=frame.index),
        "target_loc": pd.Series(_differs(pc.choose(targets, *role), "stereotyped"), index=frame.index),
        "answer_info_text": pd.Series(info_text, index=frame.index),
        **{reason: original & (confound == reason) & ~kept for reason in CONFOUNDS},
        "gender_added": added.fillna(False).astype(bool),
    }


def unfilled(examples: pd.DataFrame) -> pd.Series:
    """Whether each example holds a placeholder (:data:`UNFILLED`) in its context, question or options."""
    texts = examples[["context", "question", *OPTIONS]].astype(str)
    return texts.apply(lambda column: column.str.contains(UNFILLED)).any(axis=1)


def unsound_rows(examples: pd.DataFrame) -> dict[str, pd.Series]:
    """Per check of :data:`RELEASE_BLOCKERS`, whether each example fails it: a placeholder left unfilled, two of
    its stereotyped and other entity the same, two of its options the same text (case and surrounding space
    aside)."""
    options = [examples[option].astype(str).str.strip().str.casefold() for option in OPTIONS]
    identical = (options[0] == options[1]) | (options[0] == options[2]) | (options[1] == options[2])
    stereo, other = (examples[column].astype(str).str.strip() for column in ("stereo_entity", "nonstereo_entity"))
    equal = (stereo == other) & examples["stereo_entity"].notna()
    return {"unfilled_placeholder": unfilled(examples), "equal_entities": equal, "identical_options": identical}


def unsound_drops(examples: pd.DataFrame) -> tuple[pd.Series, pd.DataFrame]:
    """The examples a stage that makes them keeps (a boolean Series) and those it drops as unsound, with the first
    check of :data:`RELEASE_BLOCKERS` each fails as their ``reason``."""
    reason = pd.Series("", index=examples.index, dtype=object)
    for check, bad in reversed(unsound_rows(examples).items()):
        reason[bad.to_numpy()] = check
    unsound = reason != ""
    return ~unsound, examples[unsound].assign(reason=reason[unsound])


def manifest_warnings(dropped: pd.DataFrame) -> list[str]:
    """The run manifest's warning for unsound examples a stage dropped (rows of :func:`unsound_drops`), or none."""
    if dropped.empty:
        return []
    counts = ", ".join(f"{reason} {n}" for reason, n in dropped["reason"].value_counts().sort_index().items())
    return [f"dropped {len(dropped)} unsound example(s) ({counts}): never released"]


class UnsoundRelease(ValueError):
    """A config about to be released holds a row that fails a check of :data:`RELEASE_BLOCKERS`."""


def refuse_unsound(config: str, examples: pd.DataFrame) -> None:
    """Raise :class:`UnsoundRelease` naming the config, the check, how many rows fail it and the first one's id
    when any example of ``config`` fails a check of :data:`RELEASE_BLOCKERS`."""
    for check, bad in unsound_rows(examples).items():
        if bad.any():
            first = examples.loc[bad, "example_id"].iloc[0]
            raise UnsoundRelease(
                f"statistics: {int(bad.sum())} of {len(examples)} {config} examples fail {check} (first: {first}): "
                "a release never holds such a row; the stage that made them must drop it"
            )


def source_entities(examples: pd.DataFrame, source: str = PBBQ_SOURCE) -> pd.DataFrame:
    """The stereotyped and non-stereotyped entities (``stereo_source``, ``nonstereo_source``) of each original
    example in the ``source`` language, indexed by its id (the last row of an id given twice): what a translated
    row is checked against."""
    original = (examples["lang"] == source) & (examples["variant"] == "original")
    originals = examples.loc[original, ["example_id", "answer_roles", *OPTIONS]]  # the columns read, not every one
    entities = entity_phrases(originals).assign(example_id=originals["example_id"])
    return entities.drop_duplicates("example_id", keep="last").set_index("example_id").rename(columns=SOURCE_COLUMNS)


def entity_phrases(examples: pd.DataFrame) -> pd.DataFrame:
    """Each example's stereotyped and non-stereotyped entity as its options write them (``stereo_entity``,
    ``nonstereo_entity``), what a check of gender or age reads: PBBQ's options are its entities; BBQ's name the
    group's person ('The Nigerian man') where the entity columns hold the group ('Nigerian')."""
    roles = _per_option(examples["answer_roles"], "answer_roles")
    texts = [examples[option].to_numpy(dtype=object) for option in OPTIONS]
    phrases = {}
    for column, role in (("stereo_entity", "stereotyped"), ("nonstereo_entity", "non-stereotyped")):
        chosen = [
            pc.fill_null(pc.equal(roles.field(option), role), False).to_numpy(zero_copy_only=False)
            for option in OPTIONS
        ]
        phrases[column] = np.select(chosen, texts, default=np.array(None, dtype=object))
    return pd.DataFrame(phrases, index=examples.index)


def soundness(
    examples: pd.DataFrame, templates: pd.DataFrame, sources: pd.DataFrame | None = None, source: str = PBBQ_SOURCE
) -> pd.DataFrame:
    """Violations of every check per config (a row per config and check; 0 is sound), the examples written in the
    ``source`` language; ``sources``: the originals' entities (:func:`source_entities`), given when ``examples``
    holds only some configs."""
    allowed = {
        (template_id, *item.split(PAIR_SEPARATOR)[:2])
        for template_id, items in zip(templates["template_id"], templates["allowed_pairs"], strict=True)
        for item in items
    }
    sources = source_entities(examples, source) if sources is None else sources
    rows = []
    configs = example_configs(examples)
    for config in dict.fromkeys(configs):
        frame = examples[configs == config]
        for check, bad in row_violations(frame, allowed, sources, source).items():
            rows.append({"config": config, "check": check, "examples": len(frame), "violations": int(bad.sum())})
    return pd.DataFrame(rows, columns=SOUNDNESS.names)
