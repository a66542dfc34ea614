"""Local fake LLM servers: OpenAI-compatible chat completions and Anthropic messages.

One stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) serves both
``POST /v1/chat/completions`` and ``POST /v1/messages`` with the response shapes the
official SDKs parse. It counts and records requests (bodies, headers, arrival times on
``time.monotonic``), tracks the peak number in flight, answers through a pluggable
function and injects faults on demand:

- ``"429"``: status 429 with a ``retry-after`` header;
- ``"500"``: status 500 with the same header;
- ``"slow"``: the normal answer, sent only after ``slow_seconds`` (past a client timeout);
- ``"malformed"``: status 200, ``application/json``, a truncated JSON body.

Faults come from a plan (``plan("429", "500")``: the next requests fail in that order)
and/or a seeded rate (``fail_rate("500", 0.1, seed=1)``). With ``expected_key`` set, a
request presenting another key gets a 401 whose message echoes the presented key, as the
worst case for leaking it.

With ``strict=True`` the OpenAI route answers as the official API does when a request breaks one of its rules
(HTTP 400, ``invalid_request_error``, the parameter named; HTTP 404 for a model it does not serve), and records
each refusal in ``refusals``. The rules are written here from the API's own answers, independently of
``tasks/llm/config.py``'s table, so that a wrong table fails the tests:

- ``max_tokens`` to a reasoning model (o1, o1-mini, o1-preview, o3, o3-mini, o4-mini, gpt-5*);
- ``temperature`` other than the default (1) to a reasoning model;
- a ``system`` or ``developer`` message to o1-mini or o1-preview;
- ``reasoning_effort`` to a model that takes none (o1-mini, o1-preview, every non-reasoning model), or a value
  the model does not know.

Batch APIs, answering each item as the chat routes would (same answer function, same response shapes, strict
refusals as failed items): OpenAI's ``POST /v1/files`` (multipart JSONL upload), ``POST /v1/batches``,
``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel`` and ``GET /v1/files/{id}/content``; Anthropic's
``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``, ``POST /v1/messages/batches/{id}/cancel`` and
the ``results_url`` it gives. A batch shows as in progress for ``batch_polls`` looks, then ends. Faults for the
next batches come from ``batch_plan``:

- ``"expired"``: the batch expires; its items at odd positions were not run (OpenAI: ``batch_expired`` lines in
  the error file; Anthropic: ``expired`` results);
- ``"partial"``: the batch completes, but every item at position 3k+2 has no line in any result file;
- ``"errored"``: every item at position 3k+1 failed (OpenAI: an HTTP 500 line in the error file; Anthropic: an
  ``errored`` result);
- ``"stuck"``: the batch never ends until it is cancelled (then it ends with no answers).

The bodies of the batches' items are recorded in ``batch_items``, as a live call's are in ``bodies``.

Usage: ``with FakeLLMServer() as server: OpenAI(base_url=server.openai_base_url, ...)``.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import random
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.local_server import LocalServer, QuietHandler

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
FAULT_KINDS = frozenset({"429", "500", "slow", "malformed"})
BATCH_FAULTS = frozenset({"expired", "partial", "errored", "stuck"})
_ROUTES = (
    ("POST", re.compile(r"/v1/chat/completions|/v1/messages"), "chat"),
    ("POST", re.compile(r"/v1/files"), "openai_upload"),
    ("GET", re.compile(r"/v1/files/(?P<id>[\w-]+)/content"), "openai_file"),
    ("POST", re.compile(r"/v1/batches"), "openai_create"),
    ("GET", re.compile(r"/v1/batches/(?P<id>[\w-]+)"), "openai_batch"),
    ("POST", re.compile(r"/v1/batches/(?P<id>[\w-]+)/cancel"), "openai_cancel"),
    ("POST", re.compile(r"/v1/messages/batches"), "anthropic_create"),
    ("GET", re.compile(r"/v1/messages/batches/(?P<id>[\w-]+)"), "anthropic_batch"),
    ("POST", re.compile(r"/v1/messages/batches/(?P<id>[\w-]+)/cancel"), "anthropic_cancel"),
    ("GET", re.compile(r"/v1/messages/batches/(?P<id>[\w-]+)/results"), "anthropic_results"),
)
"""(method, path, route name) of every route the fake serves."""

AnswerFn = Callable[[dict[str, Any]], str]

_SNAPSHOT = r"(-\d{4}-\d{2}-\d{2})?"
REASONING_MODELS = re.compile(
    rf"(o1|o1-mini|o1-preview|o3|o3-mini|o4-mini){_SNAPSHOT}|gpt-5(\.\d)?(-mini|-nano|-pro)?{_SNAPSHOT}"
)
NO_SYSTEM_MODELS = re.compile(rf"(o1-mini|o1-preview){_SNAPSHOT}")
CHAT_MODELS = re.compile(
    rf"(gpt-4o|gpt-4o-mini|gpt-4\.1|gpt-4\.1-mini|gpt-4\.1-nano|gpt-4-turbo|gpt-3\.5-turbo){_SNAPSHOT}|chatgpt-4o-latest"
)
"""The models the strict fake serves, as the official API names them (with or without a dated snapshot)."""
EFFORTS = ("low", "medium", "high")
"""The ``reasoning_effort`` values of the o-series (gpt-5 adds 'minimal')."""


def official_refusal(body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """The official API's answer to a chat completions body that breaks one of its rules: (status, error body),
    or None for a body it accepts. Messages, types, codes and params are the API's own."""
    model = str(body.get("model", ""))
    reasoning = REASONING_MODELS.fullmatch(model) is not None
    if not reasoning and CHAT_MODELS.fullmatch(model) is None:
        message = f"The model `{model}` does not exist or you do not have access to it."
        return 404, _error(message, None, "model_not_found")
    if reasoning and "max_tokens" in body:
        message = (
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
        )
        return 400, _error(message, "max_tokens", "unsupported_parameter")
    if reasoning and "temperature" in body and body["temperature"] != 1:
        value = json.dumps(body["temperature"])
        message = (
            f"Unsupported value: 'temperature' does not support {value} with this model. "
            "Only the default (1) value is supported."
        )
        return 400, _error(message, "temperature", "unsupported_value")
    if NO_SYSTEM_MODELS.fullmatch(model):
        for index, item in enumerate(body.get("messages", [])):
            if item.get("role") in ("system", "developer"):
                param = f"messages[{index}].role"
                message = f"Unsupported value: '{param}' does not support '{item['role']}' with this model."
                return 400, _error(message, param, "unsupported_value")
    if "reasoning_effort" in body:
        if not reasoning or NO_SYSTEM_MODELS.fullmatch(model):
            message = "Unsupported parameter: 'reasoning_effort' is not supported with this model."
            return 400, _error(message, "reasoning_effort", "unsupported_parameter")
        efforts = ("minimal", *EFFORTS) if model.startswith("gpt-5") else EFFORTS
        if body["reasoning_effort"] not in efforts:
            supported = ", ".join(f"'{e}'" for e in efforts[:-1]) + f", and '{efforts[-1]}'"
            message = (
                f"Unsupported value: 'reasoning_effort' does not support '{body['reasoning_effort']}' with this "
                f"model. Supported values are: {supported}."
            )
            return 400, _error(message, "reasoning_effort", "unsupported_value")
    return None


def _error(message: str, param: str | None, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def echo_answer(body: dict[str, Any]) -> str:
    """Default answer: the last message's content, prefixed with 'echo: '."""
    return "echo: " + str(body["messages"][-1]["content"])


def _count_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: whitespace-separated words."""
    return len(text.split())


class FakeLLMServer(LocalServer):
    """A threaded fake of the OpenAI and Anthropic HTTP APIs (see the module docstring)."""

    def __init__(
        self,
        *,
        answer: AnswerFn = echo_answer,
        latency: float = 0.0,
        slow_seconds: float = 2.0,
        retry_after: str = "0.01",
        expected_key: str | None = None,
        strict: bool = False,
    ) -> None:
        self.answer = answer
        self.strict = strict
        self.refusals: list[dict[str, Any]] = []
        self.latency = latency
        self.slow_seconds = slow_seconds
        self.retry_after = retry_after
        self.expected_key = expected_key
        self._lock = threading.Lock()
        self._plan: deque[str] = deque()
        self._rate: tuple[str, float, random.Random] | None = None
        self._in_flight = 0
        self.requests_total = 0
        self.requests_by_path: Counter[str] = Counter()
        self.faults_served: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.arrivals: list[float] = []
        self.max_in_flight = 0
        self.batch_polls = 2
        """How many looks at a batch find it in progress before it ends."""
        self._batch_plan: deque[str] = deque()
        self.batches: dict[str, _Batch] = {}
        self.files: dict[str, bytes] = {}
        self.batch_items: list[dict[str, Any]] = []
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.fake = self
        super().__init__(httpd, name="fake-llm")

    @property
    def openai_base_url(self) -> str:
        """Base URL for ``openai.OpenAI(base_url=...)``."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Base URL for ``anthropic.Anthropic(base_url=...)``."""
        return self.url

    def _queue(self, queue: deque[str], faults: tuple[str, ...], known: frozenset[str], what: str) -> None:
        unknown = set(faults) - known
        if unknown:
            raise ValueError(f"unknown {what} {sorted(unknown)}; known: {sorted(known)}")
        with self._lock:
            queue.extend(faults)

    def plan(self, *faults: str) -> None:
        """Queue faults for the next requests, one per request, in order."""
        self._queue(self._plan, faults, FAULT_KINDS, "fault kinds")

    def fail_rate(self, kind: str | tuple[str, ...], rate: float, *, seed: int = 0) -> None:
        """Fail a seeded random share ``rate`` of the requests not covered by the plan, with one fault kind or a
        seeded mix of several (``("429", "500", "malformed")``)."""
        kinds = (kind,) if isinstance(kind, str) else tuple(kind)
        unknown = sorted(set(kinds) - FAULT_KINDS)
        if unknown or not kinds:
            raise ValueError(f"unknown fault kind(s) {unknown}; known: {sorted(FAULT_KINDS)}")
        with self._lock:
            self._rate = (kinds, rate, random.Random(seed))

    def batch_plan(self, *faults: str) -> None:
        """Queue batch faults for the next batches, one per batch, in order (see the module docstring)."""
        self._queue(self._batch_plan, faults, BATCH_FAULTS, "batch faults")

    def reset(self) -> None:
        """Forget recorded requests, counters and pending faults."""
        with self._lock:
            self._plan.clear()
            self._batch_plan.clear()
            self.batches.clear()
            self.files.clear()
            self.batch_items.clear()
            self._rate = None
            self.requests_total = 0
            self.requests_by_path.clear()
            self.faults_served.clear()
            self.refusals.clear()
            self.bodies.clear()
            self.headers.clear()
            self.arrivals.clear()
            self.max_in_flight = 0

    def _begin(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> str | None:
        """Record a request, mark it in flight and pick its fault (None for a normal answer)."""
        with self._lock:
            self.requests_total += 1
            self.requests_by_path[path] += 1
            self.bodies.append(body)
            self.headers.append(headers)
            self.arrivals.append(time.monotonic())
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            fault: str | None = None
            if self._plan:
                fault = self._plan.popleft()
            elif self._rate is not None:
                kinds, rate, rng = self._rate
                if rng.random() < rate:
                    fault = rng.choice(kinds)
            if fault is not None:
                self.faults_served[fault] += 1
            return fault

    def _refuse(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """In strict mode, the official API's refusal of an OpenAI request (recorded), else None."""
        refusal = official_refusal(body) if self.strict else None
        if refusal is not None:
            with self._lock:
                self.refusals.append(refusal[1]["error"])
        return refusal

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _new_batch(self, provider: str, items: list[tuple[str, dict[str, Any]]]) -> _Batch:
        """Run a batch's items now (its answers show once it ends): (custom id, body) each, in order."""
        with self._lock:
            fault = self._batch_plan.popleft() if self._batch_plan else None
            batch_id = f"{'batch' if provider == 'openai' else 'msgbatch'}_fake{len(self.batches) + 1}"
            self.batch_items.extend(body for _, body in items)
        outcomes: list[tuple[str, str, Any]] = []  # (custom id, kind, payload)
        for index, (custom_id, body) in enumerate(items):
            refusal = self._refuse(body) if provider == "openai" else None
            if fault == "stuck":
                outcomes.append((custom_id, "canceled", None))
            elif fault == "expired" and index % 2 == 1:
                outcomes.append((custom_id, "expired", None))
            elif fault == "partial" and index % 3 == 2:
                continue
            elif fault == "errored" and index % 3 == 1:
                outcomes.append((custom_id, "errored", (500, _item_error("fake item fault", "server_error"))))
            elif refusal is not None:
                outcomes.append((custom_id, "errored", refusal))
            else:
                text = self.answer(body)
                shape = _openai_completion if provider == "openai" else _anthropic_message
                outcomes.append((custom_id, "succeeded", shape(body, text)))
        batch = _Batch(batch_id, provider, len(items), outcomes, fault)
        with self._lock:
            self.batches[batch_id] = batch
        return batch

    def _look(self, batch_id: str) -> _Batch:
        """A look at a batch (counted: it ends after ``batch_polls`` looks unless stuck)."""
        with self._lock:
            batch = self.batches[batch_id]
            batch.looks += 1
            if not batch.ended and batch.looks > self.batch_polls and (batch.fault != "stuck" or batch.cancelled):
                batch.ended = True
            return batch

    def _store_file(self, data: bytes) -> str:
        with self._lock:
            file_id = f"file-fake{len(self.files) + 1}"
            self.files[file_id] = data
            return file_id


class _Batch:
    """A fake batch: its items' outcomes, decided when it was created, and how far it has been looked at."""

    def __init__(
        self, batch_id: str, provider: str, size: int, outcomes: list[tuple[str, str, Any]], fault: str | None
    ) -> None:
        self.id = batch_id
        self.provider = provider
        self.size = size
        self.outcomes = outcomes
        self.fault = fault
        self.looks = 0
        self.ended = False
        self.cancelled = False
        self.input_file_id = ""
        self.output_file_id: str | None = None
        self.error_file_id: str | None = None

    def share(self, polls: int) -> float:
        """The share of the items processed so far."""
        return 1.0 if self.ended else min(self.looks, polls) / (polls + 1)

    def count(self, *kinds: str) -> int:
        return sum(1 for _, kind, _ in self.outcomes if kind in kinds)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    fake: FakeLLMServer


class _Handler(QuietHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in one segment, without Nagle: two small writes would wait ~40 ms
    # for the client's delayed ACK on every response.
    wbufsize = 64 * 1024
    disable_nagle_algorithm = True
    server: _Server
    route = "chat"
    item_id = ""

    def do_POST(self) -> None:
        self._handle("POST")

    def do_GET(self) -> None:
        self._handle("GET")

    def _handle(self, method: str) -> None:
        fake = self.server.fake
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        route, match = next(
            ((name, m) for verb, pattern, name in _ROUTES if verb == method and (m := pattern.fullmatch(path))),
            (None, None),
        )
        if route is None or match is None:
            self._send(404, {"error": {"message": f"no route {method} {path}", "type": "not_found"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        body = _upload(raw, headers) if route == "openai_upload" else (json.loads(raw) if raw else {})
        fault = fake._begin(path, body, headers)
        try:
            self.route, self.item_id = route, match.groupdict().get("id", "")
            self._respond(fake, body, headers, fault)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            fake._end()

    def _respond(self, fake: FakeLLMServer, body: dict[str, Any], headers: dict[str, str], fault: str | None) -> None:
        """Answer a request of route ``self.route`` (``self.item_id``: the batch or file it names); tests may
        replace this method, so its signature stays."""
        if fake.latency:
            time.sleep(fake.latency)
        presented = _presented_key(headers)
        if fake.expected_key is not None and presented != fake.expected_key:
            message = f"Incorrect API key provided: {presented}."
            self._send(401, {"type": "error", "error": {"message": message, "type": "authentication_error"}})
            return
        refusal = fake._refuse(body) if self.path == OPENAI_PATH else None
        if refusal is not None:
            self._send(*refusal)
            return
        if fault in ("429", "500"):
            status = int(fault)
            error = {
                "message": f"fake fault {fault}",
                "type": "rate_limit_error" if status == 429 else "api_error",
            }
            self._send(status, {"type": "error", "error": error}, {"retry-after": fake.retry_after})
            return
        if fault == "malformed":
            self._send_raw(200, b'{"id": "fake-malformed", "choices": [{"message": {"content": "tru')
            return
        if fault == "slow":
            time.sleep(fake.slow_seconds)
        if self.route != "chat":
            self._batch_route(fake, self.route, self.item_id, body)
            return
        text = fake.answer(body)
        if self.path == OPENAI_PATH:
            self._send(200, _openai_completion(body, text))
        else:
            self._send(200, _anthropic_message(body, text))

    def _batch_route(self, fake: FakeLLMServer, route: str, item_id: str, body: dict[str, Any]) -> None:
        """The batch APIs' routes (see the module docstring)."""
        if route == "openai_upload":
            file_id = fake._store_file(body["data"])
            self._send(200, _file_object(file_id, body))
        elif route == "openai_file":
            if item_id not in fake.files:
                self._send(404, _item_error(f"No such File object: {item_id}", "invalid_request_error"))
            else:
                self._send_raw(200, fake.files[item_id], content_type="application/octet-stream")
        elif route == "openai_create":
            data = fake.files.get(body.get("input_file_id", ""))
            if data is None or body.get("endpoint") != OPENAI_PATH or body.get("completion_window") != "24h":
                self._send(
                    400, _item_error("bad batch: unknown input file, endpoint or window", "invalid_request_error")
                )
                return
            lines = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
            if any(line.get("url") != OPENAI_PATH or line.get("method") != "POST" for line in lines):
                self._send(400, _item_error("every line must POST to /v1/chat/completions", "invalid_request_error"))
                return
            batch = fake._new_batch("openai", [(line["custom_id"], line["body"]) for line in lines])
            batch.input_file_id = body["input_file_id"]
            self._send(200, _openai_batch(batch, fake.batch_polls))
        elif route == "anthropic_create":
            requests = body.get("requests", [])
            batch = fake._new_batch("anthropic", [(r["custom_id"], r["params"]) for r in requests])
            self._send(200, _anthropic_batch(batch, fake.batch_polls, fake.anthropic_base_url))
        elif item_id not in fake.batches:
            self._send(404, _item_error(f"No such batch: {item_id}", "not_found_error"))
        elif route in ("openai_cancel", "anthropic_cancel"):
            fake.batches[item_id].cancelled = True
            batch = fake.batches[item_id]
            if route == "openai_cancel":
                self._send(200, _openai_batch(batch, fake.batch_polls))
            else:
                self._send(200, _anthropic_batch(batch, fake.batch_polls, fake.anthropic_base_url))
        elif route == "openai_batch":
            batch = fake._look(item_id)
            if batch.ended and batch.output_file_id is None and batch.error_file_id is None:
                output, errors = _openai_result_files(batch)
                batch.output_file_id = fake._store_file(output) if output else None
                batch.error_file_id = fake._store_file(errors) if errors else None
            self._send(200, _openai_batch(batch, fake.batch_polls))
        elif route == "anthropic_batch":
            self._send(200, _anthropic_batch(fake._look(item_id), fake.batch_polls, fake.anthropic_base_url))
        else:  # anthropic_results
            batch = fake.batches[item_id]
            if not batch.ended:
                self._send(404, _item_error("batch has not ended", "not_found_error"))
                return
            lines = [
                json.dumps({"custom_id": custom_id, "result": _anthropic_result(kind, payload)}, ensure_ascii=False)
                for custom_id, kind, payload in batch.outcomes
            ]
            self._send_raw(200, ("\n".join(lines) + "\n").encode(), content_type="application/binary")

    def _send(self, status: int, payload: dict[str, Any], extra_headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload, ensure_ascii=False).encode(), extra_headers)

    def _send_raw(
        self,
        status: int,
        data: bytes,
        extra_headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for name, value in (extra_headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _presented_key(headers: dict[str, str]) -> str:
    """The key a request carries: Anthropic's x-api-key or an OpenAI bearer token."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    return headers.get("authorization", "").removeprefix("Bearer ")


def _prompt_text(body: dict[str, Any]) -> str:
    parts = [str(m["content"]) for m in body["messages"]]
    if isinstance(body.get("system"), str):
        parts.append(body["system"])
    return " ".join(parts)


def _openai_completion(body: dict[str, Any], text: str) -> dict[str, Any]:
    tokens_in, tokens_out = _count_tokens(_prompt_text(body)), _count_tokens(text)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }


def _anthropic_message(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": _count_tokens(_prompt_text(body)), "output_tokens": _count_tokens(text)},
    }


def _upload(raw: bytes, headers: dict[str, str]) -> dict[str, Any]:
    """A multipart/form-data file upload: its purpose, file name and bytes."""
    head = f"Content-Type: {headers.get('content-type', '')}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    fields: dict[str, Any] = {"purpose": None, "filename": None, "data": b""}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if name == "file":
            fields["filename"] = part.get_filename()
            fields["data"] = payload
        elif name == "purpose":
            fields["purpose"] = payload.decode()
    return fields


def _item_error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _file_object(file_id: str, upload: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": len(upload["data"]),
        "created_at": 1_700_000_000,
        "filename": upload["filename"] or "upload.jsonl",
        "purpose": upload["purpose"] or "batch",
        "status": "processed",
    }


def _openai_batch(batch: _Batch, polls: int) -> dict[str, Any]:
    """The Batch object as ``GET /v1/batches/{id}`` returns it."""
    share = batch.share(polls)
    if batch.ended:
        status = "cancelled" if batch.cancelled else "expired" if batch.fault == "expired" else "completed"
    elif batch.cancelled:
        status = "cancelling"
    else:
        status = "validating" if batch.looks == 0 else "in_progress"
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": OPENAI_PATH,
        "errors": None,
        "input_file_id": batch.input_file_id,
        "completion_window": "24h",
        "status": status,
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "created_at": 1_700_000_000,
        "request_counts": {
            "total": batch.size,
            "completed": int(batch.count("succeeded") * share),
            "failed": int(batch.count("errored", "expired", "canceled") * share),
        },
        "metadata": None,
    }


def _openai_result_files(batch: _Batch) -> tuple[bytes, bytes]:
    """An ended batch's output file (answers) and error file (failed and expired items)."""
    output: list[str] = []
    errors: list[str] = []
    for index, (custom_id, kind, payload) in enumerate(batch.outcomes):
        line: dict[str, Any] = {"id": f"batch_req_{index}", "custom_id": custom_id, "response": None, "error": None}
        if kind == "succeeded":
            line["response"] = {"status_code": 200, "request_id": f"req_{index}", "body": payload}
            output.append(json.dumps(line, ensure_ascii=False))
            continue
        if kind == "errored":
            status, error = payload
            line["response"] = {"status_code": status, "request_id": f"req_{index}", "body": error}
        elif kind == "expired":
            message = "This request could not be executed before the completion window expired."
            line["error"] = {"code": "batch_expired", "message": message}
        else:
            line["error"] = {"code": "batch_cancelled", "message": "This request was cancelled."}
        errors.append(json.dumps(line, ensure_ascii=False))
    return ("".join(f"{line}\n" for line in output).encode(), "".join(f"{line}\n" for line in errors).encode())


def _anthropic_batch(batch: _Batch, polls: int, base_url: str) -> dict[str, Any]:
    """The MessageBatch object as ``GET /v1/messages/batches/{id}`` returns it."""
    share = batch.share(polls)
    counts = dict.fromkeys(("succeeded", "errored", "canceled", "expired"), 0)
    if batch.ended:
        for kind in counts:
            counts[kind] = batch.count(kind)
    status = "ended" if batch.ended else "canceling" if batch.cancelled else "in_progress"
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": {"processing": batch.size - int(batch.size * share), **counts},
        "ended_at": "2024-09-24T19:00:00Z" if batch.ended else None,
        "created_at": "2024-09-24T18:37:24Z",
        "expires_at": "2024-09-25T18:37:24Z",
        "archived_at": None,
        "cancel_initiated_at": "2024-09-24T18:50:00Z" if batch.cancelled else None,
        "results_url": f"{base_url}/v1/messages/batches/{batch.id}/results" if batch.ended else None,
    }


def _anthropic_result(kind: str, payload: Any) -> dict[str, Any]:
    if kind == "succeeded":
        return {"type": "succeeded", "message": payload}
    if kind == "errored":
        _, error = payload
        detail = {"type": "api_error", "message": error["error"]["message"]}
        return {"type": "errored", "error": {"type": "error", "error": detail}}
    return {"type": kind}
