"""The LLM loop of a translate stage: every segment translated (entity phrases, variants and groups first, then
questions and contexts told their entities' translation), validated and retried with the broken rules named, then
translated back and scored with chrF."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..llm import LLMClient, LLMRequest, LLMResponse
from ..text.languages import Language
from .checks import Failure, lost_group_terms, translation_failures
from .chrf import chrf_scores
from .glossary import Glossary
from .pair import PERSIAN_ENGLISH, Pair, TranslateParams, attempt_schema, segment_schema
from .requests import TranslatePrompts, back_request, follow_up, forward_request


def _clean(text: str, kind: str, target: Language) -> str:
    """The answer's words, one space apart; a bare phrase (an entity, a group) without its article."""
    text = " ".join(text.split())
    return target.without_article(text) if kind in ("entity", "group") else text


def _translate_batch(
    batch: pd.DataFrame,
    translations: dict[str, str],
    prompts: TranslatePrompts,
    client: LLMClient,
    params: TranslateParams,
    log: list[dict[str, Any]],
    pair: Pair,
) -> dict[str, tuple[str, list[Failure], list[str]]]:
    """Translate, validate and retry one batch of segments; per segment id its last translation (normalised by
    the target's ``normalize``), the rules that answer broke and every request id."""
    rows = {row["segment_id"]: row for row in batch.to_dict(orient="records")}
    entities = {
        sid: {e: translations[e] for e in row["entities"]} if row["kind"] in ("question", "context") else {}
        for sid, row in rows.items()
    }
    pending = {
        sid: forward_request(row, entities[sid] if row["kind"] == "context" else {}, prompts, pair)
        for sid, row in rows.items()
    }
    results: dict[str, tuple[str, list[Failure], list[str]]] = {}
    for attempt in range(1, params.max_attempts + 1):
        if not pending:
            break
        answers: list[LLMResponse] = client.complete_many(list(pending.values()))
        still: dict[str, LLMRequest] = {}
        for (sid, request), answer in zip(pending.items(), answers, strict=True):
            row = rows[sid]
            written = _clean(answer.text, row["kind"], pair.target)
            failures = translation_failures(
                row["kind"], row[pair.source_column], written, entities[sid], row["glossary"], pair
            )
            text = pair.target.normalize(written)
            ids = [*results.get(sid, ("", [], []))[2], answer.request_id]
            results[sid] = (text, failures, ids)
            log.append(
                {
                    "segment_id": sid,
                    "kind": row["kind"],
                    "attempt": attempt,
                    pair.target_column: text,
                    "failures": ";".join(f.code for f in failures),
                    "messages": " ".join(f.message for f in failures),
                    "request_id": answer.request_id,
                }
            )
            if failures:
                still[sid] = follow_up(request, answer.text, failures, row["kind"], prompts)
        pending = still
    return results


def translate_segments(
    table: pd.DataFrame,
    prompts: TranslatePrompts,
    client: LLMClient,
    params: TranslateParams,
    glossary: Glossary,
    pair: Pair = PERSIAN_ENGLISH,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every segment's translation (validated, retried), its back-translation into the source (normalised by the
    source's ``normalize``), chrF and lost group terms (:func:`~pbbq.tasks.translate.checks.lost_group_terms`); and
    every attempt.

    Entity phrases, lexical variants and groups go first: a context's request holds its entities' translation."""
    translations: dict[str, str] = {}
    results: dict[str, tuple[str, list[Failure], list[str]]] = {}
    log: list[dict[str, Any]] = []
    for kinds in (("entity", "lex", "group"), ("question", "context")):
        batch = table[table["kind"].isin(kinds)]
        done = _translate_batch(batch, translations, prompts, client, params, log, pair)
        results.update(done)
        translations.update(
            {text: done[sid][0] for sid, text in zip(batch["segment_id"], batch[pair.source_column], strict=True)}
        )
    back_requests = [back_request(sid, results[sid][0], prompts, pair) for sid in table["segment_id"]]
    answers = client.complete_many(back_requests)
    backs = [pair.source.normalize(answer.text) for answer in answers]
    scores = chrf_scores(backs, table[pair.source_column].tolist())
    rows = []
    for sid, kind, agreement, source_text, entries, answer, back, score in zip(
        table["segment_id"],
        table["kind"],
        table["agreement"],
        table[pair.source_column],
        table["glossary"],
        answers,
        backs,
        scores,
        strict=True,
    ):
        text, failures, ids = results[sid]
        failures = [*failures, *lost_group_terms(entries, back, glossary)]
        rows.append(
            {
                "segment_id": sid,
                "kind": kind,
                "agreement": agreement,
                pair.source_column: source_text,
                "glossary": [f"{fa} → {term}" for fa, term in entries],
                pair.target_column: text,
                "attempts": len(ids),
                "failures": ";".join(dict.fromkeys(f.code for f in failures)),
                f"back_{pair.source.code}": back,
                "chrf": score,
                "flagged": score < params.min_chrf,
                "request_ids": [*ids, answer.request_id],
            }
        )
    segment, attempt = segment_schema(pair.source, pair.target), attempt_schema(pair.target)
    return pd.DataFrame(rows, columns=segment.names), pd.DataFrame(log, columns=attempt.names)
