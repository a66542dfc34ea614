"""The PBBQ pipeline as one list (docs/architecture.md §1, §9): the paper's Figure 1, one stage per step, each
declared in its own module (``STAGE``).

``flows/build_pbbq.py`` runs the :class:`~pbbq.tasks.core.stage.Pipeline` a build configuration chooses
(:func:`pipeline_for`); a stage starts when the stages it reads have finished, so names, translate and
diversity's inputs run side by side. The configuration's sections and their checks, its ``[inputs]`` keys, the
manifest's input hashes, the audit's drop tables and words, the funnel's extra steps and the card's funnel labels
all come from the pipeline's declarations. Adding a stage is a module with its function and declaration, and one
entry below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..tasks import (
    crawl,
    disambiguate,
    diversity,
    instantiate,
    kappa_gate,
    names,
    publish,
    statistics,
    survey_filter,
    translate,
)
from ..tasks.core.artifacts import StageOutput
from ..tasks.core.stage import Pipeline, Stage, Table

TARGETS = ("en",)
"""``[translate] targets`` left out: the languages PBBQ's examples are translated into (PBBQ §3.4: English)."""


def pbbq_pipeline(targets: Sequence[str] = TARGETS) -> Pipeline:
    """PBBQ: the stages in the paper's order, each reading only stages before it, with one translate stage per
    target language (:func:`pbbq.tasks.translate.translate_stage`); the examples of the Persian (``fa``),
    name-proxy (``fa-names``) and each target's config (``en``, ``ur``)."""
    translations = [translate.translate_stage(code, first=number == 0) for number, code in enumerate(targets)]
    return Pipeline(
        (
            crawl.STAGE,
            survey_filter.STAGE,
            kappa_gate.STAGE,
            disambiguate.STAGE,
            instantiate.STAGE,
            names.STAGE,
            *translations,
            diversity.STAGE,
            statistics.STAGE,
            publish.STAGE,
        ),
        configs={
            "fa": Table(instantiate.STAGE.folder, "examples"),
            "fa-names": Table(names.STAGE.folder, "examples"),
            **{code: Table(stage.folder, "examples") for code, stage in zip(targets, translations, strict=True)},
        },
    )


PIPELINE = pbbq_pipeline()
"""PBBQ as the default build runs it: Persian translated into English."""


def targets_of(config: Mapping[str, Any]) -> tuple[str, ...]:
    """``[translate] targets`` of a build configuration (its TOML, as read), :data:`TARGETS` when left out; the
    configuration checks it (:func:`pbbq.flows.config.load_config`)."""
    section = config.get("translate", {})
    return tuple(section.get("targets", TARGETS)) if isinstance(section, Mapping) else TARGETS


def pipeline_for(config: Mapping[str, Any]) -> Pipeline:
    """The pipeline a build configuration (its TOML, as read) runs: PBBQ's, into its ``[translate] targets``."""
    targets = targets_of(config)
    return PIPELINE if targets == TARGETS else pbbq_pipeline(targets)


def published_configs(pipeline: Pipeline = PIPELINE) -> tuple[str, ...]:
    """The configs a release holds, each even when the build kept none of its examples."""
    return tuple(pipeline.configs)


def stage_by_folder(pipeline: Pipeline = PIPELINE) -> dict[str, Stage]:
    return {stage.folder: stage for stage in pipeline}


def funnel_labels(pipeline: Pipeline = PIPELINE) -> dict[str, str]:
    """Every funnel step's label in the dataset card, from the stages' declarations."""
    return {step: label for stage in pipeline for step, label in stage.funnel.items()}


def extra_funnel(outputs: Mapping[str, StageOutput], pipeline: Pipeline = PIPELINE) -> list[tuple[str, int]]:
    """Funnel steps of stages that count their own (``Stage.counts``), after statistics' steps."""
    return [
        item
        for stage in pipeline
        if stage.counts is not None and stage.folder in outputs
        for item in stage.funnel_counts(outputs[stage.folder]).items()
    ]
