"""The distinct source segments of a stage's examples (entity phrases, lexical variants, groups, questions,
contexts), each with the entities, lexical variants and glossary entries that validate its translation; a segment
is translated once however many examples hold it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache

import pandas as pd

from ..core.artifacts import sha256_bytes
from ..core.schemas import OPTIONS
from ..text.languages import Language
from .glossary import Glossary

GROUP_SEPARATOR = "-"
"""How a group tag joins the words of its group's name (:func:`pbbq.tasks.core.schemas.group_tag`)."""


def _segment_id(kind: str, text: str, agreement: str = "") -> str:
    return f"{kind}-{sha256_bytes(text.encode('utf-8'))[:12]}" + (f"-{agreement}" if agreement else "")


def question_agreement(entities: Iterable[str], source: Language, target: Language) -> str:
    """The agreement of a question's translation about the ``entities`` (source phrases) of one pair, in a target
    whose verbs agree with their subject's gender (:attr:`~pbbq.tasks.text.languages.Language.marks_gender_on_verbs`;
    else ``""``: one translation for every pair): ``feminine`` when the source gives both as women, else
    ``masculine``, the form for anyone ('کون نہیں سنبھال سکی؟' asks about two women, 'سکا' about anyone else)."""
    if not target.marks_gender_on_verbs:
        return ""
    return "feminine" if all(source.entity_gender(e) == "female" for e in entities) else "masculine"


def _pair_agreement(source: Language, target: Language) -> Callable[[str, str], str]:
    """:func:`question_agreement` of a (stereotyped, non-stereotyped) pair, worked out once per pair."""
    return cache(lambda one, other: question_agreement((one, other), source, target))


KINDS = ("entity", "lex", "group", "question", "context")
"""The kinds of segment, in the order :func:`segments` lists them."""


def segments(examples: pd.DataFrame, glossary: Glossary, column: str = "text_fa") -> pd.DataFrame:
    """The distinct source segments of the examples with what validates them: ``entities`` (those of a context's two
    that its text holds, as BBQ's "two friends, one Afghan and the other Nigerian" holds no "Afghan friend"; a
    question's every entity it is asked about; an entity phrase itself), ``lexicals`` (a context's lexical
    variant; a variant itself) and ``glossary``, the ``(term, rendering)`` entries of its entities (a context's
    two) and lexical variant (a question names no entity, so it has none). In a target whose verbs agree with
    their subject's gender, a question is one segment per ``agreement`` of its pairs (:func:`question_agreement`),
    its entities those of those pairs."""
    stereo, nonstereo = examples["stereo_entity"].tolist(), examples["nonstereo_entity"].tolist()
    lexical = examples["lexical_variant"].tolist()
    entities = sorted(set(stereo) | set(nonstereo))
    rows: list[tuple[str, str, tuple[str, ...], tuple[str, ...], str, tuple[str, ...]]] = []
    """Per segment: kind, source text, entities, lexicals, agreement, and the phrases its glossary entries are of."""
    rows += [("entity", e, (e,), (), "", (e,)) for e in entities]
    rows += [("lex", v, (), (v,), "", (v,)) for v in sorted(set(lexical) - {""})]
    rows += [("group", g, (), (g,), "", (g,)) for g in sorted(_groups(examples))]
    agreement = _pair_agreement(glossary.source, glossary.target)
    asked: dict[tuple[str, str], set[str]] = {}
    for question, one, other in zip(examples["question"].tolist(), stereo, nonstereo, strict=True):
        asked.setdefault((question, agreement(one, other)), set()).update((one, other))
    rows += [("question", q, tuple(sorted(asked[q, a])), (), a, ()) for q, a in sorted(asked)]
    first: dict[str, tuple[str, str, str]] = {}
    """Each context's entities and lexical variant, as its first example gives them."""
    for context, *named in zip(examples["context"].tolist(), stereo, nonstereo, lexical, strict=True):
        first.setdefault(context, tuple(named))
    mention = cache(glossary.source.mention)
    for context in sorted(first):
        one, other, variant = first[context]
        held = tuple(e for e in (one, other) if mention(e).search(context))
        lexicals = (variant,) if variant else ()
        rows.append(("context", context, held, lexicals, "", (one, other, *lexicals)))
    frame = pd.DataFrame(rows, columns=["kind", column, "entities", "lexicals", "agreement", "named"])
    frame.insert(0, "segment_id", [_segment_id(kind, text, agreement) for kind, text, _, _, agreement, _ in rows])
    terms_in = cache(glossary.terms_in)
    frame["glossary"] = [_entries(terms_in, named) for *_, named in rows]
    return frame.drop(columns="named")


def group_name(tag: str) -> str:
    """The Persian name of the group a tag names (its words joined by spaces again)."""
    return tag.replace(GROUP_SEPARATOR, " ")


def _example_groups(examples: pd.DataFrame) -> list[list[str]]:
    """Per example, the Persian names of the groups its entity options are tagged with."""
    return [
        [group_name(str(list(info[option])[1])) for option in OPTIONS if roles[option] != "unknown"]
        for info, roles in zip(examples["answer_info"].tolist(), examples["answer_roles"].tolist(), strict=True)
    ]


def _groups(examples: pd.DataFrame) -> set[str]:
    """The Persian names of the groups the examples' entity options are tagged with."""
    return {group for groups in _example_groups(examples) for group in groups}


def _entries(terms_in: Callable[[str], list[tuple[str, str]]], phrases: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """The ``(term, rendering)`` entries of the glossary terms in the phrases (:meth:`Glossary.terms_in`)."""
    found: dict[str, str] = {}
    for phrase in phrases:
        found.update(terms_in(phrase))
    return tuple(sorted(found.items()))


def own_segments(examples: pd.DataFrame, glossary: Glossary, column: str = "text_fa") -> pd.DataFrame:
    """:func:`segments` of each template's examples on their own, ``template_id`` first, each context with the id of
    the first example that holds it (``first``; ``""`` for the other kinds): what a template adds to the segment
    table of every template (:func:`per_template`), made from its own rows."""
    frames = []
    for template, rows in examples.groupby("template_id", sort=True):
        table = segments(rows, glossary, column)
        first = dict(zip(rows["context"].tolist()[::-1], rows["example_id"].tolist()[::-1], strict=True))
        table.insert(0, "template_id", template)
        table["first"] = [
            first[text] if kind == "context" else ""
            for kind, text in zip(table["kind"].tolist(), table[column].tolist(), strict=True)
        ]
        frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=_template_columns(column))


def _template_columns(column: str) -> list[str]:
    """The columns of :func:`own_segments`' table."""
    return ["template_id", "segment_id", "kind", column, "entities", "lexicals", "agreement", "glossary", "first"]


def per_template(examples: pd.DataFrame, own: pd.DataFrame, column: str = "text_fa") -> pd.DataFrame:
    """The rows of the segment table of every template (:func:`segments` of ``examples``) once per template whose
    examples use them (their context, question in its agreement, entity phrases, lexical variant and groups), with
    the entity phrases, variants and groups whose text is an entity of such a question or context (the translation
    of each goes into its request); ``template_id`` first, each template's rows in the table's order. A template's
    translations depend on its rows alone. Made from ``own``, each template's segments on their own
    (:func:`own_segments`): a segment's row is the same in each but for a question's entities, those of every
    template asking it, and a context's, those of its first example in ``examples``."""
    at = dict(zip(examples["example_id"].tolist(), range(len(examples)), strict=True))
    kinds, texts, agreements = own["kind"].tolist(), own[column].tolist(), own["agreement"].tolist()
    entities, firsts, templates = own["entities"].tolist(), own["first"].tolist(), own["template_id"].tolist()
    keys = list(zip(kinds, texts, agreements, strict=True))
    chosen: dict[tuple[str, str, str], int] = {}
    asked: dict[tuple[str, str, str], set[str]] = {}
    used: dict[str, set[tuple[str, str, str]]] = {}
    for i, key in enumerate(keys):
        used.setdefault(templates[i], set()).add(key)
        if key[0] == "question":
            asked.setdefault(key, set()).update(entities[i])
        if key not in chosen or (key[0] == "context" and at[firsts[i]] < at[firsts[chosen[key]]]):
            chosen[key] = i
    order = sorted(chosen, key=lambda key: (KINDS.index(key[0]), key[1], key[2]))
    table = own.iloc[[chosen[key] for key in order]].drop(columns=["template_id", "first"]).reset_index(drop=True)
    table["entities"] = [
        tuple(sorted(asked[key])) if key in asked else held
        for key, held in zip(order, table["entities"].tolist(), strict=True)
    ]
    position = {key: i for i, key in enumerate(order)}
    phrases: dict[str, list[int]] = {}
    """Each text of an entity phrase, variant or group: its segments."""
    for i, (kind, text, _) in enumerate(order):
        if kind in ("entity", "lex", "group"):
            phrases.setdefault(text, []).append(i)
    told = [
        held if kind in ("question", "context") else ()
        for (kind, _, _), held in zip(order, table["entities"].tolist(), strict=True)
    ]
    rows = []
    for template in sorted(used):
        positions = {position[key] for key in used[template]}
        rows += [
            (template, i)
            for i in sorted(positions | {p for i in positions for e in told[i] for p in phrases.get(e, ())})
        ]
    frame = table.iloc[[i for _, i in rows]].reset_index(drop=True)
    frame.insert(0, "template_id", [template for template, _ in rows])
    return frame
