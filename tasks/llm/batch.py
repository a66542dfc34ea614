"""``llm.mode = "batch"``: every store miss sent at once through the provider's batch API, at half the price.

OpenAI's Batch API: the requests go up as a JSONL file (``files.create``, purpose ``batch``) of
``/v1/chat/completions`` bodies, ``batches.create`` starts the batch, ``batches.retrieve`` is polled until it ends
(completed, failed, expired or cancelled), and ``files.content`` reads its output file (answers) and error file
(requests that failed or expired). Anthropic's Message Batches: ``messages.batches.create`` with the requests,
``messages.batches.retrieve`` polled until ``processing_status`` is ``ended``, ``messages.batches.results`` for
the results. Both through the official SDKs, with the client's key, endpoint, retries and timeout.

Each request's ``custom_id`` is its request key, and each body is what a live call sends, so an answer lands in
the response store exactly as a live call's would: a batch build and a live build replay alike. A batch over
the provider's limits (``BATCH_LIMITS``) is split. Polling waits ``llm.batch_poll_interval`` seconds, then each
wait ``BACKOFF`` times longer up to ``llm.batch_poll_max_interval``, for at most ``llm.batch_max_wait`` seconds
(then the batch is cancelled). A passing transport failure while polling is logged and polled again.

A request the batch did not answer (expired, errored, missing from the results, malformed) is called live when
``llm.batch_fallback = "live"``, or all are reported in one :class:`LLMError` when it is ``"report"``; the answers
the batch did give are stored first either way, so a second build sends only what is still missing.
"""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import anthropic
import openai
import pydantic
from openai.types.chat import ChatCompletion

from ..core.progress import RequestProgress
from .config import (
    BATCH_DISCOUNT,
    LLMConfig,
    LLMError,
    LLMRequest,
    LLMResponse,
    estimated_cost,
    sent_messages,
    sent_parameters,
)
from .live import LiveTransport, anthropic_answer, anthropic_messages, anthropic_system, openai_answer
from .transport import Answer, CutOff, MalformedAnswer, Miss, Recorder, Transport, where

log = logging.getLogger(__name__)

BACKOFF = 1.5
"""Each wait between two looks at a batch is this many times the one before (up to ``batch_poll_max_interval``)."""
TRANSFER_TIMEOUT = 600.0
"""Seconds for one upload or download of a batch (files of up to 200 MB, request bodies of up to 256 MB)."""
OPENAI_ENDPOINT: Final = "/v1/chat/completions"
MB = 1_000_000


@dataclass(frozen=True)
class BatchLimits:
    """The most one batch may hold: requests, and bytes of its JSONL lines."""

    requests: int
    bytes: int


BATCH_LIMITS: dict[str, BatchLimits] = {
    "openai": BatchLimits(50_000, 200 * MB),  # Batch API: an input file of up to 50,000 requests and 200 MB
    "anthropic": BatchLimits(100_000, 256 * MB),  # Message Batches: up to 100,000 requests or 256 MB
}
"""Per-batch limits of each provider's batch API; a larger set of misses is split into several batches."""

_TRANSIENT = (
    openai.RateLimitError,
    openai.InternalServerError,
    anthropic.RateLimitError,
    anthropic.InternalServerError,
)
"""HTTP failures of a poll worth another poll later, as timeouts and dropped connections are (the SDK has
already retried each ``max_retries`` times)."""


@dataclass(frozen=True)
class _Status:
    """One look at a batch: whether it has ended, how many of its requests are processed, and its state."""

    ended: bool
    processed: int
    state: str


class Batches(ABC):
    """One provider's batch API, through its official SDK."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config

    @abstractmethod
    def item(self, key: str, request: LLMRequest) -> dict[str, Any]:
        """The batch line of one request: its key as ``custom_id``, and what a live call would send."""

    @abstractmethod
    def submit(self, items: Sequence[dict[str, Any]]) -> str:
        """Start a batch of ``items``; its id."""

    @abstractmethod
    def poll(self, batch_id: str, size: int) -> _Status:
        """One look at a batch of ``size`` requests."""

    @abstractmethod
    def results(self, batch_id: str) -> tuple[dict[str, Answer], dict[str, str], str]:
        """An ended batch's answers and failure reasons by custom id, and the reason of a request it has no line
        for at all."""

    @abstractmethod
    def cancel(self, batch_id: str) -> None:
        """Ask the provider to stop a batch."""


class OpenAIBatches(Batches):
    def __init__(self, config: LLMConfig, sdk: openai.OpenAI) -> None:
        super().__init__(config)
        self.sdk = sdk
        self._seen: dict[str, Any] = {}

    def item(self, key: str, request: LLMRequest) -> dict[str, Any]:
        body = {"model": self.config.model, "messages": sent_messages(self.config, request)}
        return {"custom_id": key, "method": "POST", "url": OPENAI_ENDPOINT, "body": body | sent_parameters(self.config)}

    def submit(self, items: Sequence[dict[str, Any]]) -> str:
        data = "".join(_jsonl(item) for item in items).encode("utf-8")
        upload = self.sdk.files.create(
            file=("pbbq-batch.jsonl", data, "application/jsonl"), purpose="batch", timeout=TRANSFER_TIMEOUT
        )
        batch = self.sdk.batches.create(input_file_id=upload.id, endpoint=OPENAI_ENDPOINT, completion_window="24h")
        return batch.id

    def poll(self, batch_id: str, size: int) -> _Status:
        batch = self.sdk.batches.retrieve(batch_id)
        self._seen[batch_id] = batch
        counts = batch.request_counts
        processed = (counts.completed + counts.failed) if counts is not None else 0
        ended = batch.status in ("completed", "failed", "expired", "cancelled")
        return _Status(ended, processed, batch.status)

    def results(self, batch_id: str) -> tuple[dict[str, Answer], dict[str, str], str]:
        batch = self._seen[batch_id]
        answers: dict[str, Answer] = {}
        failures: dict[str, str] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = self.sdk.files.content(file_id, timeout=TRANSFER_TIMEOUT)
            for line in content.content.decode("utf-8").splitlines():
                if not line.strip():
                    continue
                custom_id, outcome = self._line(json.loads(line))
                if isinstance(outcome, str):
                    failures[custom_id] = outcome
                else:
                    answers[custom_id] = outcome
        missing = f"batch {batch.status}"
        if batch.status == "failed" and batch.errors is not None and batch.errors.data:
            missing += ": " + "; ".join(f"{error.code}: {error.message}" for error in batch.errors.data[:3])
        elif batch.status == "completed":
            missing = "no line in the batch's output or error file"
        return answers, failures, missing

    def _line(self, line: dict[str, Any]) -> tuple[str, Answer | str]:
        """One line of an output or error file: its custom id and its answer, or why it has none."""
        custom_id = str(line.get("custom_id"))
        response = line.get("response") or {}
        error = line.get("error") or {}
        if response.get("status_code") == 200:
            try:
                return custom_id, openai_answer(self.config, ChatCompletion.model_validate(response.get("body")))
            except (CutOff, MalformedAnswer) as err:
                return custom_id, str(err)
            except pydantic.ValidationError:
                return custom_id, "malformed answer (not a chat completion)"
        if response:
            return custom_id, _http_reason(response.get("status_code"), response.get("body"))
        return custom_id, f"{error.get('code') or 'error'}: {error.get('message') or 'no detail'}"

    def cancel(self, batch_id: str) -> None:
        self.sdk.batches.cancel(batch_id)


class AnthropicBatches(Batches):
    def __init__(self, config: LLMConfig, sdk: anthropic.Anthropic) -> None:
        super().__init__(config)
        self.sdk = sdk

    def item(self, key: str, request: LLMRequest) -> dict[str, Any]:
        params = {"model": self.config.model, "messages": anthropic_messages(request)}
        return {"custom_id": key, "params": params | sent_parameters(self.config) | anthropic_system(request)}

    def submit(self, items: Sequence[dict[str, Any]]) -> str:
        batch = self.sdk.messages.batches.create(requests=items, timeout=TRANSFER_TIMEOUT)  # type: ignore[arg-type]
        return batch.id

    def poll(self, batch_id: str, size: int) -> _Status:
        batch = self.sdk.messages.batches.retrieve(batch_id)
        processed = max(0, size - batch.request_counts.processing)
        return _Status(batch.processing_status == "ended", processed, batch.processing_status)

    def results(self, batch_id: str) -> tuple[dict[str, Answer], dict[str, str], str]:
        answers: dict[str, Answer] = {}
        failures: dict[str, str] = {}
        for line in self.sdk.messages.batches.results(batch_id, timeout=TRANSFER_TIMEOUT):
            result = line.result
            if result.type == "succeeded":
                try:
                    answers[line.custom_id] = anthropic_answer(result.message)
                except MalformedAnswer as err:
                    failures[line.custom_id] = str(err)
            elif result.type == "errored":
                error = result.error.error
                failures[line.custom_id] = f"errored ({error.type}): {error.message}"
            else:  # canceled, expired
                failures[line.custom_id] = result.type
        return answers, failures, "no line in the batch's results"

    def cancel(self, batch_id: str) -> None:
        self.sdk.messages.batches.cancel(batch_id)


class BatchTransport(Transport):
    """``llm.mode = "batch"``: a client's misses through the provider's batch API, one request (and what a batch
    did not answer, with ``llm.batch_fallback = "live"``) through the live transport it wraps."""

    def __init__(self, live: LiveTransport) -> None:
        self.live = live
        self.api: Batches = (
            OpenAIBatches(live.config, live.sdk)
            if isinstance(live.sdk, openai.OpenAI)
            else AnthropicBatches(live.config, live.sdk)
        )

    def answer(self, request: LLMRequest) -> Answer:
        return self.live.answer(request)

    def answer_all(self, misses: Sequence[Miss], recorder: Recorder, stages: str) -> dict[str, LLMResponse]:
        """Answer ``misses`` through the provider's batch API (split at its limits), store every answer, and call
        live (or report) what the batches did not answer."""
        with RequestProgress(len(misses), f"{stages} (batch)") as progress:
            submitted = _submit_all(self.live, self.api, recorder, misses)
            answers, failures = _wait_all(self.live, self.api, recorder, submitted, progress)
        if failures:
            answers.update(_fallback(self, recorder, misses, failures, stages, list(submitted)))
        return answers


def _wait_all(
    live: LiveTransport,
    api: Batches,
    recorder: Recorder,
    submitted: dict[str, list[Miss]],
    progress: RequestProgress,
) -> tuple[dict[str, LLMResponse], dict[str, str]]:
    """Poll the batches until each ends (storing its answers as it does) or ``batch_max_wait`` passes (then
    cancel it); the answers, and the reasons of the requests left unanswered. Anything that stops the wait
    (an error, an interrupt) cancels the batches still running, whose answers could not be collected."""
    config = live.config
    answers: dict[str, LLMResponse] = {}
    failures: dict[str, str] = {}
    processed: dict[str, int] = dict.fromkeys(submitted, 0)
    pending = dict(submitted)
    deadline = time.monotonic() + config.batch_max_wait
    interval = config.batch_poll_interval
    try:
        while pending:
            time.sleep(max(0.0, min(interval, deadline - time.monotonic())))
            for batch_id, chunk in list(pending.items()):
                status = _poll(live, api, batch_id, len(chunk))
                if status is None:
                    continue
                processed[batch_id] = status.processed
                log.debug("batch %s: %s, %d of %d processed", batch_id, status.state, status.processed, len(chunk))
                if status.ended:
                    del pending[batch_id]  # ended: nothing to cancel, even if its results cannot be read
                    got, lost = _collect(live, api, recorder, batch_id, chunk)
                    answers.update(got)
                    failures.update(lost)
                    processed[batch_id] = len(chunk)
                    progress.advance(0, estimated_cost(config, got.values(), BATCH_DISCOUNT))
            progress.advance(sum(processed.values()) - progress.done)
            if pending and time.monotonic() >= deadline:
                reason = f"not ended within llm.batch_max_wait = {config.batch_max_wait:g} s"
                for batch_id, chunk in pending.items():
                    _cancel(live, api, batch_id)
                    failures.update(dict.fromkeys((key for key, _ in chunk), f"batch {batch_id} {reason}"))
                pending.clear()
            interval = min(interval * BACKOFF, config.batch_poll_max_interval)
    finally:
        for batch_id in pending:
            _cancel(live, api, batch_id)
    return answers, failures


def _submit_all(live: LiveTransport, api: Batches, recorder: Recorder, misses: Sequence[Miss]) -> dict[str, list[Miss]]:
    """Submit the misses in as few batches as the limits allow; batch id to its requests. A failed submission
    cancels the batches already submitted and raises."""
    submitted: dict[str, list[Miss]] = {}
    limits = BATCH_LIMITS[live.config.provider]
    for chunk, items in _chunks(api, misses, limits):
        try:
            batch_id = _call(live, f"submitting a batch of {len(chunk)} request(s)", api.submit, items)
        except LLMError:
            for earlier in submitted:
                _cancel(live, api, earlier)
            raise
        for _, request in chunk:
            recorder.sent(request)
        submitted[batch_id] = chunk
        log.info(
            "%s %s: batch %s submitted with %d request(s)",
            live.config.provider,
            live.config.model,
            batch_id,
            len(chunk),
        )
    return submitted


def _chunks(
    api: Batches, misses: Sequence[Miss], limits: BatchLimits
) -> Iterator[tuple[list[Miss], list[dict[str, Any]]]]:
    """The misses and their batch items, cut wherever the next item would pass a limit."""
    chunk: list[Miss] = []
    items: list[dict[str, Any]] = []
    size = 0
    for key, request in misses:
        item = api.item(key, request)
        length = len(_jsonl(item).encode("utf-8"))
        if chunk and (len(chunk) >= limits.requests or size + length > limits.bytes):
            yield chunk, items
            chunk, items, size = [], [], 0
        chunk.append((key, request))
        items.append(item)
        size += length
    if chunk:
        yield chunk, items


def _poll(live: LiveTransport, api: Batches, batch_id: str, size: int) -> _Status | None:
    """The batch's status, or None after a passing transport failure (logged; polled again later)."""
    try:
        return _call(live, f"polling batch {batch_id}", api.poll, batch_id, size, transient_ok=True)
    except _Transient as err:
        log.warning("%s; polling again later", err)
        return None


def _collect(
    live: LiveTransport, api: Batches, recorder: Recorder, batch_id: str, chunk: Sequence[Miss]
) -> tuple[dict[str, LLMResponse], dict[str, str]]:
    """Store an ended batch's answers under their keys; the reasons of the requests it did not answer."""
    got, lost, missing = _call(live, f"reading the results of batch {batch_id}", api.results, batch_id)
    answers: dict[str, LLMResponse] = {}
    failures: dict[str, str] = {}
    for key, request in chunk:
        if key in got:
            answers[key] = recorder.record(key, request, got[key])
        else:
            failures[key] = lost.get(key, missing)
    if failures:
        log.warning("batch %s: %d of %d request(s) not answered", batch_id, len(failures), len(chunk))
    return answers, failures


def _cancel(live: LiveTransport, api: Batches, batch_id: str) -> None:
    """Cancel a batch, logging (not raising) a failure to: the caller is already giving up on it."""
    log.warning("cancelling batch %s", batch_id)
    try:
        _call(live, f"cancelling batch {batch_id}", api.cancel, batch_id)
    except LLMError as err:
        log.warning("%s", err)


def _fallback(
    transport: BatchTransport,
    recorder: Recorder,
    misses: Sequence[Miss],
    failures: dict[str, str],
    stages: str,
    batch_ids: list[str],
) -> dict[str, LLMResponse]:
    """Call the unanswered requests live, or report them in one error (``llm.batch_fallback``)."""
    live = transport.live
    config = live.config
    unanswered = [(key, request) for key, request in misses if key in failures]
    reasons = Counter(failures[key] for key, _ in unanswered)
    summary = "; ".join(f"{count} × {reason}" for reason, count in reasons.most_common(3))
    if len(reasons) > 3:
        summary += f"; {len(reasons) - 3} other reason(s)"
    key, first = unanswered[0]
    head = (
        f"batch mode: {len(unanswered)} of {len(misses)} request(s) got no answer from {config.provider} "
        f"batch(es) {', '.join(batch_ids)} ({summary})"
    )
    if config.batch_fallback == "report":
        raise LLMError(
            live.scrub(
                f"{head}; first: {where(config, first)}, request {key[:12]}. The {len(misses) - len(unanswered)} "
                'answered are stored: build again to send the rest in a new batch, or set llm.batch_fallback = "live" '
                "to call them one by one."
            )
        )
    log.warning("%s", live.scrub(f"{head}; calling them live"))
    with RequestProgress(len(unanswered), f"{stages} (live, after batch)") as progress:
        return recorder.call_each(unanswered, transport, progress)


class _Transient(LLMError):
    """A poll that failed in passing (connection, timeout, 429, 5xx)."""


def _call[T](live: LiveTransport, what: str, function: Callable[..., T], *args: Any, transient_ok: bool = False) -> T:
    """An SDK call of the batch API; its failure as an :class:`LLMError` without the key, naming ``what``
    (a :class:`_Transient` one for a passing failure when ``transient_ok``). Raised outside the ``except``, so the
    SDK's exception, whose text may echo the key, is not chained to it."""
    config = live.config
    status: int | None = None
    transient = False
    try:
        return function(*args)
    except (openai.APIStatusError, anthropic.APIStatusError) as err:
        detail, status, transient = live.refusal(err), err.status_code, isinstance(err, _TRANSIENT)
        if status == 404 and config.provider == "openai" and what.startswith("submitting"):
            detail += ' (does this server offer the Batch API? If not, set llm.mode = "auto")'
    except (openai.APITimeoutError, anthropic.APITimeoutError):
        detail, transient = f"timed out after {config.max_retries} retries", True
    except (openai.APIConnectionError, anthropic.APIConnectionError):
        detail, transient = f"connection failed after {config.max_retries} retries", True
    except (openai.OpenAIError, anthropic.AnthropicError, pydantic.ValidationError, ValueError) as err:
        detail = f"{type(err).__name__}: {err}"
    kind = _Transient if transient_ok and transient else LLMError
    raise kind(live.scrub(f"{config.provider} {config.model!r}, {what}: {detail}"), status_code=status)


def _http_reason(status: Any, body: Any) -> str:
    """An HTTP failure of one batch request in one line: status, the API's type and code, its message."""
    error = body.get("error", body) if isinstance(body, dict) else {}
    if not isinstance(error, dict):
        error = {"message": str(error)}
    kinds = ", ".join(str(error[name]) for name in ("type", "code") if error.get(name))
    param = f"; parameter {error['param']!r}" if error.get("param") else ""
    message = " ".join(str(error.get("message") or "no detail").split())
    return f"HTTP {status} ({kinds}{param}): {message}" if kinds or param else f"HTTP {status}: {message}"


def _jsonl(item: dict[str, Any]) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n"
