"""BBQ's generation rules, ported from nyu-mll/BBQ (``generate_from_template_all_categories.py``, ``utils.py``).

Categories BBQ fills from its vocabulary in both orders (``need_stereotyping_subset``), per template: NAME1 is each
stereotyped group (BBQ: ``Known_stereotyped_groups`` that are in the category's
vocabulary, or for a ``Subcategory`` template the subcategory's groups), NAME2 each group of the category that is
not stereotyped, and every pair is built again with NAME1 and NAME2 exchanged (BBQ's flip). Each filling gives
four examples: the negative and the non-negative question (``Question_negative_stereotype``,
``Question_non_negative``), each on the ambiguous context (answer: 'unknown') and on the ambiguous context
followed by the disambiguating one (answer: ``Answer_negative`` resp. ``Answer_non_negative`` as filled). The
four share one 'unknown' phrasing and one order of the three options (``create_templating_dicts``).

The other categories (:data:`~pbbq.tasks.adapt.bbq_format.NAMED_CATEGORIES`), as the generator's main loop fills
them (:func:`fillings`): a template's ``Names`` lists, when it has them, give NAME1 and NAME2 (every word of the
first with every word of the second; they override the vocabulary, as in BBQ); else the category's vocabulary
words (within the template's ``Subcategory``) are paired with each other, for SES only across the low/high
contrast (a word with the other ``Info``); a ``Proper_nouns_only`` template pairs BBQ's first names that do not
identify an ethnicity (``First_last = first_only``), for Gender_identity a woman's with a man's, and for
Race_ethnicity a full name of a stereotyped ethnicity with one of the same gender and another ethnicity
(:func:`ethnic_name_fillings`). The pair is also built exchanged for a proper-name template and for SES's Occupation
templates. Which of the two is the stereotyped one: the slot whose ``NAME1_info``/``NAME2_info`` is a
``Known_stereotyped_groups`` group when the template gives them, else the word whose group (vocabulary ``Info``, a
name's gender, 'woman' → F) is. A pair where neither or both are (Gender_identity-13 pairs 'man' with 'boy') is no
bias contrast and is not built.

Race_x_gender and Race_x_SES, BBQ's second generator (a race and a second attribute per slot), take their pairs
from :func:`pbbq.tasks.adapt.intersectional.contrasts`, each built in both orders.

Where BBQ draws at random without a seed, this port enumerates or rotates: it builds every stereotyped group
with every other group and every first name with every other (BBQ samples 5 or 6 when there are more) and every
combination of the
``Lexical_diversity`` words (BBQ draws one per pair), and it rotates BBQ's ten 'unknown' phrasings through a
template's fillings and the six option orders through its pairs (both fillings of a pair, the two assignments,
share one order), so within each assignment and question the label sits at each position equally often over a
cycle; each rotation starts at a point given by the template's id.

Text is filled as BBQ's ``do_slotting`` fills it: ``{{NAME1}}``/``{{NAME2}}``/``{{WORD1}}``/``{{WORD2}}`` in every
field, its two fixed corrections ('lesbian man'; 'Latino woman', here for every word of a woman or girl after
'Latino', and in the entities the metadata names too), and 'a' → 'an' before a vowel when a filled group starts
with one (its regular expression, with its exception 'a European', and also after a parenthesis).

Race_x_gender and Race_x_SES only: a pair of entities whose gender a gendered pronoun of the template contradicts
(:func:`pbbq.tasks.adapt.intersectional.pronoun_genders`; BBQ builds these) is built in neither order, its
examples dropped as ``pronoun_gender_clash``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import pandas as pd

from ..core.schemas import EXAMPLE_DROPPED, OPTIONS, RECORD_VERSION, UNKNOWN_GROUP, group_tag
from .bbq_format import (
    BBQ_GENDER_WORDS,
    PAIRED_CATEGORIES,
    TEXT_FIELDS,
    is_stereotyped,
    parse_lexical_diversity,
    parse_names,
)
from .intersectional import PRONOUN_GENDER_CLASH, RACE_CATEGORY, contrasts, pronoun_clash, pronoun_genders
from .intersectional_format import INTERSECTIONAL_CATEGORIES

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
BBQ_FIXES = (("lesbian man", "lesbian woman"),)
"""The corrections BBQ's ``do_slotting`` makes after filling (its other one, 'Latino woman', is :data:`_LATINA`)."""
_LATINA = re.compile(r"\bLatino(?= (?:wom[ae]n|girls?|lad(?:y|ies)|mothers?|wi(?:fe|ves)|daughters?|sisters?)\b)")
"""BBQ's 'Latino woman' → 'Latina woman', for every word of a woman or girl BBQ's templates put after a race."""
_A_BEFORE_VOWEL = re.compile(r"([\s(][aA])(\s[aAeEiIoOuU])")
"""BBQ's 'a' → 'an' rule, also for an 'a' after a parenthesis ('(an optometrist'), which BBQ's misses."""
ORDERS: tuple[tuple[str, str, str], ...] = tuple(itertools.permutations(("neg", "nonneg", "unknown"), 3))
"""The six orders of the three options: the negative answer, the non-negative one, 'unknown'."""
ROLE_NAMES = {"stereo": "stereotyped", "nonstereo": "non-stereotyped", "unknown": "unknown"}
ANSWER_ROLES = {
    roles: {option: ROLE_NAMES[role] for option, role in zip(OPTIONS, roles, strict=True)}
    for roles in itertools.permutations(ROLE_NAMES)
}
"""BBQ's ``answer_roles`` record of each order of the three roles: one record, shared by the examples of that order."""
SLOT_NAMES = ("NAME1", "NAME2")
CELLS = (("neg", "ambig"), ("neg", "disambig"), ("nonneg", "ambig"), ("nonneg", "disambig"))
"""The four examples of a filling, in BBQ's order."""
BATCH_ROWS = 20_000
"""Examples made as Python dicts before they are converted to Arrow (:func:`examples_of`)."""


@dataclass(frozen=True)
class AdaptInstantiateParams:
    unknown_phrases: tuple[str, ...] = BBQ_UNKNOWN
    """The 'unknown' option's phrasings, rotated through a template's fillings."""


def fill(text: str, name1: str, name2: str, words: dict[str, str], attributes: tuple[str, str] = ("", "")) -> str:
    """One field of a template filled as BBQ's ``do_slotting`` fills it; ``attributes``: the second attribute's
    words of NAME1 and NAME2 (Race_x_gender, Race_x_SES: ``{{GEN1}}``/``{{OCC1}}``, ``{{GEN2}}``/``{{OCC2}}``)."""
    text = text.replace("{{NAME1}}", name1).replace("{{NAME2}}", name2)
    for index, attribute in enumerate(attributes, 1):
        if attribute:
            text = text.replace(f"{{{{GEN{index}}}}}", attribute).replace(f"{{{{OCC{index}}}}}", attribute)
    for slot, word in words.items():
        text = text.replace("{{" + slot + "}}", word)
    text = corrected(text)
    if any(re.match("[aeiou]", name.lower()) for name in (name1, name2, *attributes)):
        text = _A_BEFORE_VOWEL.sub(r"\1n\2", text).replace(" an European", " a European")
    return text


def corrected(text: str) -> str:
    """``text`` with BBQ's corrections (:data:`BBQ_FIXES`, :data:`_LATINA`): of a filled field, and of an entity's
    words, so that the entity the metadata names is the one the text names."""
    for wrong, right in BBQ_FIXES:
        text = text.replace(wrong, right)
    return _LATINA.sub("Latina", text)


def lexical_variants(value: str) -> Iterator[dict[str, str]]:
    """Every combination of the ``Lexical_diversity`` words (one empty one without any), one at a time."""
    lists = parse_lexical_diversity(value)
    return (dict(zip(lists, combination, strict=True)) for combination in itertools.product(*lists.values()))


def lexical_variant_count(value: str) -> int:
    """How many combinations :func:`lexical_variants` gives, without making them."""
    return math.prod(len(words) for words in parse_lexical_diversity(value).values())


class Estimate(NamedTuple):
    """How many examples a template builds, before building them: its fillings (every pair of groups in the
    orders BBQ builds it), its lexical variants and the four examples of each."""

    fillings: int
    lexical_variants: int

    @property
    def examples(self) -> int:
        return self.fillings * self.lexical_variants * len(CELLS)

    def __str__(self) -> str:
        return (
            f"{self.examples:,} examples ({self.fillings:,} pairs in their orders × {self.lexical_variants:,} "
            f"lexical variants × {len(CELLS)})"
        )


def estimate(template: pd.Series, vocabulary: pd.DataFrame, proper_names: pd.DataFrame) -> Estimate:
    """:class:`Estimate` of one template: its fillings are made (as many as the vocabulary's pairs), its lexical
    variants only counted (their product is what a sheet row can blow up)."""
    made = sum(len(unit) for unit in fillings(template, vocabulary, proper_names))
    return Estimate(made, lexical_variant_count(template.lexical_diversity))


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


class Filling(NamedTuple):
    """One filling of a template: the words of NAME1 and NAME2, which slot holds the stereotyped group, the
    groups the two stand for (tagged in ``answer_info``) and, for BBQ's second generator, the words of each one's
    second attribute."""

    name1: str
    name2: str
    stereo_slot: str
    stereo_group: str
    other_group: str
    attribute1: str = ""
    attribute2: str = ""

    @property
    def groups(self) -> tuple[str, str]:
        """The groups of NAME1 and NAME2."""
        pair = (self.stereo_group, self.other_group)
        return pair if self.stereo_slot == "NAME1" else (pair[1], pair[0])

    @property
    def stereo(self) -> str:
        return self._entity(0 if self.stereo_slot == "NAME1" else 1)

    @property
    def other(self) -> str:
        return self._entity(1 if self.stereo_slot == "NAME1" else 0)

    def _entity(self, index: int) -> str:
        """A slot's words: its name, and its second attribute's word after it when it has one."""
        name, attribute = (self.name1, self.attribute1) if index == 0 else (self.name2, self.attribute2)
        return f"{name} {attribute}" if attribute else name


def _stereotyped_group(group: str, stereotyped: list[str]) -> str:
    return next(target for target in stereotyped if is_stereotyped(group, [target]))


def _filling(template: pd.Series, name1: str, name2: str, group_of: dict[str, str]) -> Filling | None:
    """The filling with its stereotyped slot: by the template's ``NAME1_info``/``NAME2_info`` when given (the
    slot's group does not move with the word), else by each word's group; None when not exactly one is
    stereotyped."""
    stereotyped = list(template.stereotyped_groups)
    if template.name1_info:
        groups = (template.name1_info, template.name2_info)
    else:
        groups = (group_of.get(name1, name1), group_of.get(name2, name2))
    marked = [is_stereotyped(group, stereotyped) for group in groups]
    if name1 == name2 or sum(marked) != 1:
        return None
    index = marked.index(True)
    return Filling(name1, name2, SLOT_NAMES[index], _stereotyped_group(groups[index], stereotyped), groups[1 - index])


def ethnic_name_fillings(template: pd.Series, proper_names: pd.DataFrame) -> list[tuple[Filling, ...]]:
    """A Race_ethnicity ``Proper_nouns_only`` template's fillings, by BBQ's rule (its generator's ``cat ==
    "Race_ethnicity" and has_proper_name`` branch): NAME1 a first name (``First_last = first``) whose ethnicity is one
    of the template's ``Known_stereotyped_groups``, NAME2 a first name of the same gender whose ethnicity is not, each
    followed by a last name (``First_last = last``) of its own ethnicity, and the pair built again exchanged. BBQ
    samples five first names on each side and draws each last name at random; this port pairs every two such first
    names and rotates each ethnicity's last names through the names it makes, from :func:`_start`. An ethnicity
    with no last name gives no name. The groups tagged are the ethnicities (BBQ writes ``M-Black``; lm-eval's BBQ
    code reads the ethnicity out of it)."""
    stereotyped = list(template.stereotyped_groups)
    lasts = proper_names[proper_names["First_last"] == "last"]
    last_names = {ethnicity: list(dict.fromkeys(group["Name"])) for ethnicity, group in lasts.groupby("ethnicity")}
    firsts = proper_names[(proper_names["First_last"] == "first") & proper_names["ethnicity"].isin(last_names)]
    marked = firsts["ethnicity"].map(lambda ethnicity: is_stereotyped(ethnicity, stereotyped))
    start = _start(template.template_id)
    rotations = {
        ethnicity: itertools.islice(itertools.cycle(names), start % len(names), None)
        for ethnicity, names in last_names.items()
    }
    units: list[tuple[Filling, ...]] = []
    for target in firsts[marked].itertuples():
        group = _stereotyped_group(target.ethnicity, stereotyped)
        for other in firsts[~marked & (firsts["gender"] == target.gender)].itertuples():
            name1 = f"{target.Name} {next(rotations[target.ethnicity])}"
            name2 = f"{other.Name} {next(rotations[other.ethnicity])}"
            units.append(
                (
                    Filling(name1, name2, "NAME1", group, other.ethnicity),
                    Filling(name2, name1, "NAME2", group, other.ethnicity),
                )
            )
    return units


def fillings(template: pd.Series, vocabulary: pd.DataFrame, proper_names: pd.DataFrame) -> list[tuple[Filling, ...]]:
    """A template's fillings, grouped as BBQ builds them: a filling and, where BBQ flips the pair, the same pair
    exchanged (one group shares an option order). Enumerated where BBQ samples; a pair BBQ would build twice
    (as the flip of another) is built once. Race_x_gender and Race_x_SES: each contrast of
    :func:`pbbq.tasks.adapt.intersectional.contrasts`, in both orders."""
    if template.category in INTERSECTIONAL_CATEGORIES:
        races = pairs(pd.Series({**template.to_dict(), "category": RACE_CATEGORY}), vocabulary)
        return [
            (
                Filling(s.name, o.name, "NAME1", s.group, o.group, s.attribute, o.attribute),
                Filling(o.name, s.name, "NAME2", s.group, o.group, o.attribute, s.attribute),
            )
            for s, o in contrasts(template, races, vocabulary, proper_names, _start(template.template_id))
        ]
    if template.category in PAIRED_CATEGORIES and not template.names and not template.proper_nouns_only:
        return [
            (Filling(target, other, "NAME1", target, other), Filling(other, target, "NAME2", target, other))
            for target, other in pairs(template, vocabulary)
        ]
    if template.category == "Race_ethnicity" and template.proper_nouns_only:
        return ethnic_name_fillings(template, proper_names)
    words = vocabulary[vocabulary["Category"] == template.category]
    if template.subcategory:
        words = words[words["SubCat"] == template.subcategory]
    group_of = {
        name: info or BBQ_GENDER_WORDS.get(name, name) for name, info in zip(words["Name"], words["Info"], strict=True)
    }
    first = list(dict.fromkeys(words["Name"]))
    if template.proper_nouns_only:
        names = proper_names[proper_names["First_last"] == "first_only"]
        group_of = dict(zip(names["Name"], names["gender"], strict=True))
        female = names.loc[names["gender"] == "F", "Name"]
        first = list(dict.fromkeys(female if template.category == "Gender_identity" else names["Name"]))
    second = parse_names(template.names) if template.names else None
    if second is not None and not template.proper_nouns_only:
        first = second[0]

    def partners(word: str) -> list[str]:
        if second is not None:
            return second[1]
        if template.category == "SES" and not template.proper_nouns_only:
            return [name for name in dict.fromkeys(words["Name"]) if group_of[name] != group_of[word]]
        if template.category == "Gender_identity" and template.proper_nouns_only:
            return [name for name, gender in group_of.items() if gender != group_of[word]]
        return [name for name in first if name != word]

    flip = (
        template.category in PAIRED_CATEGORIES
        or template.proper_nouns_only
        or (template.category == "SES" and template.subcategory == "Occupation")
    )
    built: set[tuple[str, str]] = set()
    units: list[tuple[Filling, ...]] = []
    for word in first:
        for partner in partners(word):
            assignments = [(word, partner), (partner, word)] if flip else [(word, partner)]
            if assignments[0] in built:
                continue
            built.update(assignments)
            unit = tuple(filling for a, b in assignments if (filling := _filling(template, a, b, group_of)))
            if unit:
                units.append(unit)
    return units


def _start(template_id: str) -> int:
    """Where a template's rotations start: from its id, so that templates with fewer fillings than a full cycle do
    not all favour the first orders, and a template's examples do not depend on the others."""
    return int(hashlib.sha256(template_id.encode()).hexdigest()[:8], 16)


def _slot_of_negative(template: Mapping[str, Any]) -> str:
    return "NAME1" if "{{NAME1}}" in template["answer_negative"] else "NAME2"


def template_examples(
    template: pd.Series, vocabulary: pd.DataFrame, proper_names: pd.DataFrame, params: AdaptInstantiateParams
) -> Iterator[dict]:
    """All examples of one adapted template (rows of the EXAMPLE_DROPPED schema, ``lang`` = ``en``), made one filling
    at a time as they are read; ``reason`` is empty but for a pair of Race_x_gender or Race_x_SES whose genders a
    pronoun of the template contradicts in either order (``pronoun_gender_clash``: both orders dropped, so that
    every pair kept has both assignments). Race_x_gender and Race_x_SES tag each example's ``stereotyped_groups``
    with its stereotyped entity's tag (``f-Black``: BBQ's ``F-Black`` as :func:`group_tag` spells it), which varies with
    the filling, so that lm-eval's BBQ code finds the biased answer."""
    entity_tagged = template.category in INTERSECTIONAL_CATEGORIES
    metadata = {
        "subcategory": template.subcategory or "None",
        "stereotyped_groups": [group_tag(group) for group in template.stereotyped_groups],
        "version": RECORD_VERSION,
        "source": template.source,
    }
    units = (
        (unit, words)
        for unit in fillings(template, vocabulary, proper_names)
        for words in lexical_variants(template.lexical_diversity)
    )
    start = _start(template.template_id)
    turn = itertools.count()
    cells = template.to_dict()
    genders = pronoun_genders(cells) if entity_tagged else None
    records: dict[tuple, dict] = {}  # the template's equal records, each made once and shared by its examples
    for unit_index, (unit, words) in enumerate(units):
        clash = genders is not None and any(pronoun_clash(genders, filling.groups) for filling in unit)
        for filling in unit:
            key = ("additional_metadata", filling.stereo_group if entity_tagged else "")
            if key not in records:
                tags = {"stereotyped_groups": [group_tag(filling.stereo_group)]} if entity_tagged else {}
                records[key] = metadata | tags
            turns = (start + unit_index, start + next(turn))
            for row in _examples(cells, filling, words, params, *turns, records[key], records):
                yield row | {"reason": PRONOUN_GENDER_CLASH if clash else ""}


def _examples(
    template: Mapping[str, Any],
    filling: Filling,
    words: dict[str, str],
    params: AdaptInstantiateParams,
    order_turn: int,
    unknown_turn: int,
    metadata: dict,
    records: dict[tuple, dict],
) -> list[dict]:
    """The four examples of one filling (``create_templating_dicts``), with the option order and the 'unknown'
    phrasing of its turns in the rotations. ``template``: the template's cells as a dict (fast to read);
    ``records``: the ``answer_info`` records made before for the template, by their content, one object shared by
    every example that has it (the four of a filling, and its lexical variants)."""
    negative_slot = _slot_of_negative(template)
    first_slot = (
        "NAME1" if template["ambiguous"].index("{{NAME1}}") < template["ambiguous"].index("{{NAME2}}") else "NAME2"
    )
    stereo, other = corrected(filling.stereo), corrected(filling.other)
    attributes = (filling.attribute1, filling.attribute2)
    texts = {field: fill(template[field], filling.name1, filling.name2, words, attributes) for field in TEXT_FIELDS}
    negative_role = "stereo" if negative_slot == filling.stereo_slot else "nonstereo"
    roles = {"neg": negative_role, "nonneg": "nonstereo" if negative_role == "stereo" else "stereo"}
    order = ORDERS[order_turn % len(ORDERS)]
    unknown = params.unknown_phrases[unknown_turn % len(params.unknown_phrases)]
    options = {"neg": texts["answer_negative"], "nonneg": texts["answer_non_negative"], "unknown": unknown}
    role_of = {**roles, "unknown": "unknown"}
    tags = {
        "stereo": group_tag(filling.stereo_group),
        "nonstereo": group_tag(filling.other_group),
        "unknown": UNKNOWN_GROUP,
    }
    flipped = int(filling.stereo_slot == "NAME2")
    rows: list[dict] = []
    lexical = "; ".join(f"{slot}: {word}" for slot, word in words.items())
    answers = tuple((option, options[kind], tags[role_of[kind]]) for option, kind in zip(OPTIONS, order, strict=True))
    if answers not in records:
        records[answers] = {option: [text, tag] for option, text, tag in answers}
    answer_info = records[answers]
    for polarity, condition in CELLS:
        ambiguous = texts["ambiguous"].strip()
        context = ambiguous if condition == "ambig" else f"{ambiguous} {texts['disambiguating']}".strip()
        answer = "unknown" if condition == "ambig" else polarity
        key = "|".join([template["template_id"], stereo, other, lexical, str(flipped), polarity, condition])
        rows.append(
            {
                "example_id": f"{template['template_id']}-{hashlib.sha256(key.encode()).hexdigest()[:12]}",
                "template_id": template["template_id"],
                "stereotype_id": template["template_id"],
                "category": template["category"],
                "question_index": template["question_index"],
                "question_polarity": polarity,
                "context_condition": condition,
                "context": context,
                "question": texts[f"question_{'negative' if polarity == 'neg' else 'non_negative'}"].strip(),
                **{option: options[kind] for option, kind in zip(OPTIONS, order, strict=True)},
                "label": order.index(answer),
                "answer_info": answer_info,
                "additional_metadata": metadata,
                "answer_roles": ANSWER_ROLES[tuple(role_of[kind] for kind in order)],
                "target_loc": [role_of[kind] for kind in order].index("stereo"),
                "assignment": "none"
                if condition == "ambig"
                else ("biased" if negative_role == "stereo" else "counter_biased"),
                "entity_order": "stereo_first" if first_slot == filling.stereo_slot else "nonstereo_first",
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


def examples_of(
    templates: pd.DataFrame, vocabulary: pd.DataFrame, proper_names: pd.DataFrame, params: AdaptInstantiateParams
) -> pd.DataFrame:
    """The examples of every template, in template order, with their ``reason`` (empty: kept;
    :func:`template_examples`): made :data:`BATCH_ROWS` at a time into a frame, so that no more than a batch of them
    is ever a row's dict (the frame keeps their texts as Arrow strings)."""
    rows: Iterator[dict] = itertools.chain.from_iterable(
        template_examples(template, vocabulary, proper_names, params) for _, template in templates.iterrows()
    )
    columns = EXAMPLE_DROPPED.names
    batches = [pd.DataFrame(list(batch), columns=columns) for batch in itertools.batched(rows, BATCH_ROWS)]
    return pd.concat(batches, ignore_index=True) if batches else pd.DataFrame(columns=columns)
