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

from collections.abc import Mapping

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
            any(info[option][0] != getattr(row, option) for option in OPTIONS)
            for info, row in zip(frame["answer_info"], frame.itertuples(), strict=True)
        ],
        index=frame.index,
    )
    original = (frame["lang"] == "fa") & (frame["variant"] == "original")
    pairs = list(zip(frame["template_id"], frame["stereo_entity"], frame["nonstereo_entity"], strict=True))
    kept = pd.Series([pair in allowed for pair in pairs], index=frame.index)
    categories = dict(zip(pairs, frame["category"], strict=True))
    reasons = {pair: pair_confound(pair[1], pair[2], category, "fa") for pair, category in categories.items()}
    confound = pd.Series([reasons[pair] for pair in pairs], index=frame.index, dtype=object)
    persian = [
        (sources or {}).get(source) if lang != "fa" else None
        for source, lang in zip(frame["source_example_id"], frame["lang"], strict=True)
    ]
    rows = list(zip(pairs, persian, frame["lang"], strict=True))
    checked = {(lang, (s, n), fa) for (_, s, n), fa, lang in rows if fa is not None}
    gender_added = {  # once per distinct pair of entities: a pair recurs in every example of its template
        (lang, translated, fa): any(
            not language(lang).keeps_gender(entity, language("fa").entity_gender(source))
            for entity, source in zip(translated, fa, strict=True)
        )
        for lang, translated, fa in checked
    }
    added = pd.Series(
        [fa is not None and gender_added[(lang, (s, n), fa)] for (_, s, n), fa, lang in rows],
        index=frame.index,
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
        "gender_added": added,
    }


def source_entities(examples: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """The Persian (stereotyped, non-stereotyped) entities of each original Persian example, by id: what a
    translated row is checked against."""
    originals = examples[(examples["lang"] == "fa") & (examples["variant"] == "original")]
    return dict(
        zip(
            originals["example_id"],
            zip(originals["stereo_entity"], originals["nonstereo_entity"], strict=True),
            strict=True,
        )
    )


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
