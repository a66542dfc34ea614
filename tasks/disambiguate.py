"""Disambiguation: an LLM writes the disambiguated continuation of each ambiguous template, once per answer
assignment, keeping the ``{stereo}``/``{nonstereo}`` placeholders (PBBQ §3.3.3, Appendix D).

For each gated template and each assignment (*biased*: the stereotyped entity has the negative trait;
*counter-biased*: the other one does) the continuation comes from, in order of precedence:

1. the template itself (a human-written disambiguated context wins over the LLM);
2. ``annotations/disambiguation_overrides.csv`` (a human fix of an answer that failed review);
3. the LLM, with the Appendix D prompt in Persian (``prompts/disambiguate.fa.txt``).

An LLM answer is validated (:func:`continuation_failures`); a failing answer is sent back with the failure
named (``prompts/disambiguate.retry.fa.txt``) up to ``max_attempts`` answers in all; what still fails goes to
``review.csv`` with every attempt, and its template is left out of the dataset (instantiate drops it).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from string import Template

import pandas as pd
import pyarrow as pa

from tasks.artifacts import REPO_ROOT, StageOutput, count_reasons, sha256_bytes
from tasks.caching import stage_task
from tasks.inputs import PLACEHOLDER
from tasks.llm import LLMClient, LLMConfig, LLMRequest, open_llm
from tasks.persian_text import normalize_fa, tokenize_fa, words
from tasks.schemas import TEMPLATE_DISAMBIGUATED

STAGE = "disambiguate"
ASSIGNMENTS: dict[str, tuple[str, str]] = {
    "biased": ("{stereo}", "{nonstereo}"),
    "counter_biased": ("{nonstereo}", "{stereo}"),
}
"""Per assignment: (the entity that answers the negative question, the one that answers the non-negative)."""
COLUMNS = {"biased": "disambiguated_biased_fa", "counter_biased": "disambiguated_counter_biased_fa"}
PROMPT_FILE = REPO_ROOT / "prompts" / "disambiguate.fa.txt"
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
    """Answers asked for per template and assignment: the first and the retries with the failure named."""
    max_sentences: int = 2
    min_persian_share: float = 0.8
    """Share of the answer's letters that must be in the Arabic script block."""
    max_repeat_share: float = 0.5
    """An answer that holds more than this share of the ambiguous text's word 4-grams repeats it."""


@dataclass(frozen=True)
class Prompts:
    """The prompt files' text; their hash goes into every request key."""

    main: str
    retry: str

    @classmethod
    def load(cls, main: Path = PROMPT_FILE, retry: Path = RETRY_FILE) -> Prompts:
        return cls(main.read_text(encoding="utf-8"), retry.read_text(encoding="utf-8"))

    @property
    def sha256(self) -> str:
        return sha256_bytes((self.main + "\0" + self.retry).encode("utf-8"))


def _persian_share(text: str) -> float:
    letters = [c for c in PLACEHOLDER.sub("", text) if unicodedata.category(c).startswith("L")]
    if not letters:
        return 0.0
    return sum("\u0600" <= c <= "\u06ff" or "\ufb50" <= c <= "\ufeff" for c in letters) / len(letters)


def _words(text: str) -> list[str]:
    return words(tokenize_fa(text), "fa")


def _ngrams(tokens: list[str], n: int = 4) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def continuation_failures(text: str, template: pd.Series, assignment: str, params: DisambiguateParams) -> list[str]:
    """The rules an answer breaks (empty: it is accepted).

    Placeholders: ``{stereo}`` and ``{nonstereo}`` both present, spelled exactly, and no other brace token
    ({lex} only for a template with lexical variants), so each entity lands in the slot the assignment gave
    it. No repeat of the initial text: at most ``max_repeat_share`` of its word 4-grams. Persian script. One
    or two sentences. Whether the story gives the trait to the right entity is a matter of meaning that no
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


def first_request(template: pd.Series, statement: str, assignment: str, prompts: Prompts) -> LLMRequest:
    """The Appendix D prompt for one template and assignment."""
    negative, nonnegative = ASSIGNMENTS[assignment]
    prompt = Template(prompts.main).substitute(
        stereotype=statement,
        answer_negative=negative,
        question_negative=template.question_negative_fa,
        answer_nonnegative=nonnegative,
        question_nonnegative=template.question_nonnegative_fa,
        ambiguous_context=template.ambiguous_fa,
    )
    return LLMRequest(
        messages=(("user", prompt),),
        prompt_hash=prompts.sha256,
        stage=STAGE,
        context=f"template {template.template_id}, assignment {assignment}",
    )


def follow_up(request: LLMRequest, answer: str, failures: list[str], prompts: Prompts) -> LLMRequest:
    """The conversation so far, the answer, and a message that names what it broke."""
    named = " ".join(FAILURES[f] for f in failures)
    message = Template(prompts.retry).substitute(failure=named)
    return LLMRequest(
        messages=(*request.messages, ("assistant", answer), ("user", message)),
        prompt_hash=request.prompt_hash,
        stage=request.stage,
        context=request.context,
    )


def disambiguate(
    templates: pd.DataFrame,
    stereotypes: pd.DataFrame,
    overrides: pd.DataFrame,
    prompts: Prompts,
    client: LLMClient,
    params: DisambiguateParams,
) -> StageOutput:
    """Fill every template's two continuations (template > override > LLM) and route failures to review."""
    table = templates.reset_index(drop=True).assign(
        disambiguated_biased_source="", disambiguated_counter_biased_source=""
    )
    statements = stereotypes.set_index("stereotype_id")["statement_fa"]
    fixes = {(r.template_id, r.assignment): r.text for r in overrides.itertuples()}
    request_ids: dict[str, list[str]] = {t: [] for t in table["template_id"]}
    pending: dict[tuple[int, str], LLMRequest] = {}
    for index, template in table.iterrows():
        for assignment, column in COLUMNS.items():
            source_column = column.replace("_fa", "_source")
            if template[column]:
                table.at[index, source_column] = "human"
            elif (template.template_id, assignment) in fixes:
                table.at[index, column] = fixes[(template.template_id, assignment)]
                table.at[index, source_column] = "override"
            else:
                table.at[index, source_column] = "llm"
                pending[(index, assignment)] = first_request(
                    template, statements[template.stereotype_id], assignment, prompts
                )
    attempts: list[dict] = []
    for attempt in range(1, params.max_attempts + 1):
        if not pending:
            break
        answers = client.complete_many(list(pending.values()))
        still: dict[tuple[int, str], LLMRequest] = {}
        for (key, request), answer in zip(pending.items(), answers, strict=True):
            index, assignment = key
            template = table.loc[index]
            request_ids[template.template_id].append(answer.request_id)
            text = normalize_fa(answer.text)
            failures = continuation_failures(text, template, assignment, params)
            attempts.append(
                {
                    "template_id": template.template_id,
                    "assignment": assignment,
                    "attempt": attempt,
                    "answer": text,
                    "failures": ";".join(failures),
                    "request_id": answer.request_id,
                }
            )
            if failures:
                still[key] = follow_up(request, answer.text, failures, prompts)
            else:
                table.at[index, COLUMNS[assignment]] = text
        pending = still
    failed = {(table.at[index, "template_id"], assignment) for index, assignment in pending}
    log = pd.DataFrame(attempts, columns=REVIEW.names)
    review = log[[(t, a) in failed for t, a in zip(log["template_id"], log["assignment"], strict=True)]]
    table["llm_request_ids"] = table["template_id"].map(request_ids)
    for index, assignment in pending:
        table.at[index, "disambiguated_" + assignment + "_source"] = "review"
    sources = pd.concat([table["disambiguated_biased_source"], table["disambiguated_counter_biased_source"]])
    report = {
        "stage": STAGE,
        "parameters": asdict(params),
        "prompt_sha256": prompts.sha256,
        "counts": {"in": len(table), "out": len(table) - len({t for t, _ in failed}), "continuations": len(sources)},
        "sources": {str(k): int(v) for k, v in sorted(sources.value_counts().items())},
        "dropped": {"total": len(failed), "by_reason": count_reasons(pd.Series(["failed_validation"] * len(failed)))},
        "drops": [{"template_id": t, "assignment": a, "reason": "failed_validation"} for t, a in sorted(failed)],
        "failures_by_rule": count_reasons(log["failures"].str.split(";").explode().loc[lambda s: s != ""]),
        "attempts": len(log),
        "llm": client.usage(STAGE).as_dict(),
    }
    return StageOutput(
        tables={"templates": table, "review": review, "attempts": log},
        schemas={"templates": TEMPLATE_DISAMBIGUATED, "review": REVIEW, "attempts": REVIEW},
        report=report,
        csv=("review",),
    )


def disambiguate_stage(
    templates: pd.DataFrame,
    stereotypes: pd.DataFrame,
    overrides: pd.DataFrame,
    prompts: Prompts,
    llm: LLMConfig,
    transcript: Path | None,
    params: DisambiguateParams,
) -> StageOutput:
    """The stage as the flow runs it: opens the LLM client from configuration, then :func:`disambiguate`."""
    return disambiguate(templates, stereotypes, overrides, prompts, open_llm(llm, transcript), params)


disambiguate_task = stage_task(disambiguate_stage)
