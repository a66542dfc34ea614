"""Instantiation: fill every gated template into BBQ-compatible examples (PBBQ §3.3, §3.4, Table 1).

For each stereotyped × non-stereotyped entity pair and each lexical variant, both orders of mention (the two
placeholders of the ambiguous context exchanged), and:

- the ambiguous context with the negative and the non-negative question (the answer is 'unknown');
- the ambiguous context followed by the disambiguated continuation in both answer assignments: *biased*, the
  stereotyped entity answers the negative question, and *counter-biased*, the other entity does; each with
  both questions.

That is 2 orders × (2 + 4) = 12 examples per pair and variant. The three options are the two entities and an
'unknown' phrasing drawn from a list; their order is a seeded cycle through the six permutations of the three
roles within each (condition, assignment, polarity) cell of a template, so each role, and the label, sits at
each position about a third of the time (cyclic permutation of options, PakBBQ §3.4).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from tasks.artifacts import StageOutput, count_reasons
from tasks.caching import stage_task
from tasks.schemas import EXAMPLE, TEMPLATE_DISAMBIGUATED

ROLE_KEYS = {"stereo": "stereotyped", "nonstereo": "non-stereotyped", "unknown": "unknown"}
PERMUTATIONS: tuple[tuple[str, str, str], ...] = tuple(itertools.permutations(("stereo", "nonstereo", "unknown")))
DUPLICATE_KEY = ["context", "question", "ans0", "ans1", "ans2"]
EXAMPLE_DROPPED = EXAMPLE.append(pa.field("reason", pa.string()))
EXAMPLES_PER_PAIR = 12


@dataclass(frozen=True)
class InstantiateParams:
    unknown_phrases: tuple[str, ...]
    """The Persian 'unknown' phrasings an example draws its third option from (annotations/unknown_phrases.csv)."""
    seed: int = 42


def _swap_roles(text: str) -> str:
    """The same text with ``{stereo}`` and ``{nonstereo}`` exchanged: the other order of mention."""
    return re.sub(r"\{(stereo|nonstereo)\}", lambda m: "{nonstereo}" if m.group(1) == "stereo" else "{stereo}", text)


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
    for assignment, column in (
        ("biased", "disambiguated_biased_fa"),
        ("counter_biased", "disambiguated_counter_biased_fa"),
    ):
        cells += [("disambig", assignment, polarity, template[column]) for polarity in ("neg", "nonneg")]
    return cells


def template_examples(template: pd.Series, params: InstantiateParams) -> list[dict]:
    """All examples of one template, |stereo| × |nonstereo| × |lex| × 12 of them."""
    rng = _template_rng(params.seed, template.template_id)
    cells = _cells(template)
    cycles = {cell[:3]: (rng.permutation(len(PERMUTATIONS)), int(rng.integers(len(PERMUTATIONS)))) for cell in cells}
    counters = dict.fromkeys(cycles, 0)
    questions = {"neg": template.question_negative_fa, "nonneg": template.question_nonnegative_fa}
    variants = list(template.lexical_variants) or [""]
    rows = []
    for stereo, nonstereo, lex in itertools.product(template.stereo_entities, template.nonstereo_entities, variants):
        for ambiguous_template in (template.ambiguous_fa, _swap_roles(template.ambiguous_fa)):
            ambiguous = _fill(ambiguous_template, stereo, nonstereo, lex)
            order = _entity_order(ambiguous_template)
            for condition, assignment, polarity, continuation in cells:
                context = (
                    ambiguous if condition == "ambig" else f"{ambiguous} {_fill(continuation, stereo, nonstereo, lex)}"
                )
                order_cycle, start = cycles[(condition, assignment, polarity)]
                roles = PERMUTATIONS[
                    order_cycle[(start + counters[(condition, assignment, polarity)]) % len(PERMUTATIONS)]
                ]
                counters[(condition, assignment, polarity)] += 1
                texts = {"stereo": stereo, "nonstereo": nonstereo, "unknown": str(rng.choice(params.unknown_phrases))}
                key = "|".join([template.template_id, stereo, nonstereo, lex, order, condition, assignment, polarity])
                rows.append(
                    {
                        "example_id": f"{template.template_id}-{hashlib.sha256(key.encode()).hexdigest()[:12]}",
                        "template_id": template.template_id,
                        "stereotype_id": template.stereotype_id,
                        "category": template.category,
                        "question_index": template.template_id,
                        "question_polarity": polarity,
                        "context_condition": condition,
                        "context": context,
                        "question": questions[polarity],
                        "ans0": texts[roles[0]],
                        "ans1": texts[roles[1]],
                        "ans2": texts[roles[2]],
                        "label": roles.index(answer_role(condition, assignment, polarity)),
                        "answer_info": {f"ans{i}": ROLE_KEYS[role] for i, role in enumerate(roles)},
                        "target_loc": roles.index("stereo"),
                        "assignment": assignment,
                        "entity_order": order,
                        "stereo_entity": stereo,
                        "nonstereo_entity": nonstereo,
                        "lexical_variant": lex,
                        "lang": "fa",
                        "variant": "original",
                        "source_example_id": None,
                        "llm_request_ids": list(template.get("llm_request_ids", []) or []),
                    }
                )
    return rows


def instantiate(templates: pd.DataFrame, params: InstantiateParams) -> StageOutput:
    """Examples of every gated template that has both disambiguated continuations; templates without them
    and exact duplicate examples are dropped with their reason."""
    complete = (templates["disambiguated_biased_fa"] != "") & (templates["disambiguated_counter_biased_fa"] != "")
    dropped_templates = templates[~complete].assign(kept=False, reason="no_disambiguated_context")
    rows = [
        row
        for _, template in templates[complete].sort_values("template_id").iterrows()
        for row in template_examples(template, params)
    ]
    examples = pd.DataFrame(rows, columns=EXAMPLE.names)
    duplicated = examples.duplicated(DUPLICATE_KEY, keep="first")
    dropped_examples = examples[duplicated].assign(reason="duplicate_example")
    examples = examples[~duplicated].reset_index(drop=True)
    per_template = examples.groupby("template_id").size()
    report = {
        "stage": "instantiate",
        "parameters": asdict(params),
        "counts": {"in": len(templates), "out": len(examples), "templates_instantiated": int(complete.sum())},
        "dropped": {
            "total": len(dropped_templates) + len(dropped_examples),
            "by_reason": count_reasons(pd.concat([dropped_templates["reason"], dropped_examples["reason"]])),
        },
        "drops": [{"template_id": t, "reason": "no_disambiguated_context"} for t in dropped_templates["template_id"]]
        + [{"example_id": e, "reason": "duplicate_example"} for e in dropped_examples["example_id"]],
        "examples_per_template": {str(k): int(v) for k, v in per_template.items()},
    }
    return StageOutput(
        tables={"examples": examples, "dropped_examples": dropped_examples, "dropped_templates": dropped_templates},
        schemas={"examples": EXAMPLE, "dropped_examples": EXAMPLE_DROPPED, "dropped_templates": TEMPLATE_DISAMBIGUATED},
        report=report,
    )


instantiate_task = stage_task(instantiate)
