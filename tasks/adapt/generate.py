"""BBQ's generation rules, ported from nyu-mll/BBQ (``generate_from_template_all_categories.py``, ``utils.py``),
for the categories it fills from its vocabulary in both orders (``need_stereotyping_subset``).

Per template: NAME1 is each stereotyped group (BBQ: ``Known_stereotyped_groups`` that are in the category's
vocabulary, or for a ``Subcategory`` template the subcategory's groups), NAME2 each group of the category that is
not stereotyped, and every pair is built again with NAME1 and NAME2 exchanged (BBQ's flip). Each filling gives
four examples: the negative and the non-negative question (``Question_negative_stereotype``,
``Question_non_negative``), each on the ambiguous context (answer: 'unknown') and on the ambiguous context
followed by the disambiguating one (answer: ``Answer_negative`` resp. ``Answer_non_negative`` as filled). The
four share one 'unknown' phrasing and one order of the three options (``create_templating_dicts``).

Where BBQ draws at random without a seed, this port enumerates or rotates: it builds every stereotyped group
with every other group (BBQ samples 5 of each when there are more) and every combination of the
``Lexical_diversity`` words (BBQ draws one per pair), and it rotates BBQ's ten 'unknown' phrasings through a
template's fillings and the six option orders through its pairs (both fillings of a pair, the two assignments,
share one order), so within each assignment and question the label sits at each position equally often over a
cycle; each rotation starts at a point given by the template's id.

Text is filled as BBQ's ``do_slotting`` fills it: ``{{NAME1}}``/``{{NAME2}}``/``{{WORD1}}``/``{{WORD2}}`` in every
field, its two fixed corrections ('lesbian man', 'Latino woman'), and 'a' → 'an' before a vowel when a filled
group starts with one (its regular expression, with its exception 'a European').
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from ..core.schemas import EXAMPLE, OPTIONS, RECORD_VERSION, UNKNOWN_GROUP, group_tag
from .bbq_format import TEXT_FIELDS, parse_lexical_diversity

BBQ_UNKNOWN = (
    "Unknown",
    "Cannot be determined",
    "Can't be determined",
    "Not answerable",
    "Not known",
    "Not enough info",
    "Not enough information",
    "Cannot answer",
    "Can't answer",
    "Undetermined",
)
"""BBQ's 'unknown' phrasings (``unknown_options`` of its generator), in its order."""
BBQ_FIXES = (("lesbian man", "lesbian woman"), ("Latino woman", "Latina woman"))
"""The corrections BBQ's ``do_slotting`` makes after filling."""
_A_BEFORE_VOWEL = re.compile(r"(\s[aA])(\s[aAeEiIoOuU])")
ORDERS: tuple[tuple[str, str, str], ...] = tuple(itertools.permutations(("neg", "nonneg", "unknown")))
"""The six orders of the three options: the negative answer, the non-negative one, 'unknown'."""
ROLE_NAMES = {"stereo": "stereotyped", "nonstereo": "non-stereotyped", "unknown": "unknown"}
CELLS = (("neg", "ambig"), ("neg", "disambig"), ("nonneg", "ambig"), ("nonneg", "disambig"))
"""The four examples of a filling, in BBQ's order."""


@dataclass(frozen=True)
class AdaptInstantiateParams:
    unknown_phrases: tuple[str, ...] = BBQ_UNKNOWN
    """The 'unknown' option's phrasings, rotated through a template's fillings."""


def fill(text: str, name1: str, name2: str, words: dict[str, str]) -> str:
    """One field of a template filled as BBQ's ``do_slotting`` fills it."""
    text = text.replace("{{NAME1}}", name1).replace("{{NAME2}}", name2)
    for slot, word in words.items():
        text = text.replace("{{" + slot + "}}", word)
    for wrong, right in BBQ_FIXES:
        text = text.replace(wrong, right)
    if any(re.match("[aeiou]", name.lower()) for name in (name1, name2)):
        text = _A_BEFORE_VOWEL.sub(r"\1n\2", text).replace(" an European", " a European")
    return text


def lexical_variants(value: str) -> list[dict[str, str]]:
    """Every combination of the ``Lexical_diversity`` words (``[{}]`` without any)."""
    lists = parse_lexical_diversity(value)
    return [dict(zip(lists, combination, strict=True)) for combination in itertools.product(*lists.values())]


def pairs(template: pd.Series, vocabulary: pd.DataFrame) -> list[tuple[str, str]]:
    """(stereotyped group, other group) of a template: its own ``other_groups`` when it gives them, else the
    category's vocabulary groups that are not stereotyped (BBQ's ``new_word_list``). The stereotyped groups of a
    template from BBQ's file (``restricted``) are those in the vocabulary, as BBQ's ``targeted_word_list``."""
    words = vocabulary[vocabulary["Category"] == template.category]
    names = list(dict.fromkeys(words["Name"]))
    stereotyped = list(template.stereotyped_groups)
    if template.subcategory:
        targets = list(dict.fromkeys(words.loc[words["SubCat"] == template.subcategory, "Name"]))
    elif template.restricted:
        targets = [name for name in names if name in stereotyped]
    else:
        targets = stereotyped
    others = list(template.other_groups) or [name for name in names if name not in stereotyped]
    return [(target, other) for target in targets for other in others if other != target]


def _start(template_id: str) -> int:
    """Where a template's rotations start: from its id, so that templates with fewer fillings than a full cycle do
    not all favour the first orders, and a template's examples do not depend on the others."""
    return int(hashlib.sha256(template_id.encode()).hexdigest()[:8], 16)


def _slot_of_negative(template: pd.Series) -> str:
    return "NAME1" if "{{NAME1}}" in template.answer_negative else "NAME2"


def template_examples(template: pd.Series, vocabulary: pd.DataFrame, params: AdaptInstantiateParams) -> list[dict]:
    """All examples of one adapted template (rows of the EXAMPLE schema, ``lang`` = ``en``)."""
    metadata = {
        "subcategory": template.subcategory or "None",
        "stereotyped_groups": [group_tag(group) for group in template.stereotyped_groups],
        "version": RECORD_VERSION,
        "source": template.source,
    }
    negative_slot = _slot_of_negative(template)
    first_slot = "NAME1" if template.ambiguous.index("{{NAME1}}") < template.ambiguous.index("{{NAME2}}") else "NAME2"
    rows: list[dict] = []
    fillings = itertools.product(pairs(template, vocabulary), lexical_variants(template.lexical_diversity), (0, 1))
    start = _start(template.template_id)
    for turn, ((stereo, other), words, flipped) in enumerate(fillings):
        slots = {"NAME1": other, "NAME2": stereo} if flipped else {"NAME1": stereo, "NAME2": other}
        texts = {field: fill(template[field], slots["NAME1"], slots["NAME2"], words) for field in TEXT_FIELDS}
        negative_role = "stereo" if slots[negative_slot] == stereo else "nonstereo"
        roles = {"neg": negative_role, "nonneg": "nonstereo" if negative_role == "stereo" else "stereo"}
        order = ORDERS[(start + turn // 2) % len(ORDERS)]
        unknown = params.unknown_phrases[(start + turn) % len(params.unknown_phrases)]
        options = {"neg": texts["answer_negative"], "nonneg": texts["answer_non_negative"], "unknown": unknown}
        role_of = {**roles, "unknown": "unknown"}
        tags = {"stereo": group_tag(stereo), "nonstereo": group_tag(other), "unknown": UNKNOWN_GROUP}
        lexical = "; ".join(f"{slot}: {word}" for slot, word in words.items())
        for polarity, condition in CELLS:
            ambiguous = texts["ambiguous"].strip()
            context = ambiguous if condition == "ambig" else f"{ambiguous} {texts['disambiguating']}".strip()
            answer = "unknown" if condition == "ambig" else polarity
            key = "|".join([template.template_id, stereo, other, lexical, str(flipped), polarity, condition])
            rows.append(
                {
                    "example_id": f"{template.template_id}-{hashlib.sha256(key.encode()).hexdigest()[:12]}",
                    "template_id": template.template_id,
                    "stereotype_id": template.template_id,
                    "category": template.category,
                    "question_index": template.question_index,
                    "question_polarity": polarity,
                    "context_condition": condition,
                    "context": context,
                    "question": texts[f"question_{'negative' if polarity == 'neg' else 'non_negative'}"].strip(),
                    **{option: options[kind] for option, kind in zip(OPTIONS, order, strict=True)},
                    "label": order.index(answer),
                    "answer_info": {
                        option: [options[kind], tags[role_of[kind]]]
                        for option, kind in zip(OPTIONS, order, strict=True)
                    },
                    "additional_metadata": metadata,
                    "answer_roles": {
                        option: ROLE_NAMES[role_of[kind]] for option, kind in zip(OPTIONS, order, strict=True)
                    },
                    "target_loc": [role_of[kind] for kind in order].index("stereo"),
                    "assignment": "none"
                    if condition == "ambig"
                    else ("biased" if negative_role == "stereo" else "counter_biased"),
                    "entity_order": "stereo_first" if slots[first_slot] == stereo else "nonstereo_first",
                    "stereo_entity": stereo,
                    "nonstereo_entity": other,
                    "lexical_variant": lexical,
                    "lang": "en",
                    "variant": "original",
                    "source_example_id": None,
                    "llm_request_ids": [],
                }
            )
    return rows


def examples_of(templates: pd.DataFrame, vocabulary: pd.DataFrame, params: AdaptInstantiateParams) -> pd.DataFrame:
    """The examples of every template, in template order."""
    rows: Iterator[dict] = itertools.chain.from_iterable(
        template_examples(template, vocabulary, params) for _, template in templates.iterrows()
    )
    return pd.DataFrame(list(rows), columns=EXAMPLE.names)
