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

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..tasks import (
    adapt,
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
from ..tasks.core.stage import Input, Pipeline, ReleaseConfig, Report, Resource, Source, Stage, Table
from ..tasks.kappa_gate import GateParams
from ..tasks.publish.dataset_card import adapt_card_body
from ..tasks.review.stage import DECISIONS, ReviewRules, review_stage
from ..tasks.review.stage import STAGE_NAME as REVIEW

TARGETS = ("en",)
"""``[translate] targets`` left out: the languages PBBQ's examples are translated into (PBBQ §3.4: English)."""


def reading(stage: Stage, **inputs: Source | None) -> Stage:
    """A shared stage as a pipeline wires it: ``inputs`` replace its declared ones (None: left out, the function's
    default then holds), so that it reads what this pipeline has."""
    wired = {**stage.inputs, **inputs}
    return dataclasses.replace(stage, inputs={name: source for name, source in wired.items() if source is not None})


def translations(targets: Sequence[str], source: str = translate.SOURCE.code, **inputs: Source) -> dict[str, Stage]:
    """One translate stage per target language, by its code (:func:`pbbq.tasks.translate.translate_stage`: the
    first is ``translate``), from ``source``, each reading ``inputs`` in place of its declared ones."""
    return {
        code: reading(translate.translate_stage(code, first=number == 0, source=source), **inputs)
        for number, code in enumerate(targets)
    }


def translated_configs(stages: Mapping[str, Stage], source: str, step: str) -> dict[str, ReleaseConfig]:
    """Each target's config: its translate stage's examples, an instance-level translation of ``source``'s (its card
    says who translated at ``step``)."""
    description = f"Instance-level translation of `{source}` (who translated: {step})."
    return {
        code: ReleaseConfig(Table(stage.folder, "examples"), code, description, made_from=source)
        for code, stage in stages.items()
    }


def pbbq_pipeline(targets: Sequence[str] = TARGETS) -> Pipeline:
    """PBBQ: the stages in the paper's order, each reading only stages before it, with one translate stage per
    target language (:func:`translations`); the examples of the Persian (``fa``), name-proxy (``fa-names``) and
    each target's config (``en``, ``ur``)."""
    stages = translations(targets)
    return Pipeline(
        (
            crawl.STAGE,
            survey_filter.STAGE,
            kappa_gate.STAGE,
            disambiguate.STAGE,
            instantiate.STAGE,
            names.STAGE,
            *stages.values(),
            diversity.STAGE,
            statistics.STAGE,
            publish.RELEASE_DATA,
            publish.STAGE,
        ),
        configs={
            "fa": ReleaseConfig(
                Table(instantiate.STAGE.folder, "examples"),
                "fa",
                "The original examples, with the groups named explicitly.",
            ),
            "fa-names": ReleaseConfig(
                Table(names.STAGE.folder, "examples"),
                "fa",
                "The same examples with each group mention replaced by a culturally indicative first name, "
                "one variant per sampling seed (name proxies).",
                made_from="fa",
                names=True,
            ),
            **translated_configs(stages, "fa", "step 5 and the limitations below"),
        },
    )


PIPELINE = pbbq_pipeline()
"""PBBQ as the default build runs it: Persian translated into English."""


def adapt_pipeline(targets: Sequence[str] = ()) -> Pipeline:
    """The adaptation path (PakBBQ §3.1–§3.3, after KoBBQ): BBQ's templates classed and gated (``03_adapt``), built
    by BBQ's rules into English examples (``05_instantiate``), translated into each of ``targets`` as PBBQ's
    examples are (:func:`translations`, from English, with the adaptation's glossary and 'unknown' list), then
    PBBQ's own diversity, statistics and publish stages reading the adapted templates' texts and the adaptation's
    funnel steps, and PBBQ's names stage over the English examples (``en-names``, from the name table of the
    adapted groups: :data:`pbbq.tasks.names.BBQ_NAME_TABLE`)."""
    stages = translations(
        targets,
        adapt.SOURCE_LANG,
        examples=Table(adapt.ADAPT_INSTANTIATE.folder, "examples"),
        glossary=translate.BBQ_GLOSSARY,
        unknown_phrases=translate.BBQ_UNKNOWN_PHRASES,
    )
    return Pipeline(
        (
            adapt.ADAPT,
            adapt.ADAPT_INSTANTIATE,
            reading(
                names.names_stage(adapt.SOURCE_LANG),
                examples=Table(adapt.ADAPT_INSTANTIATE.folder, "examples"),
                name_table=names.BBQ_NAME_TABLE,
            ),
            *stages.values(),
            reading(diversity.STAGE, templates=Table(adapt.ADAPT.folder, "texts")),
            reading(
                statistics.STAGE,
                templates=Table(adapt.ADAPT.folder, "texts"),
                stereotypes=None,
                dropped_pairs=None,
                crawl=None,
                categories=Resource(tuple),  # Table 1 lists the categories of the sheet's templates, not PBBQ's 16
            ),
            publish.RELEASE_DATA,
            reading(publish.STAGE, card_body=Resource(adapt_card_body)),
        ),
        configs={
            adapt.SOURCE_LANG: ReleaseConfig(
                Table(adapt.ADAPT_INSTANTIATE.folder, "examples"),
                adapt.SOURCE_LANG,
                "The examples built by BBQ's rules from the adapted templates (step 3).",
            ),
            f"{adapt.SOURCE_LANG}-names": ReleaseConfig(
                Table(names.STAGE.folder, "examples"),
                adapt.SOURCE_LANG,
                "The same examples with each group mention replaced by a first name of the group, one variant per "
                "sampling seed (name proxies, step 5).",
                made_from=adapt.SOURCE_LANG,
                names=True,
            ),
            **translated_configs(stages, adapt.SOURCE_LANG, "step 4"),
        },
    )


ADAPT_PIPELINE = adapt_pipeline()
"""The adaptation path without translation: its English examples alone."""


def _crawl_pipeline(targets: tuple[str, ...] | None) -> Pipeline:
    return PIPELINE if targets in (None, TARGETS) else pbbq_pipeline(targets)


def _adapt_pipeline(targets: tuple[str, ...] | None) -> Pipeline:
    return adapt_pipeline(targets) if targets else ADAPT_PIPELINE


PATHS: dict[str, Callable[[tuple[str, ...] | None], Pipeline]] = {
    "crawl": _crawl_pipeline,
    "adapt": _adapt_pipeline,
}
"""``[input] path``: the build's input path and how its pipeline follows from its ``[translate] targets`` (None:
left out, the path's default: PBBQ's :data:`TARGETS`, none on the adaptation path)."""
SOURCES = {"crawl": translate.SOURCE.code, "adapt": adapt.SOURCE_LANG}
"""The language each input path builds its examples in, which its translate stages translate from."""


def _input_path(config: Mapping[str, Any]) -> str:
    """``[input] path`` (default ``crawl``); a ValueError names a path that is not one of :data:`PATHS`."""
    section = config.get("input", {})
    if not isinstance(section, Mapping):
        raise ValueError("input must be a section [input], not a value")
    path = section.get("path", "crawl")
    if not isinstance(path, str) or path not in PATHS:
        raise ValueError(f"[input] path = {path!r} is not one of {', '.join(map(repr, PATHS))}")
    return path


def pipeline_for(config: Mapping[str, Any], targets: tuple[str, ...] | None = None) -> Pipeline:
    """The pipeline a build configuration (its TOML, as read) runs: its ``[input] path`` (default ``crawl``: PBBQ's),
    into ``targets`` (its ``[translate] targets`` as :func:`pbbq.flows.config.load_config` parsed them; None: left
    out); a ValueError names a path that is not one of :data:`PATHS`."""
    pipeline = PATHS[_input_path(config)](targets)
    section = config.get(REVIEW)
    if isinstance(section, Mapping):
        return reviewed(pipeline, require=section.get("require") is True)
    return pipeline


def reviewed(pipeline: Pipeline, require: bool = False) -> Pipeline:
    """A pipeline whose build takes review decisions (``[review]``, :mod:`pbbq.tasks.review.stage`): disambiguate and
    each translate stage read the decisions (and whether only reviewed items are released), and the review stage,
    before statistics, states what people checked. Without ``[review]`` a pipeline runs as it was, byte for byte."""
    rules = Resource(functools.partial(ReviewRules, require=require))
    stages: list[Stage] = []
    targets: dict[str, str] = {}
    name_table: Input | None = None
    for stage in pipeline:
        if stage.run is translate.translate:
            pair = stage.inputs["pair"]
            assert isinstance(pair, Resource)  # translate's stages read their language pair so (tasks/translate)
            targets[pair.load().target.code] = stage.folder
        if stage.run in (translate.translate, disambiguate.disambiguate):
            stage = reading(stage, decisions=DECISIONS, rules=rules)
        if stage.name == "names":  # the name table as the round left it (tasks/review/names.py)
            table = stage.inputs["name_table"]
            assert isinstance(table, Input)  # the names stage's table is a build input (tasks/names)
            name_table = table
            stage = reading(
                stage,
                name_table=dataclasses.replace(  # its own input, read from the same [inputs] file
                    table,
                    name=f"reviewed_{table.name}",
                    key=table.config_key,
                    load=names.load_reviewed_name_table,
                    needs=(*table.needs, DECISIONS),
                ),
            )
        stages.append(stage)
    contexts = any(stage.run is disambiguate.disambiguate for stage in stages)
    review = review_stage(contexts, targets, name_table)
    at = next(i for i, stage in enumerate(stages) if stage.folder == "09_statistics")
    stages.insert(at, review)
    card = Report(review.folder, dict)  # the card states what people checked
    stages = [reading(stage, review=card) if stage.name == "publish" else stage for stage in stages]
    return dataclasses.replace(pipeline, stages=tuple(stages))


def translate_stages(pipeline: Pipeline) -> tuple[Stage, ...]:
    """The pipeline's translate stages, one per target language (:func:`translations`), in its order."""
    return tuple(stage for stage in pipeline if stage.run is translate.translate)


def source_of(config: Mapping[str, Any]) -> str:
    """The source language of a build configuration's input path (:data:`SOURCES`): not a target of its own."""
    return SOURCES[_input_path(config)]


def gate_section(pipeline: Pipeline) -> str:
    """The configuration section of the pipeline's annotation gate (Fleiss' kappa and mean relevance, PakBBQ §3.2),
    whose thresholds the dataset card states."""
    return next(stage.name for stage in pipeline if stage.params is GateParams)


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
