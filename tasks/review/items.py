"""The items of a review round, made from a run's tables: what is judged, its content hash and what a reviewer
needs to judge it.

Kinds: ``contexts`` (each LLM-written disambiguated continuation of a template), ``translations:<lang>`` (each
segment a translate stage translated into ``<lang>``), ``names`` (each first name of the name table, for the group
and gender it is meant to signal) and ``adapt`` (each adapted template, for whether its stereotype holds in the
target culture). An item's ``hash`` is the sha256 of exactly what the reviewer judges (:func:`content_hash`): when
the machine's output changes, so does the hash, and a decision made on the old text no longer applies.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..core.artifacts import sha256_bytes

KINDS = ("contexts", "translations", "names", "adapt")
"""The kinds of item; a translation's kind names its language: ``translations:en``."""

ITEM_COLUMNS = [
    "kind",
    "item_id",
    "hash",
    "category",
    "source",
    "lang",
    "source_lang",
    "source_text",
    "machine_output",
    "stereotype",
    "rules",
    "details",
]
"""An item: its kind, id and content hash; ``category`` and ``source`` (where the judged text came from) are the
strata of a sample; ``lang`` the language of ``machine_output``, ``source_lang`` that of ``source_text``,
``stereotype`` and ``details`` (a right-to-left one is shown so); ``rules`` the
machine's checks it passed; ``details`` what else the reviewer needs (the questions a context must answer, the
group a name is meant to signal)."""


@dataclass(frozen=True)
class Question:
    """One question a reviewer answers about an item: its key (a column of the decisions), its wording, the
    answers allowed (empty: free text)."""

    key: str
    text: str
    choices: tuple[str, ...] = ("yes", "no")


VERDICTS = ("accept", "fix", "reject")
"""What a reviewer decides about an item: keep the machine's text, replace it (``fix_text``), or drop the item
(``reason``)."""
NAME_VERDICTS = ("accept", "reject")
"""A name is accepted or rejected (the group and gender it signals are its questions), never rewritten."""


def verdicts(kind: str) -> tuple[str, ...]:
    """The verdicts a kind of item takes."""
    return NAME_VERDICTS if base_kind(kind) == "names" else VERDICTS


QUESTIONS: dict[str, tuple[Question, ...]] = {
    "contexts": (
        Question(
            "disambiguates",
            "Does the continuation give the trait of the negative question to {stereo}, and that of the "
            "non-negative question to {nonstereo}?",
        ),
        Question("natural", "Would a native reader write it this way?"),
    ),
    "translations": (
        Question("faithful", "Does the translation say what the source says, no more, no less?"),
        Question("natural", "Would a native reader of the target language write it this way?"),
        Question("same_entities", "Does it name the same people, with the same genders, as the source?"),
    ),
    "names": (
        Question("group", "Which group does this first name signal to you? (one of the choices, or 'none')", ()),
        Question("gender", "Which gender does this first name signal to you?", ("female", "male", "either")),
    ),
    "adapt": (Question("stereotype_holds", "Does the stereotype hold in the target culture?"),),
}
"""The questions that fit each kind of item (issue 37): besides them, every item gets a verdict."""


def base_kind(kind: str) -> str:
    """``translations:en`` → ``translations``."""
    return kind.split(":", 1)[0]


def kind_lang(kind: str) -> str:
    """The language a kind names (``translations:en`` → ``en``), else ``""``."""
    return kind.split(":", 1)[1] if ":" in kind else ""


def content_hash(*parts: str) -> str:
    """The sha256 of what a reviewer judges (its parts joined by a unit separator, so no two splits collide)."""
    return sha256_bytes("\x1f".join(parts).encode("utf-8"))


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=ITEM_COLUMNS).astype(str) if rows else pd.DataFrame(columns=ITEM_COLUMNS)


CONTEXT_RULES = "placeholders {stereo} and {nonstereo} kept; no repeat of the ambiguous text; Persian; 1-2 sentences"
"""The rules an accepted continuation passed (``pbbq.tasks.disambiguate.continuation_failures``)."""


def context_item_id(template_id: str, assignment: str) -> str:
    return f"{template_id}:{assignment}"


def context_items(templates: pd.DataFrame, stereotypes: pd.DataFrame) -> pd.DataFrame:
    """An item per continuation the machine wrote (``disambiguated_source`` ``llm``): the ambiguous text, the
    continuation and the template's two questions; a continuation a person wrote (the template's, an override,
    a review's fix) is not the machine's and is not asked again."""
    statements = dict(zip(stereotypes["stereotype_id"], stereotypes["statement_fa"], strict=True))
    rows = []
    for t in templates.itertuples(index=False):
        if t.disambiguated_source != "llm":
            continue
        rows.append(
            {
                "kind": "contexts",
                "item_id": context_item_id(t.template_id, "biased"),
                "hash": content_hash(t.disambiguated_fa),
                "category": t.category,
                "source": t.disambiguated_source,
                "lang": "fa",
                "source_lang": "fa",
                "source_text": t.ambiguous_fa,
                "machine_output": t.disambiguated_fa,
                "stereotype": statements.get(t.stereotype_id, ""),
                "rules": CONTEXT_RULES,
                "details": f"negative question: {t.question_negative_fa}\n"
                f"non-negative question: {t.question_nonnegative_fa}\n"
                f"{{stereo}}: {'; '.join(t.stereo_entities)}\n{{nonstereo}}: {'; '.join(t.nonstereo_entities)}",
            }
        )
    return _frame(rows)


TRANSLATION_RULES = (
    "only the target language; every group named as the glossary names it; entities keep their gender; "
    "back-translation chrF at or above min_chrf"
)


PIECE_COLUMNS = {"context": ("context",), "question": ("question",), "entity": ("stereo_entity", "nonstereo_entity")}
PIECE_COLUMNS |= {"lex": ("lexical_variant",)}
"""The example columns that hold a segment of each kind (``translate``'s segment kinds); a group's name, the other
kind, stands in no one column."""


CONDITIONS = {
    ("ambig", "none"): "ambiguous (nothing says who)",
    ("disambig", "biased"): "disambiguated as the stereotype has it",
    ("disambig", "counter_biased"): "disambiguated against the stereotype (counter-biased)",
}
"""How a context segment's example reads (``context_condition``, ``assignment``), so that a reviewer does not take a
counter-biased context for a wrong one."""


def _first_examples(examples: pd.DataFrame) -> dict[tuple[str, str], int]:
    """For each segment kind and source text, the position of the first example that holds it."""
    first: dict[tuple[str, str], int] = {}
    for kind, columns in PIECE_COLUMNS.items():
        for column in columns:
            if column in examples.columns:
                for position, text in enumerate(examples[column].tolist()):
                    first.setdefault((kind, text), position)
    return first


def _stereotype_of(stereotype_id: str, metadata: object, statements: dict[str, str]) -> str:
    """An example's stereotype: its statement (a crawl build's survey), else the groups it is about."""
    groups = "; ".join(metadata.get("stereotyped_groups", [])) if isinstance(metadata, dict) else ""
    return statements.get(str(stereotype_id), "") or (f"about: {groups}" if groups else "")


def translation_items(
    segments: pd.DataFrame,
    lang: str,
    source_lang: str = "fa",
    examples: pd.DataFrame | None = None,
    stereotypes: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """An item per segment translated into ``lang`` that passed its checks (a failed one is dropped already): the
    source text and the translation; from the first source example that holds the segment (``examples``), its
    category, its stereotype (the statement in ``stereotypes``, else the groups it is about) and, for a question or
    a piece of a sentence (an entity, a lexical variant), the example's context, where it occurs."""
    target, source = f"text_{lang}", f"text_{source_lang}"
    passed = segments[segments["failures"] == ""]
    originals, texts, kinds = passed[source].tolist(), passed[target].tolist(), passed["kind"].tolist()
    statements: dict[str, str] = {}
    if stereotypes is not None and len(stereotypes):
        statements = dict(zip(stereotypes["stereotype_id"], stereotypes["statement_fa"], strict=True))
    first = _first_examples(examples) if examples is not None else {}
    found = [first.get((kind, text)) for kind, text in zip(kinds, originals, strict=True)]
    used = sorted({at for at in found if at is not None})
    rows = examples.iloc[used] if examples is not None else pd.DataFrame()
    category = dict(zip(used, rows["category"].tolist() if used else [], strict=True))
    context = dict(zip(used, rows["context"].tolist() if used else [], strict=True))
    read = [rows[c].tolist() if c in rows.columns else [""] * len(used) for c in ("context_condition", "assignment")]
    condition = {at: CONDITIONS.get((c, a), "") for at, c, a in zip(used, *read, strict=True)}
    ids = rows["stereotype_id"].tolist() if "stereotype_id" in rows.columns else [""] * len(used)
    metadata = rows["additional_metadata"].tolist() if "additional_metadata" in rows.columns else [None] * len(used)
    stereotype = {at: _stereotype_of(sid, meta, statements) for at, sid, meta in zip(used, ids, metadata, strict=True)}
    details = []
    for kind, at, glossary, back, chrf in zip(
        kinds,
        found,
        passed["glossary"].tolist(),
        passed[f"back_{source_lang}"].tolist(),
        passed["chrf"].tolist(),
        strict=True,
    ):
        where = ""
        if at is not None and kind != "context":
            where = f"{'asked of' if kind == 'question' else 'in the sentence'}: {context[at]}\n"
        elif at is not None and condition[at]:
            where = f"the context is {condition[at]}\n"
        terms = "; ".join(entry.replace(" → ", " = ") for entry in glossary)  # an arrow points backwards right to left
        details.append(f"{where}glossary: {terms}\nback-translation: {back} (chrF {chrf:.1f})")
    frame = pd.DataFrame(
        {
            "kind": f"translations:{lang}",
            "item_id": passed["segment_id"].tolist(),
            "hash": [content_hash(o, t) for o, t in zip(originals, texts, strict=True)],
            "category": ["" if at is None else category[at] for at in found],
            "source": kinds,
            "lang": lang,
            "source_lang": source_lang,
            "source_text": originals,
            "machine_output": texts,
            "stereotype": ["" if at is None else stereotype[at] for at in found],
            "rules": TRANSLATION_RULES,
            "details": details,
        },
        columns=ITEM_COLUMNS,
    )
    return frame.astype(str)


def name_items(name_table: pd.DataFrame, proxy_strength: pd.DataFrame) -> pd.DataFrame:
    """An item per first name of the name table whose group the build measured (``proxy_strength``), judged blind:
    the reviewer sees the name and the groups of its category to choose from, not the group it is meant to signal
    nor the classifier's verdict (``source``, not shown, holds the intended ``group|gender``; the item id is
    opaque)."""
    groups_of = proxy_strength.groupby(["lang", "category"])["group"].apply(list).to_dict()
    category_of = {(r.lang, r.group): r.category for r in proxy_strength.itertuples(index=False)}
    rows = []
    for n in name_table.itertuples(index=False):
        category = category_of.get((n.lang, n.group))
        if category is None:
            continue
        digest = content_hash(n.lang, n.group, n.name, n.gender)
        rows.append(
            {
                "kind": "names",
                "item_id": f"name-{digest[:12]}",
                "hash": digest,
                "category": category,
                "source": f"{n.group}|{n.gender}",
                "lang": n.lang,
                "source_lang": n.lang,
                "source_text": "",
                "machine_output": n.name,
                "stereotype": "",
                "rules": "",
                "details": "choices: " + "; ".join([*groups_of[(n.lang, category)], "none"]),
            }
        )
    return _frame(rows)


ADAPT_RULES = "classed by the adaptation sheet (DT/TM kept); kept by the annotation gate (Fleiss' kappa, relevance)"


def adapt_items(templates: pd.DataFrame) -> pd.DataFrame:
    """An item per adapted template the adaptation kept (``03_adapt/templates``, ``kept``): its contexts and
    questions as adapted, and the groups its stereotype is about."""
    rows = []
    kept = templates[templates["kept"]].rename(columns={"class": "adaptation_class"})
    for t in kept.itertuples(index=False):
        text = f"{t.ambiguous}\n{t.disambiguating}"
        groups = "; ".join(t.stereotyped_groups)
        rows.append(
            {
                "kind": "adapt",
                "item_id": t.template_id,
                "hash": content_hash(text, t.question_negative, t.question_non_negative, groups),
                "category": t.category,
                "source": t.adaptation_class,
                "lang": "en",
                "source_lang": "en",
                "source_text": t.source,
                "machine_output": text,
                "stereotype": f"{groups}: {t.question_negative}",
                "rules": ADAPT_RULES,
                "details": f"negative question: {t.question_negative}\n"
                f"non-negative question: {t.question_non_negative}",
            }
        )
    return _frame(rows)
