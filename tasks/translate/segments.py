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


def per_template(
    examples: pd.DataFrame, table: pd.DataFrame, source: Language, target: Language, column: str = "text_fa"
) -> pd.DataFrame:
    """The rows of ``table`` (:func:`segments` of ``examples``) once per template whose examples use them (their
    context, question in its agreement, entity phrases, lexical variant and groups), with the entity phrases,
    variants and groups whose text is an entity of such a question or context (the translation of each goes into
    its request); ``template_id`` first, each template's rows in ``table``'s order. A template's translations
    depend on its rows alone."""
    texts, kinds = table[column].tolist(), table["kind"].tolist()
    position = {key: i for i, key in enumerate(zip(kinds, texts, table["agreement"].tolist(), strict=True))}
    phrases: dict[str, list[int]] = {}
    """Each text of an entity phrase, variant or group: its segments."""
    for i, (kind, text) in enumerate(zip(kinds, texts, strict=True)):
        if kind in ("entity", "lex", "group"):
            phrases.setdefault(text, []).append(i)
    told = [
        entities if kind in ("question", "context") else ()
        for kind, entities in zip(kinds, table["entities"].tolist(), strict=True)
    ]
    agreement = _pair_agreement(source, target)
    used: dict[str, set[int]] = {}
    columns = ("template_id", "context", "question", "stereo_entity", "nonstereo_entity", "lexical_variant")
    rows = zip(*(examples[c].tolist() for c in columns), _example_groups(examples), strict=True)
    for template, context, question, stereo, nonstereo, variant, groups in rows:
        keys = [("context", context, ""), ("question", question, agreement(stereo, nonstereo))]
        keys += [("entity", stereo, ""), ("entity", nonstereo, ""), *(("group", g, "") for g in groups)]
        keys += [("lex", variant, "")] if variant else []
        used.setdefault(template, set()).update(position[key] for key in keys)
    order = [
        (template, i)
        for template in sorted(used)
        for i in sorted(used[template] | {p for at in used[template] for e in told[at] for p in phrases.get(e, ())})
    ]
    frame = table.iloc[[i for _, i in order]].reset_index(drop=True)
    frame.insert(0, "template_id", [template for template, _ in order])
    return frame
