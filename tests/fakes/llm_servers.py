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
``tasks/llm.py``'s table, so that a wrong table fails the tests:

- ``max_tokens`` to a reasoning model (o1, o1-mini, o1-preview, o3, o3-mini, o4-mini, gpt-5*);
- ``temperature`` other than the default (1) to a reasoning model;
- a ``system`` or ``developer`` message to o1-mini or o1-preview;
- ``reasoning_effort`` to a model that takes none (o1-mini, o1-preview, every non-reasoning model), or a value
  the model does not know.

Usage: ``with FakeLLMServer() as server: OpenAI(base_url=server.openai_base_url, ...)``.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
FAULT_KINDS = frozenset({"429", "500", "slow", "malformed"})

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


class FakeLLMServer:
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
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._serve, name="fake-llm", daemon=True)

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def openai_base_url(self) -> str:
        """Base URL for ``openai.OpenAI(base_url=...)``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Base URL for ``anthropic.Anthropic(base_url=...)``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeLLMServer:
        """Start serving in a daemon thread."""
        self._thread.start()
        return self

    def _serve(self) -> None:
        self._httpd.serve_forever(poll_interval=0.02)

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def plan(self, *faults: str) -> None:
        """Queue faults for the next requests, one per request, in order."""
        unknown = set(faults) - FAULT_KINDS
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {sorted(FAULT_KINDS)}")
        with self._lock:
            self._plan.extend(faults)

    def fail_rate(self, kind: str | tuple[str, ...], rate: float, *, seed: int = 0) -> None:
        """Fail a seeded random share ``rate`` of the requests not covered by the plan, with one fault kind or a
        seeded mix of several (``("429", "500", "malformed")``)."""
        kinds = (kind,) if isinstance(kind, str) else tuple(kind)
        unknown = sorted(set(kinds) - FAULT_KINDS)
        if unknown or not kinds:
            raise ValueError(f"unknown fault kind(s) {unknown}; known: {sorted(FAULT_KINDS)}")
        with self._lock:
            self._rate = (kinds, rate, random.Random(seed))

    def reset(self) -> None:
        """Forget recorded requests, counters and pending faults."""
        with self._lock:
            self._plan.clear()
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    fake: FakeLLMServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in one segment, without Nagle: two small writes would wait ~40 ms
    # for the client's delayed ACK on every response.
    wbufsize = 64 * 1024
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        if self.path not in (OPENAI_PATH, ANTHROPIC_PATH):
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        body = json.loads(raw)
        headers = {k.lower(): v for k, v in self.headers.items()}
        fault = fake._begin(self.path, body, headers)
        try:
            self._respond(fake, body, headers, fault)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            fake._end()

    def _respond(self, fake: FakeLLMServer, body: dict[str, Any], headers: dict[str, str], fault: str | None) -> None:
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
        text = fake.answer(body)
        if self.path == OPENAI_PATH:
            self._send(200, _openai_completion(body, text))
        else:
            self._send(200, _anthropic_message(body, text))

    def _send(self, status: int, payload: dict[str, Any], extra_headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload, ensure_ascii=False).encode(), extra_headers)

    def _send_raw(self, status: int, data: bytes, extra_headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
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
