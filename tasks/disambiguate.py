"""Disambiguation: an LLM writes the disambiguated continuation of each ambiguous template, keeping the
``{stereo}``/``{nonstereo}`` placeholders (PBBQ §3.3.3, Appendix D).

One continuation per template, for the *biased* assignment (the stereotyped entity has the trait of the
negative question); it comes from, in order of precedence:

1. the template itself (a human-written disambiguated context wins over the LLM);
2. ``annotations/disambiguation_overrides.csv`` (a human fix of an answer that failed review);
3. the LLM, with the Appendix D prompt in Persian (``prompts/disambiguate.fa.txt``), unless a review round judged
   its answer (``[review]``, :mod:`pbbq.tasks.review`): a fix replaces it (``review_fix``), a reject leaves the
   template out (``review_rejected``), and under ``require`` an answer nobody judged does too
   (``review_required``). A decision on another text than the LLM's answer now is stale: reported, not applied.

The *counter-biased* continuation is the same text with ``{stereo}`` and ``{nonstereo}`` exchanged: BBQ's
control, under which the two answer assignments differ only in who is who, so that Δbias (PBBQ Eq. 3)
compares like with like. A template that cannot be mirrored declares a ``mirror_exception`` and brings both
texts; :func:`mirror_diff` reports every difference between them other than the placeholders, for a
reviewer to accept.

An LLM answer is validated (:func:`continuation_failures`); a failing answer is sent back with the failure
named (``prompts/disambiguate.retry.fa.txt``) up to ``max_attempts`` answers in all; what still fails goes to
``review.csv`` with every attempt, and its template is left out of the dataset (instantiate drops it).
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from string import Template
from typing import Any

import pandas as pd
import pyarrow as pa

from .core.artifacts import REPO_ROOT, StageOutput, count_reasons
from .core.inputs import OVERRIDES, PLACEHOLDER, swap_roles
from .core.prompts import PromptBundle, retry_request
from .core.schemas import TEMPLATE_DISAMBIGUATED
from .core.stage import Client, Resource, Stage, Table
from .llm import LLMClient, LLMRequest
from .review.apply import REJECTED, UNREVIEWED, Applied, resolve
from .review.items import content_hash, context_item_id
from .review.stage import ReviewRules
from .text.languages import language
from .text.languages.fa import normalize_fa

STAGE_NAME = "disambiguate"
ASSIGNMENTS: dict[str, tuple[str, str]] = {
    "biased": ("{stereo}", "{nonstereo}"),
    "counter_biased": ("{nonstereo}", "{stereo}"),
}
"""Per assignment: (the entity that answers the negative question, the one that answers the non-negative)."""
COLUMNS = {"biased": "disambiguated_fa", "counter_biased": "disambiguated_counter_biased_fa"}
SOURCE_COLUMNS = {"biased": "disambiguated_source", "counter_biased": "counter_biased_source"}
PROMPT_FILE = REPO_ROOT / "prompts" / "disambiguate.fa.txt"
INPUT_FILE = REPO_ROOT / "prompts" / "disambiguate.input.fa.txt"
RETRY_FILE = REPO_ROOT / "prompts" / "disambiguate.retry.fa.txt"

FAILURES: dict[str, str] = {
    "empty": "پاسخ خالی است.",
    "missing_stereo": "نشانگر {stereo} در پاسخ نیست.",
    "missing_nonstereo": "نشانگر {nonstereo} در پاسخ نیست.",
    "extra_placeholder": "پاسخ نشانگری جز {stereo} و {nonstereo} دارد، یا نشانگرها را تغییر داده است.",
    "repeats_initial_text": "پاسخ متن اولیه را تکرار کرده است.",
    "not_persian": "پاسخ به فارسی نیست.",
    "too_many_sentences": "پاسخ بیش از دو جمله است.",
}
"""Every rule an answer can break, with the Persian sentence that names it in the follow-up message."""

REVIEW = pa.schema(
    [
        ("template_id", pa.string()),
        ("assignment", pa.string()),
        ("attempt", pa.int64()),
        ("answer", pa.string()),
        ("failures", pa.string()),
        ("request_id", pa.string()),
    ]
)
_SENTENCE_END = re.compile(r"[.!؟?…]+")


@dataclass(frozen=True)
class DisambiguateParams:
    max_attempts: int = 3
    """Answers asked for per template: the first and the retries with the failure named."""
    max_sentences: int = 2
    min_persian_share: float = 0.8
    """Share of the answer's letters that must be in the Arabic script block."""
    max_repeat_share: float = 0.5
    """An answer that holds more than this share of the ambiguous text's word 4-grams repeats it."""


@dataclass(frozen=True)
class Prompts(PromptBundle):
    """``main`` holds the instructions (the system message), ``data`` the user message: the template's text,
    untrusted, inside delimited blocks after the instructions; ``retry`` names the broken rules."""

    main: str
    data: str
    retry: str

    @classmethod
    def load(cls, main: Path = PROMPT_FILE, data: Path = INPUT_FILE, retry: Path = RETRY_FILE) -> Prompts:
        return cls.read((main, data, retry))


def delimited(text: str) -> str:
    """Untrusted text as it goes inside a prompt's tag: angle brackets become look-alikes, so the text cannot
    close its block or open another."""
    return text.replace("<", "‹").replace(">", "›")


def _persian_share(text: str) -> float:
    letters = [c for c in PLACEHOLDER.sub("", text) if unicodedata.category(c).startswith("L")]
    if not letters:
        return 0.0
    return sum("\u0600" <= c <= "\u06ff" or "\ufb50" <= c <= "\ufeff" for c in letters) / len(letters)


def _words(text: str) -> list[str]:
    persian = language("fa")
    return persian.words(persian.tokenize(text))


def _ngrams(tokens: list[str], n: int = 4) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def mirror_diff(biased: str, counter_biased: str) -> str:
    """Every difference between a counter-biased continuation and the mirror of the biased one, token by
    token (``-[removed] +[added]``, ``; `` between differences); empty when the two are mirrors."""
    mirror, other = swap_roles(biased).split(), counter_biased.split()
    changes = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=mirror, b=other, autojunk=False).get_opcodes():
        if tag != "equal":
            removed = f"-[{' '.join(mirror[i1:i2])}]" if i2 > i1 else ""
            added = f"+[{' '.join(other[j1:j2])}]" if j2 > j1 else ""
            changes.append(" ".join(part for part in (removed, added) if part))
    return "; ".join(changes)


def continuation_failures(text: str, template: Any, params: DisambiguateParams) -> list[str]:
    """The rules an answer breaks (empty: it is accepted); ``template``: its row (a Series, or an ``itertuples``
    row: its fields read as attributes).

    Placeholders: ``{stereo}`` and ``{nonstereo}`` both present, spelled exactly, and no other brace token
    ({lex} only for a template with lexical variants), so each entity lands in the slot the prompt gave it. No
    repeat of the initial text: at most ``max_repeat_share`` of its word 4-grams. Persian script. One or two
    sentences. Whether the story gives the trait to the right entity is a matter of meaning that no
    rule here decides: every answer is kept in ``attempts`` for the human reviewer.
    """
    text = text.strip()
    if not text:
        return ["empty"]
    failures = []
    found = set(PLACEHOLDER.findall(text))
    if re.search(r"[{}]", PLACEHOLDER.sub("", text)):
        found.add("unbalanced brace")
    for role in ("stereo", "nonstereo"):
        if role not in found:
            failures.append(f"missing_{role}")
    allowed = {"stereo", "nonstereo"} | ({"lex"} if len(template.lexical_variants) else set())
    if found - allowed:
        failures.append("extra_placeholder")
    initial = _ngrams(_words(template.ambiguous_fa))
    if initial and len(initial & _ngrams(_words(text))) / len(initial) > params.max_repeat_share:
        failures.append("repeats_initial_text")
    if _persian_share(text) < params.min_persian_share:
        failures.append("not_persian")
    if len([s for s in _SENTENCE_END.split(text) if s.strip()]) > params.max_sentences:
        failures.append("too_many_sentences")
    return failures


def first_request(template: Any, statement: str, prompts: Prompts) -> LLMRequest:
    """The Appendix D prompt for one template (its row, as :func:`continuation_failures` takes it), asking for its
    biased continuation."""
    negative, nonnegative = ASSIGNMENTS["biased"]
    instructions = Template(prompts.main).substitute(answer_negative=negative, answer_nonnegative=nonnegative)
    data = Template(prompts.data).substitute(
        stereotype=delimited(statement),
        question_negative=delimited(template.question_negative_fa),
        question_nonnegative=delimited(template.question_nonnegative_fa),
        ambiguous_context=delimited(template.ambiguous_fa),
    )
    return LLMRequest(
        messages=(("user", data),),
        system=instructions,
        prompt_hash=prompts.sha256,
        stage=STAGE_NAME,
        context=f"template {template.template_id}",
    )


def follow_up(request: LLMRequest, answer: str, failures: list[str], prompts: Prompts) -> LLMRequest:
    """The conversation so far, the answer, and a message that names what it broke."""
    named = " ".join(FAILURES[f] for f in failures)
    return retry_request(request, answer, Template(prompts.retry).substitute(failure=named))


def _reviewed(
    rows: list[Any], filled: dict[str, dict[int, str]], decisions: pd.DataFrame | None, rules: ReviewRules | None
) -> Applied:
    """Apply a review round's decisions to the LLM's accepted continuations in ``filled`` (in place): a fix
    replaces the text, a reject (and, under ``require``, no decision) leaves it out; by the hash of the answer."""
    answered = {
        index: text
        for index, text in filled["disambiguated_fa"].items()
        if filled["disambiguated_source"][index] == "llm"
    }
    items = {index: context_item_id(rows[index].template_id, "biased") for index in answered}
    applied = resolve(decisions, "contexts", {items[i]: content_hash(text) for i, text in answered.items()})
    require = rules is not None and rules.require
    for index, item in items.items():
        if item in applied.fixes:
            filled["disambiguated_fa"][index] = normalize_fa(applied.fixes[item])
            filled["disambiguated_source"][index] = "review_fix"
        elif item in applied.rejects or (require and item not in applied.reviewed):
            del filled["disambiguated_fa"][index]
            filled["disambiguated_source"][index] = REJECTED if item in applied.rejects else UNREVIEWED
    return applied


def disambiguate(
    templates: pd.DataFrame,
    stereotypes: pd.DataFrame,
    overrides: pd.DataFrame,
    prompts: Prompts,
    client: LLMClient,
    params: DisambiguateParams,
    decisions: pd.DataFrame | None = None,
    rules: ReviewRules | None = None,
) -> StageOutput:
    """Fill every template's biased continuation (template > override > LLM, as a review round decided) and its
    counter-biased one (the mirror, or the declared exception's own text); route failures to review."""
    table = templates.reset_index(drop=True).assign(disambiguated_source="", counter_biased_source="", mirror_diff="")
    statements = stereotypes.set_index("stereotype_id")["statement_fa"]
    fixes = {(r.template_id, r.assignment): r.text for r in overrides.itertuples()}
    request_ids: dict[str, list[str]] = {t: [] for t in table["template_id"]}
    rows = list(table.itertuples(index=False))  # read as given; what the stage fills in is set per column below
    filled: dict[str, dict[int, str]] = {column: {} for column in (*COLUMNS.values(), *SOURCE_COLUMNS.values())}
    pending: dict[int, LLMRequest] = {}
    for index, template in enumerate(rows):
        for assignment in ("biased", "counter_biased") if template.mirror_exception else ("biased",):
            column, source = COLUMNS[assignment], SOURCE_COLUMNS[assignment]
            if getattr(template, column):
                filled[source][index] = "human"
            elif (template.template_id, assignment) in fixes:
                filled[column][index] = fixes[(template.template_id, assignment)]
                filled[source][index] = "override"
            else:
                filled[source][index] = "llm"
                pending[index] = first_request(template, statements[template.stereotype_id], prompts)
    attempts: list[dict] = []
    for attempt in range(1, params.max_attempts + 1):
        if not pending:
            break
        answers = client.complete_many(list(pending.values()))
        still: dict[int, LLMRequest] = {}
        for (index, request), answer in zip(pending.items(), answers, strict=True):
            template = rows[index]
            request_ids[template.template_id].append(answer.request_id)
            text = normalize_fa(answer.text)
            failures = continuation_failures(text, template, params)
            attempts.append(
                {
                    "template_id": template.template_id,
                    "assignment": "biased",
                    "attempt": attempt,
                    "answer": text,
                    "failures": ";".join(failures),
                    "request_id": answer.request_id,
                }
            )
            if failures:
                still[index] = follow_up(request, answer.text, failures, prompts)
            else:
                filled["disambiguated_fa"][index] = text
        pending = still
    applied = _reviewed(rows, filled, decisions, rules)
    for column, values in filled.items():
        if values:
            table.loc[list(values), column] = list(values.values())
    failed = {table.at[index, "template_id"] for index in pending}
    log = pd.DataFrame(attempts, columns=REVIEW.names)
    review = log[log["template_id"].isin(failed)]
    table["llm_request_ids"] = table["template_id"].map(request_ids)
    for index in pending:
        table.at[index, "disambiguated_source"] = table.at[index, "counter_biased_source"] = "review"
    left_out = table["disambiguated_source"].isin(["review", REJECTED, UNREVIEWED])
    mirrored = (table["mirror_exception"] == "") & ~left_out
    table.loc[mirrored, "disambiguated_counter_biased_fa"] = table.loc[mirrored, "disambiguated_fa"].map(swap_roles)
    table.loc[mirrored, "counter_biased_source"] = "mirror"
    declared = table["mirror_exception"] != ""
    table.loc[declared, "mirror_diff"] = [
        mirror_diff(biased, counter)
        for biased, counter in zip(
            table.loc[declared, "disambiguated_fa"], table.loc[declared, "disambiguated_counter_biased_fa"], strict=True
        )
    ]
    sources = pd.concat([table["disambiguated_source"], table["counter_biased_source"]])
    report = {
        "stage": STAGE_NAME,
        "parameters": asdict(params),
        "prompt_sha256": prompts.sha256,
        "counts": {"in": len(table), "out": len(table) - len(failed), "continuations": len(sources)},
        "sources": {str(k): int(v) for k, v in sorted(sources.value_counts().items())},
        "mirror": {
            "mirrored": int(mirrored.sum()),
            "declared_exceptions": [
                {"template_id": r.template_id, "reason": r.mirror_exception, "diff": r.mirror_diff}
                for r in table[declared].itertuples()
            ],
        },
        "dropped": {"total": len(failed), "by_reason": count_reasons(pd.Series(["failed_validation"] * len(failed)))},
        "drops": [{"template_id": t, "reason": "failed_validation"} for t in sorted(failed)],
        "failures_by_rule": count_reasons(log["failures"].str.split(";").explode().loc[lambda s: s != ""]),
        "attempts": len(log),
        "llm": client.usage(STAGE_NAME).as_dict(),
    } | ({"review": applied.report()} if decisions is not None else {})
    return StageOutput(
        tables={"templates": table, "review": review, "attempts": log},
        schemas={"templates": TEMPLATE_DISAMBIGUATED, "review": REVIEW, "attempts": REVIEW},
        report=report,
        csv=("review",),
    )


STAGE = Stage(
    "04_disambiguate",
    "disambiguate",
    disambiguate,
    inputs={
        "templates": Table("03_kappa_gate", "gated"),
        "stereotypes": Table("02_survey", "stereotypes"),
        "overrides": OVERRIDES,
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
    imports=("hazm",),  # its tokenizer, for the rule on repeating the initial text
)
