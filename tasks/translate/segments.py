"""The distinct source segments of a stage's examples (entity phrases, lexical variants, groups, questions,
contexts), each with the entities, lexical variants and glossary entries that validate its translation; a segment
is translated once however many examples hold it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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


def segments(examples: pd.DataFrame, glossary: Glossary, column: str = "text_fa") -> pd.DataFrame:
    """The distinct source segments of the examples with what validates them: ``entities`` (those of a context's two
    that its text holds, as BBQ's "two friends, one Afghan and the other Nigerian" holds no "Afghan friend"; a
    question's every entity it is asked about; an entity phrase itself), ``lexicals`` (a context's lexical
    variant; a variant itself) and ``glossary``, the ``(term, rendering)`` entries of its entities (a context's
    two) and lexical variant (a question names no entity, so it has none). In a target whose verbs agree with
    their subject's gender, a question is one segment per ``agreement`` of its pairs (:func:`question_agreement`),
    its entities those of those pairs."""
    rows: list[dict[str, Any]] = []
    entities = sorted(set(examples["stereo_entity"]) | set(examples["nonstereo_entity"]))
    rows += [{"kind": "entity", column: e, "entities": (e,), "lexicals": ()} for e in entities]
    variants = sorted(set(examples["lexical_variant"]) - {""})
    rows += [{"kind": "lex", column: v, "entities": (), "lexicals": (v,)} for v in variants]
    rows += [{"kind": "group", column: g, "entities": (), "lexicals": (g,)} for g in sorted(_groups(examples))]
    agreements = [
        question_agreement(pair, glossary.source, glossary.target)
        for pair in zip(examples["stereo_entity"], examples["nonstereo_entity"], strict=True)
    ]
    for (question, agreement), group in examples.assign(agreement=agreements).groupby(["question", "agreement"]):
        asked = sorted(set(group["stereo_entity"]) | set(group["nonstereo_entity"]))
        rows.append(
            {"kind": "question", column: question, "entities": tuple(asked), "lexicals": (), "agreement": agreement}
        )
    contexts = examples.groupby("context", sort=True).agg(
        stereo=("stereo_entity", "first"), nonstereo=("nonstereo_entity", "first"), lex=("lexical_variant", "first")
    )
    for context, row in contexts.iterrows():
        lexicals = (row.lex,) if row.lex else ()
        named = (row.stereo, row.nonstereo)
        held = tuple(e for e in named if glossary.source.mention(e).search(context))
        rows.append({"kind": "context", column: context, "entities": held, "named": named, "lexicals": lexicals})
    frame = pd.DataFrame(rows, columns=["kind", column, "entities", "lexicals", "agreement"]).fillna({"agreement": ""})
    frame.insert(
        0,
        "segment_id",
        [_segment_id(*key) for key in zip(frame["kind"], frame[column], frame["agreement"], strict=True)],
    )
    frame["glossary"] = [
        () if row["kind"] == "question" else _entries(glossary, (*row.get("named", row["entities"]), *row["lexicals"]))
        for row in rows
    ]
    return frame


def group_name(tag: str) -> str:
    """The Persian name of the group a tag names (its words joined by spaces again)."""
    return tag.replace(GROUP_SEPARATOR, " ")


def _groups(examples: pd.DataFrame) -> set[str]:
    """The Persian names of the groups the examples' entity options are tagged with."""
    return {
        group_name(str(list(info[option])[1]))
        for info, roles in zip(examples["answer_info"], examples["answer_roles"], strict=True)
        for option in OPTIONS
        if roles[option] != "unknown"
    }


def _entries(glossary: Glossary, phrases: Iterable[str]) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    for phrase in phrases:
        found.update(glossary.terms_in(phrase))
    return tuple(sorted(found.items()))
