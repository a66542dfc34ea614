"""Instantiation: fill every gated template into BBQ-compatible examples (PBBQ §3.3, §3.4, Table 1).

For each stereotyped × non-stereotyped entity pair and each lexical variant, both orders of mention (the two
placeholders of the ambiguous context exchanged), and:

- the ambiguous context with the negative and the non-negative question (the answer is 'unknown');
- the ambiguous context followed by the disambiguated continuation in both answer assignments: *biased*, the
  stereotyped entity answers the negative question, and *counter-biased*, the other entity does (the same
  continuation with the entities exchanged); each with both questions.

That is 2 orders × (2 + 4) = 12 examples per pair and variant. The three options are the two entities and an
'unknown' phrasing drawn from a list; their order is a seeded cycle through the six permutations of the three
roles within each (condition, assignment, polarity) cell of a template, so each role, and the label, sits at
each position about a third of the time (cyclic permutation of options, PakBBQ §3.4).

**Confound gate.** The two entities of a pair may differ only in the attribute the stereotype is about
(:func:`pbbq.tasks.text.cues.pair_confound`): a pair whose genders differ outside Gender (``gender_confound``), whose
age bands or maturity (a girl, a young woman) differ outside Age (``age_confound``), one of which is a group and the
other one person (``number_confound``), whose roles differ (a merchant, a tourist) outside the categories a role shows
(``role_confound``), or with a status on one side only that is not the category's attribute (``status_confound``), is
not built. Each such pair is a row of ``dropped_pairs`` with its reason and the cues that decided it, unless the
template's ``allowed_pairs`` keeps it with a written reason, which the report lists.

**Record.** Each example carries BBQ's own fields, so lm-evaluation-harness's BBQ task reads it as it is:
``answer_info`` (per option ``[text, group_tag]``, the 'unknown' option tagged ``unknown``) and
``additional_metadata`` (``stereotyped_groups`` = the stereotyped entity's tag); and the project's
``answer_roles``, stored here and never recovered by matching strings. Each tag names one group, as BBQ's do:
the stereotyped entity its stereotype's target group, the other entity its own non-target group
(:func:`nonstereo_group`).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from .core.artifacts import StageOutput, count_reasons
from .core.inputs import PAIR_SEPARATOR, swap_roles
from .core.schemas import (
    EXAMPLE,
    EXAMPLE_DROPPED,
    OPTIONS,
    RECORD_VERSION,
    TEMPLATE_DISAMBIGUATED,
    UNKNOWN_GROUP,
    group_tag,
)
from .core.soundness import manifest_warnings, unsound_drops
from .core.stage import SEED, Separable, Stage, Table
from .review.apply import REJECTED, UNREVIEWED
from .text.cues import (
    entity_age_band,
    entity_maturity,
    entity_number,
    entity_role,
    entity_statuses,
    pair_confound,
)
from .text.languages import language
from .text.languages.fa import normalize_fa

ROLE_NAMES = {"stereo": "stereotyped", "nonstereo": "non-stereotyped", "unknown": "unknown"}
PERMUTATIONS: tuple[tuple[str, str, str], ...] = tuple(itertools.permutations(("stereo", "nonstereo", "unknown"), 3))
ANSWER_ROLES = {
    roles: {option: ROLE_NAMES[role] for option, role in zip(OPTIONS, roles, strict=True)} for roles in PERMUTATIONS
}
"""BBQ's ``answer_roles`` record of each order of the three roles (one record, shared by the examples of that order)."""
DUPLICATE_KEY = ["context", "question", "ans0", "ans1", "ans2"]
DROPPED_PAIR = pa.schema(
    [
        ("template_id", pa.string()),
        ("category", pa.string()),
        ("stereo_entity", pa.string()),
        ("nonstereo_entity", pa.string()),
        ("stereo_gender", pa.string()),
        ("nonstereo_gender", pa.string()),
        ("stereo_age_band", pa.string()),
        ("nonstereo_age_band", pa.string()),
        ("stereo_maturity", pa.string()),
        ("nonstereo_maturity", pa.string()),
        ("stereo_number", pa.string()),
        ("nonstereo_number", pa.string()),
        ("stereo_role", pa.string()),
        ("nonstereo_role", pa.string()),
        ("stereo_statuses", pa.string()),
        ("nonstereo_statuses", pa.string()),
        ("reason", pa.string()),
    ]
)
"""A pair the confound gate did not build, with the cues that decided it."""


@dataclass(frozen=True)
class InstantiateParams:
    unknown_phrases: tuple[str, ...]
    """The Persian 'unknown' phrasings an example draws its third option from (annotations/unknown_phrases.csv)."""
    seed: int = 42


NOT_TARGET = "غیر"
"""The prefix of the tag of a non-stereotyped entity whose own group the stereotype does not name."""
_PLURAL = re.compile("(?:\u200cهای|\u200cها|ها|یان|ان)$")


def _words(phrase: str) -> set[str]:
    """The words of a Persian phrase, an ezafe ending dropped ('راننده‌ی' → 'راننده')."""
    return {word.removesuffix("\u200cی") for word in normalize_fa(phrase).split()}


def _forms(group: str) -> set[str]:
    """The words of a group's name and their singulars ('رانندگان' → 'راننده', 'حسابداران' → 'حسابدار')."""
    forms = set()
    for word in _words(group):
        stem = _PLURAL.sub("", word)
        forms |= {word, stem[:-1] + "ه" if word.endswith("گان") else stem}
    return forms


def nonstereo_group(entity: str, stereo_entities: Iterable[str], target: str, groups: Sequence[str]) -> str:
    """The non-target group a non-stereotyped entity belongs to (BBQ tags each entity with its own group): the only
    one, or the one that shares most of the entity's distinguishing words (those no stereotyped entity of the
    template has: in 'زن مبتلا به بیماری قلبی' against 'زن مبتلا به اچ‌آی‌وی', 'بیماری قلبی' picks «بیماران
    قلبی»). When no single group is picked, the entity is tagged as not of the target group («غیر سالمندان»)."""
    if len(groups) == 1:
        return groups[0]
    words = _words(entity).difference(*(_words(other) for other in stereo_entities))
    scores = [len(words & _forms(group)) for group in groups]
    best = max(scores)
    if best and scores.count(best) == 1:
        return groups[scores.index(best)]
    return f"{NOT_TARGET} {target}"


def _fill(text: str, stereo: str, nonstereo: str, lex: str) -> str:
    return text.replace("{stereo}", stereo).replace("{nonstereo}", nonstereo).replace("{lex}", lex)


def _entity_order(ambiguous: str) -> str:
    return "stereo_first" if ambiguous.index("{stereo}") < ambiguous.index("{nonstereo}") else "nonstereo_first"


def _template_rng(seed: int, template_id: str) -> np.random.Generator:
    """A generator that depends on the seed and the template only, so a template's examples do not change
    when other templates are added or removed."""
    return np.random.default_rng([seed, int(hashlib.sha256(template_id.encode()).hexdigest()[:8], 16)])


def answer_role(context_condition: str, assignment: str, polarity: str) -> str:
    """The role of the correct answer (PBBQ §3.3.1–§3.3.2): 'unknown' in an ambiguous context; in a biased
    disambiguated context the stereotyped entity answers the negative question, in a counter-biased one the
    non-stereotyped entity does; the non-negative question is answered by the other entity."""
    if context_condition == "ambig":
        return "unknown"
    negative_answer = "stereo" if assignment == "biased" else "nonstereo"
    if polarity == "neg":
        return negative_answer
    return "nonstereo" if negative_answer == "stereo" else "stereo"


def _cells(template: pd.Series) -> list[tuple[str, str, str, str]]:
    """(context_condition, assignment, polarity, continuation) of one template, in a fixed order."""
    cells = [("ambig", "none", polarity, "") for polarity in ("neg", "nonneg")]
    for assignment, column in (("biased", "disambiguated_fa"), ("counter_biased", "disambiguated_counter_biased_fa")):
        cells += [("disambig", assignment, polarity, template[column]) for polarity in ("neg", "nonneg")]
    return cells


@dataclass(frozen=True)
class Groups:
    """A stereotype's groups, which tag a template's options and fill its ``additional_metadata``."""

    target: str
    non_target: tuple[str, ...]
    source: str

    @classmethod
    def of(cls, stereotype: pd.Series) -> Groups:
        return cls(
            target=stereotype.target_group,
            non_target=tuple(stereotype.non_target_groups),
            source=f"{stereotype.stereotype_id} ({stereotype.source})",
        )

    def tags(self, nonstereo: str, stereo_entities: Iterable[str]) -> dict[str, str]:
        """The tag of each role of an example whose non-stereotyped entity is ``nonstereo``."""
        other = nonstereo_group(nonstereo, stereo_entities, self.target, self.non_target)
        return {"stereo": group_tag(self.target), "nonstereo": group_tag(other), "unknown": UNKNOWN_GROUP}


def _pair_cues(side: str, entity: str) -> dict[str, str]:
    """The cues of one side of a dropped pair, as ``dropped_pairs`` shows them (statuses joined by ``/``)."""
    return {
        f"{side}_gender": language("fa").entity_gender(entity),
        f"{side}_age_band": entity_age_band(entity, "fa"),
        f"{side}_maturity": entity_maturity(entity, "fa"),
        f"{side}_number": entity_number(entity, "fa"),
        f"{side}_role": entity_role(entity, "fa"),
        f"{side}_statuses": "/".join(sorted(entity_statuses(entity, "fa"))),
    }


def template_pairs(template: pd.Series) -> tuple[list[tuple[str, str]], list[dict], list[dict]]:
    """The entity pairs of a template that the confound gate builds, the pairs it drops (rows of
    ``dropped_pairs``) and the confounded pairs that ``allowed_pairs`` keeps, with their reasons."""
    allowed = {tuple(item.split(PAIR_SEPARATOR)[:2]): item.split(PAIR_SEPARATOR)[2] for item in template.allowed_pairs}
    built, dropped, kept = [], [], []
    for stereo, nonstereo in itertools.product(template.stereo_entities, template.nonstereo_entities):
        reason = pair_confound(stereo, nonstereo, template.category, "fa")
        if reason is None:
            built.append((stereo, nonstereo))
        elif (stereo, nonstereo) in allowed:
            built.append((stereo, nonstereo))
            kept.append({"template_id": template.template_id, "stereo_entity": stereo, "nonstereo_entity": nonstereo,
                         "confound": reason, "reason": allowed[(stereo, nonstereo)]})  # fmt: skip
        else:
            dropped.append(
                {
                    "template_id": template.template_id,
                    "category": template.category,
                    "stereo_entity": stereo,
                    "nonstereo_entity": nonstereo,
                    **_pair_cues("stereo", stereo),
                    **_pair_cues("nonstereo", nonstereo),
                    "reason": reason,
                }
            )
    return built, dropped, kept


def template_examples(
    template: pd.Series, pairs: list[tuple[str, str]], groups: Groups, params: InstantiateParams
) -> list[dict]:
    """All examples of one template's built pairs, |pairs| × |lex| × 12 of them. The template's fields, the tags of
    each non-stereotyped entity and the 'unknown' phrasings (one draw of the template's stream for all its
    examples, the same phrasings one draw each would give) are taken once, not per example."""
    rng = _template_rng(params.seed, template.template_id)
    cells = _cells(template)
    cycles = {cell[:3]: (rng.permutation(len(PERMUTATIONS)), int(rng.integers(len(PERMUTATIONS)))) for cell in cells}
    counters = dict.fromkeys(cycles, 0)
    template_id, stereo_entities = template.template_id, template.stereo_entities
    questions = {"neg": template.question_negative_fa, "nonneg": template.question_nonnegative_fa}
    common = {
        "template_id": template_id,
        "stereotype_id": template.stereotype_id,
        "category": template.category,
        "question_index": template_id,
        "additional_metadata": {
            "subcategory": "None",
            "stereotyped_groups": [group_tag(groups.target)],
            "version": RECORD_VERSION,
            "source": groups.source,
        },
        "lang": "fa",
        "variant": "original",
        "source_example_id": None,
        "llm_request_ids": list(template.get("llm_request_ids", []) or []),
    }
    variants = list(template.lexical_variants) or [""]
    orders = [(text, _entity_order(text)) for text in (template.ambiguous_fa, swap_roles(template.ambiguous_fa))]
    unknowns = iter(
        rng.choice(np.array(params.unknown_phrases), size=len(pairs) * len(variants) * 2 * len(cells)).tolist()
    )
    tags: dict[str, dict[str, str]] = {}
    rows = []
    for (stereo, nonstereo), lex in itertools.product(pairs, variants):
        if nonstereo not in tags:
            tags[nonstereo] = groups.tags(nonstereo, stereo_entities)
        tag = tags[nonstereo]
        for ambiguous_template, order in orders:
            ambiguous = _fill(ambiguous_template, stereo, nonstereo, lex)
            for condition, assignment, polarity, continuation in cells:
                context = (
                    ambiguous if condition == "ambig" else f"{ambiguous} {_fill(continuation, stereo, nonstereo, lex)}"
                )
                cell = (condition, assignment, polarity)
                order_cycle, start = cycles[cell]
                roles = PERMUTATIONS[order_cycle[(start + counters[cell]) % len(PERMUTATIONS)]]
                counters[cell] += 1
                texts = {"stereo": stereo, "nonstereo": nonstereo, "unknown": next(unknowns)}
                options = [texts[role] for role in roles]
                key = "|".join([template_id, stereo, nonstereo, lex, order, condition, assignment, polarity])
                rows.append(
                    {
                        **common,
                        "example_id": f"{template_id}-{hashlib.sha256(key.encode()).hexdigest()[:12]}",
                        "question_polarity": polarity,
                        "context_condition": condition,
                        "context": context,
                        "question": questions[polarity],
                        **dict(zip(OPTIONS, options, strict=True)),
                        "label": roles.index(answer_role(condition, assignment, polarity)),
                        "answer_info": {
                            option: [text, tag[role]]
                            for option, text, role in zip(OPTIONS, options, roles, strict=True)
                        },
                        "answer_roles": ANSWER_ROLES[roles],
                        "target_loc": roles.index("stereo"),
                        "assignment": assignment,
                        "entity_order": order,
                        "stereo_entity": stereo,
                        "nonstereo_entity": nonstereo,
                        "lexical_variant": lex,
                    }
                )
    return rows


ALLOWED_PAIR = ["template_id", "stereo_entity", "nonstereo_entity", "confound", "reason"]
"""A confounded pair a template's ``allowed_pairs`` keeps, and why (the report's ``allowed_pairs``)."""


REVIEW_REASONS = (REJECTED, UNREVIEWED)
"""Why a review round left a template's continuation out."""


def _complete(templates: pd.DataFrame) -> pd.Series:
    """The templates with both disambiguated continuations: those that are instantiated."""
    return (templates["disambiguated_fa"] != "") & (templates["disambiguated_counter_biased_fa"] != "")


def template_tables(
    templates: pd.DataFrame, stereotypes: pd.DataFrame, params: InstantiateParams
) -> dict[str, pd.DataFrame]:
    """The work of the stage per template, in template order: every example of the pairs the confound gate builds,
    the pairs it drops and those ``allowed_pairs`` keeps. A template's rows depend on it alone (its own random
    stream, :func:`_template_rng`), so the rows of several templates are the concatenation of each one's."""
    groups = {row.stereotype_id: Groups.of(row) for row in stereotypes.itertuples()}
    rows, dropped_pairs, allowed_pairs = [], [], []
    for _, template in templates[_complete(templates)].sort_values("template_id").iterrows():
        pairs, dropped, kept = template_pairs(template)
        dropped_pairs += dropped
        allowed_pairs += kept
        rows += template_examples(template, pairs, groups[template.stereotype_id], params)
    return {
        "examples": pd.DataFrame(rows, columns=EXAMPLE.names),
        "dropped_pairs": pd.DataFrame(dropped_pairs, columns=DROPPED_PAIR.names),
        "allowed_pairs": pd.DataFrame(allowed_pairs, columns=ALLOWED_PAIR),
    }


def checked_examples(
    parts: Mapping[str, pd.DataFrame], templates: pd.DataFrame, stereotypes: pd.DataFrame, params: InstantiateParams
) -> StageOutput:
    """The stage's output from every template's tables (:func:`template_tables`): the checks across templates
    (exact duplicate examples, and any unsound example, a placeholder left unfilled, two options alike or one
    entity twice, dropped with their reason: :func:`~pbbq.tasks.core.soundness.unsound_drops`, also named in the
    run's manifest), the templates without continuations and the report."""
    complete = _complete(templates)
    left_out = templates[~complete]
    # a review round's reject, or no decision under [review] require, says so (tasks/review); else no continuation
    sources = left_out.get("disambiguated_source", pd.Series("", index=left_out.index, dtype=object))
    reviewed = sources.where(sources.isin(REVIEW_REASONS), "no_disambiguated_context")
    dropped_templates = left_out.assign(kept=False, reason=reviewed)
    examples, pairs_table = parts["examples"], parts["dropped_pairs"]
    sound, unsound = unsound_drops(examples)
    duplicated = examples.duplicated(DUPLICATE_KEY, keep="first") & sound
    dropped_examples = pd.concat([unsound, examples[duplicated].assign(reason="duplicate_example")])
    examples = examples[sound & ~duplicated].reset_index(drop=True)
    per_template = examples.groupby("template_id").size()
    reasons = pd.concat([dropped_templates["reason"], pairs_table["reason"], dropped_examples["reason"]])
    report = {
        "stage": "instantiate",
        "parameters": asdict(params),
        "counts": {
            "in": len(templates),
            "out": len(examples),
            "templates_instantiated": int(complete.sum()),
            "pairs_built": int(
                examples[["template_id", "stereo_entity", "nonstereo_entity"]].drop_duplicates().shape[0]
            ),
            "pairs_dropped": len(pairs_table),
        },
        "dropped": {"total": len(reasons), "by_reason": count_reasons(reasons)},
        "drops": [
            {"template_id": t, "reason": r}
            for t, r in zip(dropped_templates["template_id"], dropped_templates["reason"], strict=True)
        ]
        + [
            {"template_id": r.template_id, "pair": f"{r.stereo_entity} / {r.nonstereo_entity}", "reason": r.reason}
            for r in pairs_table.itertuples()
        ]
        + [
            {"example_id": e, "reason": r}
            for e, r in zip(dropped_examples["example_id"], dropped_examples["reason"], strict=True)
        ],
        "allowed_pairs": parts["allowed_pairs"].to_dict(orient="records"),
        "examples_per_template": {str(k): int(v) for k, v in per_template.items()},
    }
    warnings = manifest_warnings(unsound)
    if warnings:
        report["manifest_warnings"] = warnings
    return StageOutput(
        tables={
            "examples": examples,
            "dropped_examples": dropped_examples,
            "dropped_pairs": pairs_table,
            "dropped_templates": dropped_templates,
        },
        schemas={
            "examples": EXAMPLE,
            "dropped_examples": EXAMPLE_DROPPED,
            "dropped_pairs": DROPPED_PAIR,
            "dropped_templates": TEMPLATE_DISAMBIGUATED,
        },
        report=report,
    )


def instantiate(templates: pd.DataFrame, stereotypes: pd.DataFrame, params: InstantiateParams) -> StageOutput:
    """Examples of every gated template that has both disambiguated continuations, from the pairs the confound
    gate builds. Templates without continuations, confounded pairs, exact duplicate examples and (a check of
    the build) any unsound example are dropped, each with its reason."""
    return checked_examples(template_tables(templates, stereotypes, params), templates, stereotypes, params)


STAGE = Stage(
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
    per=Separable("template_id", ("templates",), template_tables, checked_examples),
)
