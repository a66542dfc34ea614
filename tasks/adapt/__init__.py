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
"""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd
import pyarrow as pa

from ..core.artifacts import StageOutput, count_reasons
from ..core.schemas import EXAMPLE, EXAMPLE_DROPPED, GATE_FIELDS, OPTIONS
from ..core.stage import Input, Stage, Table
from ..kappa_gate import GateParams, kappa_gate
from .bbq_format import PROPER_NAME_COLUMNS
from .generate import AdaptInstantiateParams, examples_of, fillings
from .sheet import ADAPTED_TEMPLATE, CLASSES, apply_classes

GATE_COLUMNS = [name for name, _ in GATE_FIELDS]
GATED_TEMPLATE = pa.schema([*ADAPTED_TEMPLATE, *GATE_FIELDS])
"""An adapted template with the gate's figures and decision; ``reason`` is ``simply_removed`` for an SR row (the
experts' reason in ``removal_reason``) or the gate's reason."""
SIMPLY_REMOVED = "simply_removed"
UNFILLED = r"\{\{[^{}]*\}\}"


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
    return StageOutput(
        tables={"templates": table, "gated": table[table["kept"]].reset_index(drop=True), "dropped": dropped},
        schemas={"templates": GATED_TEMPLATE, "gated": GATED_TEMPLATE, "dropped": GATED_TEMPLATE},
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
) -> StageOutput:
    """English examples of every gated template by BBQ's rules. A template with no pair of groups (none of its
    stereotyped groups in the vocabulary, no other group, or no contrast), a ``Proper_nouns_only`` template when no
    first names are given (``proper_names``: BBQ's ``vocabulary_proper_names.csv``), an example with a slot left
    unfilled and an exact duplicate are dropped with their reason."""
    names = pd.DataFrame(columns=PROPER_NAME_COLUMNS) if proper_names is None else proper_names
    paired = pd.Series(
        [bool(fillings(t, vocabulary, names)) for _, t in templates.iterrows()], index=templates.index, dtype=bool
    )
    no_names = templates["proper_nouns_only"] & names.empty
    dropped_templates = templates[~paired].assign(
        reason=no_names[~paired].map({True: "no_proper_names", False: "no_group_pair"})
    )
    examples = examples_of(templates[paired], vocabulary, names, params)
    unfilled = examples[["context", "question", *OPTIONS]].apply(lambda c: c.str.contains(UNFILLED)).any(axis=1)
    duplicated = examples.duplicated(["context", "question", *OPTIONS]) & ~unfilled
    dropped_examples = pd.concat(
        [
            examples[unfilled].assign(reason="unfilled_placeholder"),
            examples[duplicated].assign(reason="duplicate_example"),
        ],
        ignore_index=True,
    )
    examples = examples[~unfilled & ~duplicated].reset_index(drop=True)
    reasons = pd.concat([dropped_templates["reason"], dropped_examples["reason"]], ignore_index=True)
    report = {
        "parameters": asdict(params),
        "counts": {"in": len(templates), "out": len(examples)},
        "dropped": {"total": len(reasons), "by_reason": count_reasons(reasons)},
        "examples_per_template": {str(k): int(v) for k, v in examples.groupby("template_id").size().items()},
    }
    return StageOutput(
        tables={"examples": examples, "dropped_examples": dropped_examples, "dropped_templates": dropped_templates},
        schemas={"examples": EXAMPLE, "dropped_examples": EXAMPLE_DROPPED, "dropped_templates": GATED_TEMPLATE},
        report=report,
    )


ADAPT = Stage(
    "03_adapt",
    "adapt",
    adapt,
    inputs={"sheet": Input("adapt_sheet"), "ratings": Input("ratings")},
    outputs={"templates": GATED_TEMPLATE, "gated": GATED_TEMPLATE, "dropped": GATED_TEMPLATE},
    params=GateParams,
    ranges={"min_kappa": (-1, 1), "min_relevance": (1, 3)},
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
    inputs={"templates": Table("03_adapt", "gated"), "vocabulary": Input("bbq_vocabulary")},
    outputs={"examples": EXAMPLE, "dropped_examples": EXAMPLE_DROPPED, "dropped_templates": GATED_TEMPLATE},
    params=AdaptInstantiateParams,
    drops=("dropped_examples", "dropped_templates"),
    words=("adapted templates", "examples (en)", "templates or examples not built"),
    funnel={"adapt_examples": "Examples (`en`) by BBQ's rules"},
    counts=lambda output: {"adapt_examples": len(output["examples"])},
)
