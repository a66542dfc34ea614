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
from .frames import from_columns, records
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
    log: list[tuple[Any, ...]],
    pair: Pair,
) -> dict[str, tuple[str, list[Failure], list[str]]]:
    """Translate, validate and retry one batch of segments; per segment id its last translation (normalised by
    the target's ``normalize``), the rules that answer broke and every request id. Each answer goes to ``log`` as a
    row of :func:`~pbbq.tasks.translate.pair.attempt_schema`."""
    rows = {row["segment_id"]: row for row in records(batch)}
    entities = {
        sid: {e: translations[e] for e in row["entities"]} if row["kind"] in ("question", "context") else {}
        for sid, row in rows.items()
    }
    pending = {
        sid: forward_request(row, entities[sid] if row["kind"] == "context" else {}, prompts, pair)
        for sid, row in rows.items()
    }
    results: dict[str, tuple[str, list[Failure], list[str]]] = {}
    target, source_column = pair.target, pair.source_column
    for attempt in range(1, params.max_attempts + 1):
        if not pending:
            break
        answers: list[LLMResponse] = client.complete_many(list(pending.values()))
        still: dict[str, LLMRequest] = {}
        for (sid, request), answer in zip(pending.items(), answers, strict=True):
            row = rows[sid]
            kind = row["kind"]
            written = _clean(answer.text, kind, target)
            failures = translation_failures(kind, row[source_column], written, entities[sid], row["glossary"], pair)
            text = target.normalize(written)
            ids = [*results.get(sid, ("", [], []))[2], answer.request_id]
            results[sid] = (text, failures, ids)
            codes, messages = ";".join(f.code for f in failures), " ".join(f.message for f in failures)
            log.append((sid, kind, attempt, text, codes, messages, answer.request_id))
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
    log: list[tuple[Any, ...]] = []
    for kinds in (("entity", "lex", "group"), ("question", "context")):
        batch = table[table["kind"].isin(kinds)]
        done = _translate_batch(batch, translations, prompts, client, params, log, pair)
        results.update(done)
        sources = zip(batch["segment_id"].tolist(), batch[pair.source_column].tolist(), strict=True)
        translations.update({text: done[sid][0] for sid, text in sources})
    ids = table["segment_id"].tolist()
    source_texts = table[pair.source_column].tolist()
    answers = client.complete_many([back_request(sid, results[sid][0], prompts, pair) for sid in ids])
    backs = [pair.source.normalize(answer.text) for answer in answers]
    scores = chrf_scores(backs, source_texts)
    failures = [
        [*results[sid][1], *lost_group_terms(entries, back, glossary)]
        for sid, entries, back in zip(ids, table["glossary"].tolist(), backs, strict=True)
    ]
    columns = {
        "segment_id": ids,
        "kind": table["kind"].tolist(),
        "agreement": table["agreement"].tolist(),
        pair.source_column: source_texts,
        "glossary": [[f"{fa} → {term}" for fa, term in entries] for entries in table["glossary"].tolist()],
        pair.target_column: [results[sid][0] for sid in ids],
        "attempts": [len(results[sid][2]) for sid in ids],
        "failures": [";".join(dict.fromkeys(f.code for f in broken)) for broken in failures],
        f"back_{pair.source.code}": backs,
        "chrf": scores,
        "flagged": [score < params.min_chrf for score in scores],
        "request_ids": [[*results[sid][2], answer.request_id] for sid, answer in zip(ids, answers, strict=True)],
    }
    segment, attempt = segment_schema(pair.source, pair.target), attempt_schema(pair.target)
    return from_columns(columns, segment.names), pd.DataFrame(log, columns=attempt.names)
