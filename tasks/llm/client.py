"""The client: each request answered from the response store or, on a miss, through one transport, with the
usage and estimated cost of every stage (docs/architecture.md §6).

Modes: ``live`` calls and records, ``replay`` answers from its transcript only, ``auto`` calls on a miss,
``batch`` sends every miss at once through the provider's batch API at half the price (:mod:`.batch`) and records
the answers under the same keys, so a batch build replays as a live one does, and ``stand-in`` answers every
request offline with labelled placeholder text (:mod:`.stand_in`). While requests are sent,
``tasks/progress.py`` shows how far they are.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core.artifacts import ArtifactStore
from ..core.progress import RequestProgress
from ..imports import one_import_at_a_time
from .config import (
    BATCH_DISCOUNT,
    STAND_IN_MODE,
    LLMConfig,
    LLMError,
    LLMRequest,
    LLMResponse,
    ReplayMissError,
    canonical_json,
    estimated_cost,
    request_key,
    request_payload,
)
from .rate import RateLimiter
from .stand_in import StandInAnswerer
from .store import (
    RECORDED,
    STAND_IN,
    ResponseStore,
    StoredResponse,
    open_store,
    transcript_header,
    transcript_source,
)
from .transport import Answer, MalformedAnswer, Miss, Transport, where

log = logging.getLogger(__name__)


class UsageCounter:
    """Requests, cache hits, tokens and estimated cost of one stage (thread-safe)."""

    def __init__(self, stage: str, provider: str, model: str, prices: Mapping[str, tuple[float, float]]) -> None:
        self.stage = stage
        self.provider = provider
        self.model = model
        self._price = prices.get(model)
        self._lock = threading.Lock()
        self.requests_sent = 0
        self.cache_hits = 0
        self.tokens_in = 0
        self.tokens_out = 0

    def record_hit(self) -> None:
        """A distinct request answered from the store."""
        with self._lock:
            self.cache_hits += 1

    def record_sent(self) -> None:
        """A call issued through the SDK (its own transport retries are not visible here)."""
        with self._lock:
            self.requests_sent += 1

    def record_tokens(self, tokens_in: int, tokens_out: int) -> None:
        """Tokens of a successful call."""
        with self._lock:
            self.tokens_in += tokens_in
            self.tokens_out += tokens_out

    @property
    def cost_usd(self) -> float | None:
        """Estimated cost at the live price, None for a model without a price (a batch costs
        ``BATCH_DISCOUNT`` times this; :func:`usage_summary` prints both)."""
        if self._price is None:
            return None
        per_in, per_out = self._price
        return round((self.tokens_in * per_in + self.tokens_out * per_out) / 1_000_000, 6)

    def as_dict(self) -> dict[str, Any]:
        """The stage's LLM usage for its report.json."""
        with self._lock:
            counts = {
                "requests_sent": self.requests_sent,
                "cache_hits": self.cache_hits,
                "tokens_in": self.tokens_in,
                "tokens_out": self.tokens_out,
            }
        note = None if self._price is not None else f"no price for model {self.model!r} in llm.prices"
        return {
            "stage": self.stage,
            "provider": self.provider,
            "model": self.model,
            **counts,
            "cost_usd": self.cost_usd,
            "cost_note": note,
        }


class LLMClient:
    """Answers requests from the store and/or the provider, with bounded concurrency and a rate limit."""

    def __init__(
        self,
        config: LLMConfig,
        store: ResponseStore | None = None,
        *,
        transcript: Path | None = None,
        transport: Transport | None = None,
    ) -> None:
        """``store`` defaults to ``open_store(config.store_path)``; ``transcript`` is imported into it and is the
        only recording this client reads (:attr:`sources`). ``transport`` answers the misses in place of the
        provider (mode ``stand-in`` has :class:`StandInAnswerer` unless given another); without one, the first
        miss opens the provider's (:class:`LiveTransport`, or :class:`BatchTransport` in mode ``batch``)."""
        self.config = config
        self.store = store if store is not None else open_store(config.store_path)
        self._limiter = RateLimiter(config.requests_per_minute) if config.requests_per_minute else None
        self._usage: dict[str, UsageCounter] = {}
        self._usage_lock = threading.Lock()
        self.transcript = transcript
        self.transcript_sha256: str | None = self.store.transcript_sha256
        """The transcript this client replays (its file's sha256), if any."""
        if transcript is not None:
            self.store.import_jsonl(transcript)
            self.transcript_sha256 = transcript_source(transcript)
        self.stand_in = config.mode == STAND_IN_MODE or (
            transcript is not None and config.mode != "live" and transcript_header(transcript).get("stand_in") is True
        )
        """Its answers are placeholders: mode ``stand-in``, or a replay of a stand-in build's transcript."""
        if transport is None and config.mode == STAND_IN_MODE:
            transport = StandInAnswerer()
        self.transport = transport

    @property
    def sources(self) -> tuple[str, ...]:
        """The stored answers this client may use, first match first (docs/architecture.md §6): its transcript's
        in replay (without one, the answers this store got from the model), the transcript's then the model's in
        auto and batch, none in live and stand-in (every request is answered anew)."""
        if self.config.mode in ("live", STAND_IN_MODE):
            return ()
        named = (self.transcript_sha256,) if self.transcript_sha256 else ()
        if self.config.mode == "replay":
            return named or (RECORDED,)
        return (*named, RECORDED)

    @property
    def record_source(self) -> str:
        """The source this client's new answers are stored under."""
        return STAND_IN if self.config.mode == STAND_IN_MODE else RECORDED

    def __getstate__(self) -> dict[str, Any]:
        """A client goes to another worker (a Dask task runner) as its configuration and its store's file; the
        worker opens the store again, with its own locks, SDK connection and usage counters."""
        if self.store.read_only:
            raise TypeError("an LLM client over a transcript opened read-only cannot go to another worker")
        return {
            "config": self.config,
            "store_path": self.store.path,
            "transcript": self.transcript,
            "transcript_sha256": self.transcript_sha256,
            "stand_in": self.stand_in,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"], open_store(state["store_path"]))  # type: ignore[misc]
        self.transcript, self.transcript_sha256 = state["transcript"], state["transcript_sha256"]
        self.stand_in = state["stand_in"]

    def cache_identity(self) -> dict[str, Any]:
        """What a stage's cached result depends on: the request fields (:meth:`LLMConfig.cache_identity`) and where
        the answers come from: the transcript (another recording may answer differently), the model's recorded
        answers, or the stand-in (:attr:`sources`, :attr:`record_source`)."""
        called = () if self.config.mode == "replay" else (self.record_source,)
        return {"config": self.config.cache_identity(), "answers": list(dict.fromkeys((*self.sources, *called)))}

    def export(self, keys: Iterable[str], path: Path, note: str, kept: ArtifactStore | None = None) -> str:
        """Write the answers of a build's own requests (``keys``) as a transcript that replays it with no key,
        each from the sources this client read or wrote; the header of a build with stand-in answers (its own or a
        replayed stand-in transcript's) says ``"stand_in": true``. Returns the file's sha256.

        With ``kept`` (a content store, docs/architecture.md §5), a transcript whose every answer comes from the
        transcript this client replays first (stored under that file's hash: they never change) is made once per
        header, transcript and keys, and placed at ``path`` from ``kept`` by reference; a rebuild writes none of it.
        One whose keys changed copies the lines of the last such plain transcript of that header and transcript
        (its answers are the same) and makes only the added keys' lines (:meth:`ResponseStore.write_transcript`).
        """
        header: dict[str, Any] = {"note": note, "provider": self.config.provider, "model": self.config.model}
        if self.stand_in:
            header["stand_in"] = True
        sources = tuple(dict.fromkeys((*self.sources, self.record_source)))
        wanted = sorted(set(keys))
        replayed = self.transcript_sha256
        if kept is None or not replayed or sources[0] != replayed or not self.store.holds(wanted, replayed):
            return self.store.write_transcript(path, header, wanted, sources)[0]
        lineage = canonical_json({"header": header, "answers": replayed, "gzip": path.suffix})
        previous = kept.recall(lineage) if path.suffix != ".gz" else None
        digest = kept.memo_written(
            canonical_json({"header": header, "answers": replayed, "keys": wanted, "gzip": path.suffix}),
            path.name,
            lambda scratch: self.store.write_transcript(
                scratch, header, wanted, sources, previous=kept.file(previous) if previous else None
            )[0],
        )
        kept.remember(lineage, digest)
        kept.place(digest, path)
        return digest

    def usage(self, stage: str) -> UsageCounter:
        """The usage counter of ``stage`` (created empty on first use)."""
        with self._usage_lock:
            if stage not in self._usage:
                self._usage[stage] = UsageCounter(stage, self.config.provider, self.config.model, self.config.prices)
            return self._usage[stage]

    def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer one request."""
        return self.complete_many([request])[0]

    def complete_many(self, requests: Sequence[LLMRequest]) -> list[LLMResponse]:
        """Answer every request, in order; identical requests are answered once."""
        keys = [request_key(self.config, request) for request in requests]
        distinct = dict(zip(keys, requests, strict=True))
        answers: dict[str, LLMResponse] = {}
        if self.sources:
            stored = self.store.get_many(distinct, self.sources)
            for key, request in distinct.items():
                record = stored.get(key)
                if record is not None:
                    answers[key] = LLMResponse(record.text, key, True, record.tokens_in, record.tokens_out)
                    self.usage(request.stage).record_hit()
        misses = [(key, request) for key, request in distinct.items() if key not in answers]
        if misses:
            transport = self._transport_for(misses)
            stages = ", ".join(sorted({request.stage for _, request in misses}))
            answers.update(transport.answer_all(misses, self, stages))
        log.info(
            "llm %s %s: %d requests, %d distinct, %d from the store, %d called",
            self.config.provider,
            self.config.model,
            len(requests),
            len(distinct),
            len(distinct) - len(misses),
            len(misses),
        )
        return [answers[key] for key in keys]

    def _transport_for(self, misses: Sequence[Miss]) -> Transport:
        """The transport that answers ``misses`` (opened on the first miss that needs the provider); fails early,
        naming what is missing and how to go live, when a miss cannot be called."""
        key, first = misses[0]
        place = f"stage {first.stage!r} ({first.context}), prompt {first.prompt_hash[:12]}, request {key[:12]}"
        if self.config.mode == "replay":
            recording = f"the transcript {self.transcript}" if self.transcript else f"the store {self.store.path}"
            raise ReplayMissError(
                f"replay mode: no recorded answer for {place}; {len(misses)} request(s) missing from {recording}. "
                f'To try the change offline, build with --stand-in ([llm] mode = "stand-in": labelled placeholder '
                f"answers, never uploaded); to call the model, set PBBQ_LLM_MODE=live or auto and the API key env "
                f"var {self.config.api_key_env}."
            )
        if self.transport is not None:
            return self.transport
        if self.store.read_only:
            raise LLMError(
                f"{len(misses)} request(s) not in the read-only transcript {self.store.path} "
                f"(first: {place}); import it into a SQLite store (llm.store_path) to record new answers."
            )
        secret = os.environ.get(self.config.api_key_env, "")
        if not secret:
            raise LLMError(
                f"mode {self.config.mode!r} must call {self.config.provider} for {len(misses)} "
                f"request(s) (first: {place}) but the API key env var {self.config.api_key_env} is not set; set it "
                "(a local OpenAI-compatible server accepts any value) or replay a complete transcript."
            )
        from .live import LiveTransport  # imports its provider's SDK: a build that replays never loads one

        self.transport = live = LiveTransport(self.config, secret)
        if self.config.mode == "batch":
            with one_import_at_a_time():  # both SDKs
                from .batch import BatchTransport

            self.transport = BatchTransport(live)
        return self.transport

    def sent(self, request: LLMRequest) -> None:
        """Count a request as sent to the provider (its SDK's own transport retries are not visible here)."""
        self.usage(request.stage).record_sent()

    def call_each(
        self, misses: Sequence[Miss], transport: Transport, progress: RequestProgress
    ) -> dict[str, LLMResponse]:
        """Ask ``transport`` for each miss on at most ``max_concurrency`` threads (none for a transport without
        threads); stop at the first failure: no call starts after it (a refused request would be refused
        again), and the calls in flight finish. ``progress`` advances from this thread (the one holding the
        Prefect run context) as calls complete."""
        if not transport.threads:
            answers = {}
            for key, request in misses:
                answers[key] = self._call_one(key, request, transport)
                progress.advance(1, estimated_cost(self.config, [answers[key]]))
            return answers
        workers = min(self.config.max_concurrency, len(misses))
        failed = threading.Event()

        def call(key: str, request: LLMRequest) -> LLMResponse:
            if failed.is_set():
                raise _Stopped
            try:
                return self._call_one(key, request, transport)
            except BaseException:
                failed.set()
                raise

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pbbq-llm") as pool:
            futures = [pool.submit(call, key, request) for key, request in misses]
            for done in as_completed(futures):  # linear in the calls (waiting on the pending set is quadratic)
                if done.exception() is not None:
                    for future in futures:
                        future.cancel()
                    break
                progress.advance(1, estimated_cost(self.config, [done.result()]))
        for future in futures:
            error = None if future.cancelled() else future.exception()
            if error is not None and not isinstance(error, _Stopped):
                raise error
        return {response.request_id: response for response in (future.result() for future in futures)}

    def _call_one(self, key: str, request: LLMRequest, transport: Transport) -> LLMResponse:
        """Ask the transport once (again for a malformed answer, a bounded number of times) and record the answer."""
        attempts = 1 + self.config.max_retries
        for attempt in range(1, attempts + 1):
            if self._limiter is not None:
                self._limiter.acquire()
            self.sent(request)
            try:
                answer = transport.answer(request)
            except MalformedAnswer as err:
                log.warning(
                    "%s: malformed answer (%s), attempt %d of %d", where(self.config, request), err, attempt, attempts
                )
                continue
            return self.record(key, request, answer)
        raise LLMError(f"{where(self.config, request)}: malformed answer {attempts} times in a row")

    def record(self, key: str, request: LLMRequest, answer: Answer) -> LLMResponse:
        """Count an answer's tokens and store it under its request key (every transport's alike)."""
        text, tokens_in, tokens_out = answer
        self.usage(request.stage).record_tokens(tokens_in, tokens_out)
        created_at = datetime.now(UTC).isoformat(timespec="seconds")
        payload = request_payload(self.config, request)
        self.store.put(
            StoredResponse(
                key,
                self.config.provider,
                self.config.model,
                payload,
                text,
                tokens_in,
                tokens_out,
                created_at,
            ),
            self.record_source,
        )
        log.debug(
            "%s: answered, request %s, %d+%d tokens",
            where(self.config, request),
            key[:12],
            tokens_in,
            tokens_out,
        )
        return LLMResponse(text, key, False, tokens_in, tokens_out)


class _Stopped(Exception):
    """A call not started because another call of the batch had failed."""


def open_llm(config: LLMConfig, transcript: Path | None) -> LLMClient:
    """A client over the configured store, with a transcript's answers imported first (every line checked, the
    first time the store sees the file) when one is given."""
    return LLMClient(config, open_store(config.store_path), transcript=transcript)


def usage_summary(reports: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per LLM stage for the end of a build: requests sent, answers from the store, tokens, and the
    estimated cost both live and as a batch (``BATCH_DISCOUNT`` of live)."""
    lines = []
    for stage, report in reports.items():
        usage = report.get("llm")
        if not usage:
            continue
        live = usage["cost_usd"]
        cost = "cost unknown" if live is None else f"${live:.4f} live, ${live * BATCH_DISCOUNT:.4f} as batch"
        cached = " (stage cached: figures of the run that computed it)" if report.get("cached") else ""
        lines.append(
            f"{stage}: {usage['requests_sent']} requests sent, {usage['cache_hits']} from the store, "
            f"{usage['tokens_in']} tokens in, {usage['tokens_out']} out, {cost}{cached}"
        )
    return lines
