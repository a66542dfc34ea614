"""The PBBQ pipeline as one list (docs/architecture.md §1, §9): the paper's Figure 1, one :class:`Stage` per step.

``flows/build_pbbq.py`` runs the list (a stage starts when the stages it reads have finished, so names, translate
and diversity's inputs run side by side); the configuration's sections and their checks, the manifest's input
hashes, the audit's drop tables and words, the funnel's extra steps and the card's funnel labels all come from
here. Adding a stage is a module with its function and one entry below.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ..tasks.core.artifacts import StageOutput
from ..tasks.core.schemas import EXAMPLE, EXAMPLE_DROPPED, STEREOTYPE, TEMPLATE, TEMPLATE_DISAMBIGUATED
from ..tasks.core.soundness import SOUNDNESS
from ..tasks.core.stage import Client, Input, Report, Resource, RunValue, Stage, Table, Tables
from ..tasks.crawl import DROPPED_POST, POST, CrawlParams, crawl, crawl_counts, load_prompt
from ..tasks.crawl.candidates import CANDIDATE, CLUSTER
from ..tasks.disambiguate import REVIEW, DisambiguateParams, Prompts, disambiguate
from ..tasks.diversity import TABLE2, TABLE2_INSTANCES, DiversityParams, diversity
from ..tasks.instantiate import DROPPED_PAIR, InstantiateParams, instantiate
from ..tasks.kappa_gate import GateParams, kappa_gate
from ..tasks.names import NamesParams, load_gender_prompt, names
from ..tasks.names.strength import PROXY_STRENGTH
from ..tasks.publish import RELEASE_FILES, PublishParams, publish_stage
from ..tasks.statistics import DISTRIBUTION, FUNNEL, TABLE1, statistics
from ..tasks.survey_filter import ACCEPTANCE_BY_DEMOGRAPHIC, SurveyParams, survey_filter
from ..tasks.translate import ATTEMPT, SEGMENT, TranslateParams, TranslatePrompts, translate

SEED = (0, 2**32 - 1)
EXAMPLES = Tables(
    {
        "fa": Table("05_instantiate", "examples"),
        "fa-names": Table("06_names", "examples"),
        "en": Table("07_translate", "examples"),
    }
)
"""The examples of every config, stacked: what diversity, statistics and publish read."""


def published_configs() -> tuple[str, ...]:
    """The configs a release holds, each even when the build kept none of its examples."""
    return tuple(EXAMPLES.tables)


def _ids(column: pd.Series) -> Iterable[str]:
    return column.explode().dropna()


PIPELINE: list[Stage] = [
    Stage(
        "01_crawl",
        "crawl",
        crawl,
        inputs={
            "posts": Input("posts"),
            "lexicon": Input("lexicon"),
            "client": Client(when=lambda p: p.llm_extractor),
            "prompt": Resource(load_prompt, when=lambda p: p.llm_extractor),
        },
        outputs={"posts": POST, "candidates": CANDIDATE, "clusters": CLUSTER, "dropped": DROPPED_POST},
        params=CrawlParams,
        ranges={"max_posts": (1, None), "timeout": (1e-9, None), "min_interval": (0, None), "max_retries": (0, 20)}
        | {"backoff": (0, None), "max_wait": (0, None), "similarity": (1e-9, 1), "ngram_min": (1, 10)}
        | {"ngram_max": (1, 10), "max_examples": (1, None)},
        drops=("dropped",),
        words=("posts", "candidate stereotypes", "posts that gave no candidate"),
        funnel={"candidates": "Candidate stereotypes"},
        request_ids=lambda out: out["candidates"]["llm_request_id"].loc[lambda ids: ids != ""],
    ),
    Stage(
        "02_survey",
        "survey_filter",
        survey_filter,
        inputs={"questionnaire": Input("questionnaire"), "responses": Input("responses")},
        outputs={
            "stereotypes": STEREOTYPE,
            "dropped": STEREOTYPE,
            "acceptance_by_demographic": ACCEPTANCE_BY_DEMOGRAPHIC,
        },
        params=SurveyParams,
        ranges={"threshold": (0, 1), "confidence": (0.5, 0.999999), "population": (1, None)}
        | {"target_margin": (1e-9, 1)},
        drops=("dropped",),
        words=("stereotypes surveyed", "accepted", "stereotypes the survey did not accept"),
        funnel={"surveyed": "Stereotypes in the survey", "accepted": "Accepted by the survey"},
        artifacts={
            "survey-filter": (
                "stereotypes",
                ("stereotype_id", "category", "acceptance", "ci_low", "ci_high", "kept", "reason"),
                "Acceptance per stereotype (keep > threshold)",
            )
        },
    ),
    Stage(
        "03_kappa_gate",
        "kappa_gate",
        kappa_gate,
        inputs={
            "templates": Input("templates"),
            "ratings": Input("ratings"),
            "stereotypes": Table("02_survey", "stereotypes"),
        },
        outputs={"templates": TEMPLATE, "gated": TEMPLATE, "dropped": TEMPLATE},
        params=GateParams,
        ranges={"min_kappa": (-1, 1), "min_relevance": (1, 3)},
        drops=("dropped",),
        words=("templates rated", "through the gate", "templates the gate stopped"),
        funnel={"templates": "Templates written", "gated": "Templates that passed the annotation gate"},
        artifacts={
            "kappa-gate": (
                "templates",
                ("template_id", "category", "kappa", "kappa_note", "mean_relevance", "kept", "reason"),
                "Fleiss' kappa and mean relevance per template",
            )
        },
    ),
    Stage(
        "04_disambiguate",
        "disambiguate",
        disambiguate,
        inputs={
            "templates": Table("03_kappa_gate", "gated"),
            "stereotypes": Table("02_survey", "stereotypes"),
            "overrides": Input("disambiguation_overrides"),
            "prompts": Resource(Prompts.load),
            "client": Client(),
        },
        outputs={"templates": TEMPLATE_DISAMBIGUATED, "review": REVIEW, "attempts": REVIEW},
        params=DisambiguateParams,
        ranges={"max_attempts": (1, 20), "max_sentences": (1, None)}
        | {"min_persian_share": (0, 1), "max_repeat_share": (0, 1)},
        drops=("review",),
        words=("gated templates", "with both continuations", "continuations left for review, not built"),
        request_ids=lambda out: out["attempts"]["request_id"],
    ),
    Stage(
        "05_instantiate",
        "instantiate",
        instantiate,
        inputs={"templates": Table("04_disambiguate", "templates"), "stereotypes": Table("02_survey", "stereotypes")},
        outputs={
            "examples": EXAMPLE,
            "dropped_examples": EXAMPLE_DROPPED,
            "dropped_pairs": DROPPED_PAIR,
            "dropped_templates": TEMPLATE_DISAMBIGUATED,
        },
        params=InstantiateParams,
        ranges={"seed": SEED},
        drops=("dropped_examples", "dropped_pairs", "dropped_templates"),
        words=("templates", "examples (fa)", "templates, entity pairs or examples not built"),
        funnel={
            "instantiated_templates": "Templates that yielded examples",
            "entity_pairs": "Entity pairs of those templates",
            "pairs_dropped_gender_confound": "Pairs not built: genders differ outside Gender",
            "pairs_dropped_age_confound": "Pairs not built: age bands differ outside Age",
            "pairs_without_confound": "Pairs built (differ only in the stereotype's attribute)",
            "examples": "Examples (`fa`)",
        },
    ),
    Stage(
        "06_names",
        "names",
        names,
        inputs={
            "examples": Table("05_instantiate", "examples"),
            "name_table": Input("names"),
            "client": Client(when=lambda p: p.gender_llm),
            "prompt": Resource(load_gender_prompt, when=lambda p: p.gender_llm),
        },
        outputs={
            "examples": EXAMPLE,
            "unmapped": EXAMPLE_DROPPED,
            "weak_proxy": EXAMPLE_DROPPED,
            "proxy_strength": PROXY_STRENGTH,
        },
        params=NamesParams,
        ranges={"seed": SEED, "n_seeds": (1, 100), "min_proxy_margin": (0, 1)},
        # `unmapped` holds the examples no name table covers (not covered, not drops); `weak_proxy` those whose
        # names do not tell their groups apart: both stay in fa
        drops=("weak_proxy",),
        words=("examples (fa)", "name-proxy variants (fa-names)", "examples without a name proxy (they stay in fa)"),
        funnel={
            "examples_fa-names": "Name-proxy variants (`fa-names`)",
            "names_weak_proxy": "Examples left out of `fa-names`: their names do not tell their groups apart",
        },
        counts=lambda out: {"names_weak_proxy": len(out["weak_proxy"])},
        request_ids=lambda out: _ids(out["examples"]["llm_request_ids"]),
    ),
    Stage(
        "07_translate",
        "translate",
        translate,
        inputs={
            "examples": Table("05_instantiate", "examples"),
            "unknown_phrases": Input("unknown_phrases"),
            "glossary": Input("glossary"),
            "prompts": Resource(TranslatePrompts.load),
            "client": Client(),
        },
        outputs={
            "examples": EXAMPLE,
            "segments": SEGMENT,
            "attempts": ATTEMPT,
            "review": SEGMENT,
            "dropped": EXAMPLE_DROPPED,
        },
        params=TranslateParams,
        ranges={"min_chrf": (0, 100), "max_attempts": (1, 20)},
        drops=("dropped",),
        words=("examples (fa)", "English examples (en)", "examples without an English version (they stay in fa)"),
        funnel={"examples_en": "English examples (`en`)"},
        request_ids=lambda out: _ids(out["segments"]["request_ids"]),
    ),
    Stage(
        "08_diversity",
        "diversity",
        diversity,
        inputs={"examples": EXAMPLES, "templates": Table("04_disambiguate", "templates")},
        outputs={"table2": TABLE2, "table2_instances": TABLE2_INSTANCES},
        params=DiversityParams,
        ranges={"homogenization_num_layers": (1, None), "homogenization_max_pairs": (1, None)}
        | {"homogenization_batch_size": (1, None), "seed": SEED},
        words=("examples", "rows of Table 2", "not measured"),
        artifacts={
            "table-2": ("table2", None, "Diversity per category on template texts (Table 2)"),
            "table-2-instances": ("table2_instances", None, "Diversity per category and config, on instances"),
        },
    ),
    Stage(
        "09_statistics",
        "statistics",
        statistics,
        inputs={
            "stereotypes": Table("02_survey", "stereotypes"),
            "templates": Table("03_kappa_gate", "templates"),
            "examples": EXAMPLES,
            "dropped_pairs": Table("05_instantiate", "dropped_pairs"),
            "crawl": Report("01_crawl", crawl_counts),
            "extra_funnel": RunValue("extra_funnel"),
        },
        outputs={"table1": TABLE1, "funnel": FUNNEL, "distribution": DISTRIBUTION, "soundness": SOUNDNESS},
        words=("examples", "examples counted", "not counted"),
        artifacts={
            "funnel": ("funnel", None, "From surveyed stereotypes to examples, this build"),
            "table-1": ("table1", None, "Templates and samples per category and config (Table 1)"),
        },
    ),
    Stage(
        "10_publish",
        "publish",
        publish_stage,
        inputs={
            "examples": EXAMPLES,
            "table1": Table("09_statistics", "table1"),
            "table2": Table("08_diversity", "table2"),
            "funnel": Table("09_statistics", "funnel"),
            "proxy_strength": Table("06_names", "proxy_strength"),
            "funnel_labels": RunValue("funnel_labels"),
            "gate": RunValue("gate"),
            "out_dir": RunValue("out_dir"),
            "transcript_path": RunValue("transcript_path"),
            "manifest_path": RunValue("manifest_path"),
            "build_id": RunValue("build_id"),
            "build_config": RunValue("build_config"),
            "configs": Resource(published_configs),
        },
        outputs={"release_files": RELEASE_FILES},
        params=PublishParams,
        words=("examples", "published rows", "not published"),
        cached=False,
    ),
]
"""The stages in the paper's order; each reads only stages before it."""


def stage_by_folder(pipeline: list[Stage] = PIPELINE) -> dict[str, Stage]:
    return {stage.folder: stage for stage in pipeline}


def funnel_labels(pipeline: list[Stage] = PIPELINE) -> dict[str, str]:
    """Every funnel step's label in the dataset card, from the stages' declarations."""
    return {step: label for stage in pipeline for step, label in stage.funnel.items()}


def extra_funnel(outputs: dict[str, StageOutput], pipeline: list[Stage] = PIPELINE) -> list[tuple[str, int]]:
    """Funnel steps of stages that count their own (``Stage.counts``), after statistics' steps."""
    return [
        item
        for stage in pipeline
        if stage.counts is not None and stage.folder in outputs
        for item in stage.funnel_counts(outputs[stage.folder]).items()
    ]
