"""The adaptation path (PakBBQ §3.1–§3.3, after KoBBQ): BBQ's own templates, classed DT / TM / NA / SR by experts
for a target culture, gated as stage 03 gates PBBQ's templates, then built by BBQ's own generation rules into
English examples of the project's example table, which the names, translate, diversity, statistics and publish
stages read as they read PBBQ's.

Two stages, declared here for a pipeline to list (``[input] path = "adapt"``):

- :data:`ADAPT` (``03_adapt``): the reviewed sheet (:func:`~pbbq.tasks.adapt.sheet.load_reviewed_sheet`) with its
  classes applied, and the annotation gate of :mod:`pbbq.tasks.kappa_gate` (Fleiss' kappa ≥ 0.2, mean relevance
  ≥ 1.5 per template, PakBBQ §3.2) on every template that is built, NA rows included. SR rows and the templates
  the gate stops are its drops.
- :data:`ADAPT_INSTANTIATE` (``05_instantiate``, where PBBQ's instantiation writes, so the stages after it read
  ``05_instantiate/examples`` on either path): BBQ's generation rules (:mod:`pbbq.tasks.adapt.generate`).

Their inputs (``[inputs]`` keys): ``adapt_sheet`` (the reviewed sheet), ``ratings`` (the annotators' ratings of its
templates), ``bbq_vocabulary`` (BBQ's ``vocabulary.csv`` format) and, optional, ``bbq_proper_names`` (BBQ's
``vocabulary_proper_names.csv``, for the ``Proper_nouns_only`` templates).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd
import pyarrow as pa

from ..core.artifacts import StageOutput, count_reasons
from ..core.example_cap import DEFAULT_CAP, ExampleCap
from ..core.inputs import load_ratings
from ..core.schemas import EXAMPLE, EXAMPLE_DROPPED, GATE_FIELDS, OPTIONS
from ..core.soundness import manifest_warnings, unsound_drops
from ..core.stage import Input, RunValue, Stage, Table
from ..kappa_gate import GATE_RANGES, GateParams, kappa_gate
from .bbq_format import PROPER_NAME_COLUMNS, load_bbq_proper_names, load_bbq_vocabulary
from .generate import AdaptInstantiateParams, estimate, examples_of
from .sheet import ADAPTED_TEMPLATE, CLASSES, apply_classes, load_reviewed_sheet

GATE_COLUMNS = [name for name, _ in GATE_FIELDS]
GATED_TEMPLATE = pa.schema([*ADAPTED_TEMPLATE, *GATE_FIELDS])
"""An adapted template with the gate's figures and decision; ``reason`` is ``simply_removed`` for an SR row (the
experts' reason in ``removal_reason``) or the gate's reason."""
SIMPLY_REMOVED = "simply_removed"
SOURCE_LANG = "en"
"""The language of BBQ's templates, and of the examples built from them."""
TEXT_COLUMNS = {
    f"ambiguous_{SOURCE_LANG}": "ambiguous",
    f"disambiguated_{SOURCE_LANG}": "disambiguating",
    f"disambiguated_counter_biased_{SOURCE_LANG}": "disambiguating",
}
"""The template texts the shared stages read (Table 2's units, PBBQ §3.5), from the adapted template's fields.
BBQ writes one disambiguating context for both assignments, so the counter-biased text is the same one."""
BBQ_SLOTS = {
    "{{NAME1}}": "{stereo}",
    "{{NAME2}}": "{nonstereo}",
    "{{WORD1}}": "{lex}",
    "{{WORD2}}": "{lex}",
    "{{GEN1}}": "{stereo}",
    "{{OCC1}}": "{stereo}",
    "{{GEN2}}": "{nonstereo}",
    "{{OCC2}}": "{nonstereo}",
}
"""BBQ's slots in PBBQ's placeholders: which of NAME1 and NAME2 is the stereotyped one depends on the filling, and
Table 2 masks both alike. The second attribute's slots of Race_x_gender and Race_x_SES (``{{GEN1}}``,
``{{OCC1}}``, …) belong to their NAME slot's entity."""
TEXTS = pa.schema(
    [
        ("template_id", pa.string()),
        ("category", pa.string()),
        *[(column, pa.string()) for column in TEXT_COLUMNS],
        ("disambiguated_source", pa.string()),
        ("counter_biased_source", pa.string()),
        ("allowed_pairs", pa.list_(pa.string())),
    ]
)
"""The gated templates as the stages after instantiation read a template (the columns of
:data:`~pbbq.tasks.core.schemas.TEMPLATE_DISAMBIGUATED` they read, in the source language)."""

ADAPT_OUTPUTS: dict[str, pa.Schema] = {
    "templates": GATED_TEMPLATE,
    "gated": GATED_TEMPLATE,
    "dropped": GATED_TEMPLATE,
    "texts": TEXTS,
}
"""The adaptation gate's tables: every reviewed template with its decision, those kept, those dropped, the kept
ones' texts."""
ADAPT_INSTANTIATE_OUTPUTS: dict[str, pa.Schema] = {
    "examples": EXAMPLE,
    "dropped_examples": EXAMPLE_DROPPED,
    "dropped_templates": GATED_TEMPLATE,
}
"""BBQ's examples built from the gated templates, and the examples and templates not built."""

ADAPT_SHEET = Input("adapt_sheet", load_reviewed_sheet)
ADAPT_RATINGS = Input("ratings", lambda path, sheet: load_ratings(path, sheet["template_id"]), needs=(ADAPT_SHEET,))
BBQ_VOCABULARY = Input("bbq_vocabulary", load_bbq_vocabulary)
BBQ_PROPER_NAMES = Input(
    "bbq_proper_names", lambda path: None if path is None else load_bbq_proper_names(path), optional=True
)


def _pbbq_slots(text: str) -> str:
    for slot, placeholder in BBQ_SLOTS.items():
        text = text.replace(slot, placeholder)
    return text


def template_texts(gated: pd.DataFrame) -> pd.DataFrame:
    """:data:`TEXTS` of the gated templates: their texts with PBBQ's placeholders, written by people (no
    continuation in review), no confounded pair allowed."""
    texts = {column: gated[field].map(_pbbq_slots) for column, field in TEXT_COLUMNS.items()}
    frame = pd.DataFrame({"template_id": gated["template_id"], "category": gated["category"], **texts})
    frame = frame.assign(disambiguated_source="bbq", counter_biased_source="bbq")
    frame["allowed_pairs"] = [[] for _ in range(len(frame))]
    return frame[TEXTS.names]


def gate(templates: pd.DataFrame, ratings: pd.DataFrame, params: GateParams) -> pd.DataFrame:
    """The templates with :func:`pbbq.tasks.kappa_gate.kappa_gate`'s figures and decision. The adaptation has no
    survey: each template is its own stereotype, accepted by the experts' class."""
    shaped = pd.DataFrame({"template_id": templates["template_id"], "stereotype_id": templates["template_id"]})
    accepted = pd.DataFrame(
        {"stereotype_id": templates["template_id"], "category": templates["category"], "kept": True}
    )
    decided = kappa_gate(shaped, ratings, accepted, params)["templates"]
    return templates.merge(decided[["template_id", *GATE_COLUMNS]], on="template_id", how="left", validate="1:1")


def adapt(sheet: pd.DataFrame, ratings: pd.DataFrame, params: GateParams) -> StageOutput:
    """The reviewed sheet's classes applied and the built templates gated; counts per class for the funnel."""
    built, removed = apply_classes(sheet)
    table = gate(built, ratings, params)
    removed = removed.assign(n_items=0, n_annotators=0, kappa=float("nan"), kappa_note="", mean_relevance=float("nan"))
    removed = removed.assign(kept=False, reason=SIMPLY_REMOVED)
    table = pd.concat([table, removed], ignore_index=True) if len(removed) else table
    dropped = table[~table["kept"]].reset_index(drop=True)
    classes = sheet["class"].value_counts()
    report = {
        "counts": {"in": len(sheet), "out": int(table["kept"].sum())},
        "classes": {kind: int(classes.get(kind, 0)) for kind in CLASSES},
        "drops": dropped[["template_id", "class", "reason", "removal_reason"]].to_dict("records"),
    }
    gated = table[table["kept"]].reset_index(drop=True)
    return StageOutput(
        tables={"templates": table, "gated": gated, "dropped": dropped, "texts": template_texts(gated)},
        schemas=ADAPT_OUTPUTS,
        report=report,
    )


def adapt_counts(output: StageOutput) -> dict[str, int]:
    """The adaptation's funnel steps: templates reviewed, each class, and through the gate."""
    table = output["templates"]
    per_class = table["class"].value_counts()
    return {
        "adapt_reviewed": len(table),
        **{f"adapt_{kind}": int(per_class.get(kind, 0)) for kind in CLASSES},
        "adapt_gated": int(table["kept"].sum()),
    }


def adapt_instantiate(
    templates: pd.DataFrame,
    vocabulary: pd.DataFrame,
    params: AdaptInstantiateParams,
    proper_names: pd.DataFrame | None = None,
    cap: ExampleCap = DEFAULT_CAP,
) -> StageOutput:
    """English examples of every gated template by BBQ's rules, each template's count estimated first and refused
    past ``cap`` (:class:`ExampleCap`) before any is built. A template with no pair of groups (none of its
    stereotyped groups in the vocabulary, no other group, or no contrast), a ``Proper_nouns_only`` template when no
    first names are given (``proper_names``: BBQ's ``vocabulary_proper_names.csv``), a Race_x_gender or Race_x_SES
    pair whose genders a pronoun of the template contradicts (``pronoun_gender_clash``), an unsound example (a
    placeholder left, two options alike, one entity twice: :func:`~pbbq.tasks.core.soundness.unsound_drops`, also
    named in the run's manifest) and an exact duplicate are dropped with their reason."""
    names = pd.DataFrame(columns=PROPER_NAME_COLUMNS) if proper_names is None else proper_names
    estimates = [estimate(template, vocabulary, names) for _, template in templates.iterrows()]
    for template_id, estimated in zip(templates["template_id"], estimates, strict=True):
        cap.check(template_id, estimated)
    paired = pd.Series([bool(e.fillings) for e in estimates], index=templates.index, dtype=bool)
    no_names = templates["proper_nouns_only"] & names.empty
    dropped_templates = templates[~paired].assign(
        reason=no_names[~paired].map({True: "no_proper_names", False: "no_group_pair"})
    )
    built = examples_of(templates[paired], vocabulary, names, params)
    gated = built["reason"] != ""
    examples = built[~gated].drop(columns="reason").reset_index(drop=True)
    sound, unsound = unsound_drops(examples)
    duplicated = examples.duplicated(["context", "question", *OPTIONS]) & sound
    duplicates = examples[duplicated].assign(reason="duplicate_example")
    dropped_examples = pd.concat([built[gated], unsound, duplicates], ignore_index=True)
    examples = examples[sound & ~duplicated].reset_index(drop=True)
    reasons = pd.concat([dropped_templates["reason"], dropped_examples["reason"]], ignore_index=True)
    report: dict[str, Any] = {
        "parameters": asdict(params),
        "counts": {"in": len(templates), "out": len(examples)},
        "dropped": {"total": len(reasons), "by_reason": count_reasons(reasons)},
        "examples_per_template": {str(k): int(v) for k, v in examples.groupby("template_id").size().items()},
    }
    warnings = manifest_warnings(unsound)
    if warnings:
        report["manifest_warnings"] = warnings
    return StageOutput(
        tables={"examples": examples, "dropped_examples": dropped_examples, "dropped_templates": dropped_templates},
        schemas=ADAPT_INSTANTIATE_OUTPUTS,
        report=report,
    )


ADAPT = Stage(
    "03_adapt",
    "adapt",
    adapt,
    inputs={"sheet": ADAPT_SHEET, "ratings": ADAPT_RATINGS},
    outputs=ADAPT_OUTPUTS,
    params=GateParams,
    ranges=GATE_RANGES,
    drops=("dropped",),
    words=("templates reviewed", "adapted templates through the gate", "templates removed (SR) or stopped"),
    funnel={
        "adapt_reviewed": "BBQ templates reviewed, and rows added",
        "adapt_DT": "Directly translated (DT)",
        "adapt_TM": "Target-modified (TM)",
        "adapt_NA": "Newly added (NA)",
        "adapt_SR": "Simply removed (SR)",
        "adapt_gated": "Templates that passed the annotation gate",
    },
    counts=adapt_counts,
)
ADAPT_INSTANTIATE = Stage(
    "05_instantiate",
    "adapt_instantiate",
    adapt_instantiate,
    inputs={
        "templates": Table("03_adapt", "gated"),
        "vocabulary": BBQ_VOCABULARY,
        "proper_names": BBQ_PROPER_NAMES,
        "cap": RunValue("example_cap", describes=lambda stage: False),
    },
    outputs=ADAPT_INSTANTIATE_OUTPUTS,
    params=AdaptInstantiateParams,
    drops=("dropped_examples", "dropped_templates"),
    words=("adapted templates", "examples (en)", "templates or examples not built"),
    funnel={"adapt_examples": "Examples (`en`) by BBQ's rules"},
    counts=lambda output: {"adapt_examples": len(output["examples"])},
)
