"""Soundness checks of a built dataset, per config (docs/architecture.md §4): the rules a BBQ example must obey,
checked on every row of every config in the build, not only in tests.

- ``duplicate_example``: two rows of one config with the same (context, question, ans0, ans1, ans2);
- ``unfilled_placeholder``: a ``{…}`` left in a text field;
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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

from ..text.cues import CONFOUNDS, pair_confound
from ..text.languages import language
from .inputs import PAIR_SEPARATOR
from .schemas import OPTIONS, example_configs

DUPLICATE_KEY = ["context", "question", *OPTIONS]
CELL_ROLE: dict[tuple[str, str, str], str] = {
    ("ambig", "none", "neg"): "unknown",
    ("ambig", "none", "nonneg"): "unknown",
    ("disambig", "biased", "neg"): "stereotyped",
    ("disambig", "biased", "nonneg"): "non-stereotyped",
    ("disambig", "counter_biased", "neg"): "non-stereotyped",
    ("disambig", "counter_biased", "nonneg"): "stereotyped",
}
"""The role of the correct answer in each (context_condition, assignment, question_polarity) cell."""
CHECKS = (
    "duplicate_example",
    "unfilled_placeholder",
    "label_role",
    "target_loc",
    "answer_info_text",
    *CONFOUNDS,
    "gender_added",
)
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


def _gender_added(lang: str, stereo: str, nonstereo: str, stereo_fa: str, nonstereo_fa: str) -> bool:
    """Whether a translated pair's entities give a gender their Persian sources do not give, or another."""
    persian = language("fa")
    return any(
        not language(lang).keeps_gender(entity, persian.entity_gender(source))
        for entity, source in ((stereo, stereo_fa), (nonstereo, nonstereo_fa))
    )


def row_violations(
    frame: pd.DataFrame, allowed: set[tuple[str, str, str]], sources: Mapping[str, tuple[str, str]] | None = None
) -> dict[str, pd.Series]:
    """A boolean Series per check over the rows of one config; ``sources`` holds the Persian (stereotyped,
    non-stereotyped) entities of each original Persian example, by id, which an English row is checked against."""
    roles = frame["answer_roles"]
    cells = zip(frame["context_condition"], frame["assignment"], frame["question_polarity"], strict=True)
    expected = [CELL_ROLE.get(cell) for cell in cells]
    info_text = pd.Series(
        [
            any(info[option][0] != text for option, text in zip(OPTIONS, texts, strict=True))
            for info, *texts in zip(frame["answer_info"], *(frame[option] for option in OPTIONS), strict=True)
        ],
        index=frame.index,
    )
    original = (frame["lang"] == "fa") & (frame["variant"] == "original")
    pair = ["template_id", "stereo_entity", "nonstereo_entity"]
    kept = pd.Series(pd.MultiIndex.from_frame(frame[pair]).isin(list(allowed)), index=frame.index)
    confound = _per_distinct(
        frame, ["stereo_entity", "nonstereo_entity", "category"], original, lambda *key: pair_confound(*key, "fa")
    )
    persian = [(sources or {}).get(source, (None, None)) for source in frame["source_example_id"]]
    sourced = frame.assign(stereo_fa=[s for s, _ in persian], nonstereo_fa=[n for _, n in persian])
    added = _per_distinct(
        sourced,
        ["lang", "stereo_entity", "nonstereo_entity", "stereo_fa", "nonstereo_fa"],
        (frame["lang"] != "fa") & sourced["stereo_fa"].notna(),
        _gender_added,
    )
    return {
        "duplicate_example": frame.duplicated(DUPLICATE_KEY, keep="first"),
        "unfilled_placeholder": frame[["context", "question", *OPTIONS]]
        .apply(lambda column: column.str.contains(r"\{[^{}]*\}"))
        .any(axis=1),
        "label_role": pd.Series(
            [r[f"ans{label}"] != e for r, label, e in zip(roles, frame["label"], expected, strict=True)],
            index=frame.index,
        ),
        "target_loc": pd.Series(
            [r[f"ans{loc}"] != "stereotyped" for r, loc in zip(roles, frame["target_loc"], strict=True)],
            index=frame.index,
        ),
        "answer_info_text": info_text,
        **{reason: original & (confound == reason) & ~kept for reason in CONFOUNDS},
        "gender_added": added.fillna(False).astype(bool),
    }


def source_entities(examples: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """The Persian (stereotyped, non-stereotyped) entities of each original Persian example, by id: what a
    translated row is checked against."""
    columns = ["example_id", "stereo_entity", "nonstereo_entity"]
    originals = examples.loc[(examples["lang"] == "fa") & (examples["variant"] == "original"), columns]
    ids, stereo, nonstereo = (originals[column].to_numpy(dtype=object) for column in columns)
    return dict(zip(ids, zip(stereo, nonstereo, strict=True), strict=True))


def soundness(
    examples: pd.DataFrame, templates: pd.DataFrame, sources: Mapping[str, tuple[str, str]] | None = None
) -> pd.DataFrame:
    """Violations of every check per config (a row per config and check; 0 is sound); ``sources``: the originals'
    entities (:func:`source_entities`), given when ``examples`` holds only some configs."""
    allowed = {
        (template_id, *item.split(PAIR_SEPARATOR)[:2])
        for template_id, items in zip(templates["template_id"], templates["allowed_pairs"], strict=True)
        for item in items
    }
    sources = source_entities(examples) if sources is None else sources
    rows = []
    configs = example_configs(examples)
    for config in dict.fromkeys(configs):
        frame = examples[configs == config]
        for check, bad in row_violations(frame, allowed, sources).items():
            rows.append({"config": config, "check": check, "examples": len(frame), "violations": int(bad.sum())})
    return pd.DataFrame(rows, columns=SOUNDNESS.names)
