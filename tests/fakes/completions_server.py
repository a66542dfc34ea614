"""A local fake of an OpenAI-compatible completions server with prompt log-probabilities (vLLM, llama.cpp), for
lm-evaluation-harness's ``local-completions`` backend, and of the chat endpoints its generation backends call.

One stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (port 0):

- ``GET /tokenizer_info``, ``POST /tokenize``, ``POST /detokenize``: vLLM's tokenizer endpoints, which lm-eval's
  ``tokenizer_backend=remote`` uses, so no tokenizer is downloaded. Tokens are UTF-8 bytes (id = byte + 1); id 0
  is the end-of-text token ``<eot>``.
- ``POST /v1/completions`` with ``echo: true, logprobs: 1, max_tokens: 1``: for each prompt (a list of token ids,
  or a string), every prompt token's log-probability (the first one ``null``, as vLLM answers) and one generated
  token, with ``top_logprobs``. A token's log-probability is a fixed function of it and the token before, so
  the same prompt always scores the same and different options score differently.
- ``POST /v1/completions`` without ``echo`` and ``POST /v1/chat/completions``, ``POST /v1/messages`` (Anthropic):
  a generated answer chosen from :data:`ANSWERS` by a hash of the prompt, one of which names no option.

``requests`` counts the requests per path; ``fail_after(n)`` makes every completions request after the next
``n`` answer HTTP 500 (a server that dies mid-run), ``recover()`` ends that.

Usage: ``with FakeCompletionsServer() as server: ... base_url=server.completions_url ...``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections import Counter
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.local_server import LocalServer, QuietHandler

EOT = "<eot>"
EOT_ID = 0
ANSWERS = ("(a)", "b", "The answer is (c).", "I am not sure.")
"""Generated answers, picked by the prompt's hash: a letter, a bare letter, a letter in a sentence, and one that
names no option (unparseable)."""


def encode(text: str) -> list[int]:
    if text == EOT:
        return [EOT_ID]
    return [byte + 1 for byte in text.encode("utf-8")]


def decode(tokens: list[int]) -> str:
    return bytes(token - 1 for token in tokens if token != EOT_ID).decode("utf-8", errors="replace")


def token_logprob(previous: int, token: int) -> float:
    """log p(token | previous): in [−4.2, −0.2], a fixed function of the two ids."""
    return -(0.2 + ((previous * 1_000_003 + token * 97 + 13) % 1009) / 252.25)


def _answer(prompt: str) -> str:
    return ANSWERS[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % len(ANSWERS)]


class _Handler(QuietHandler):
    server: _Server

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.server.owner.count(self.path)
        if self.path == "/tokenizer_info":
            self._send(200, {"eos_token": EOT, "bos_token": None, "pad_token": EOT, "chat_template": None})
        else:
            self._send(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        owner = self.server.owner
        owner.count(self.path)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/tokenize":
            self._send(200, {"tokens": encode(body["prompt"])})
        elif self.path == "/detokenize":
            self._send(200, {"prompt": decode(body["tokens"])})
        elif self.path in ("/v1/completions", "/v1/chat/completions", "/v1/messages"):
            if not owner.admit():
                self._send(500, {"error": {"message": "the fake server is down", "type": "server_error"}})
            elif self.path == "/v1/completions":
                self._send(200, _completions(body))
            elif self.path == "/v1/chat/completions":
                content = _answer(json.dumps(body["messages"], ensure_ascii=False))
                choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                self._send(200, {"id": "fake", "object": "chat.completion", "choices": [choice]})
            else:
                content = _answer(json.dumps(body["messages"], ensure_ascii=False))
                self._send(200, {"id": "fake", "type": "message", "content": [{"type": "text", "text": content}]})
        else:
            self._send(404, {"error": f"no route {self.path}"})


def _completions(body: dict[str, Any]) -> dict[str, Any]:
    prompts = body["prompt"]
    if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
        prompts = [prompts]
    choices = []
    for index, prompt in enumerate(prompts):
        tokens = encode(prompt) if isinstance(prompt, str) else list(prompt)
        if not body.get("echo"):
            choices.append({"index": index, "text": _answer(decode(tokens)), "finish_reason": "stop"})
            continue
        generated = (sum(tokens) % 255) + 1
        sequence = [*tokens, generated]
        logprobs: list[float | None] = [None] + [
            token_logprob(previous, token) for previous, token in itertools.pairwise(sequence)
        ]
        top = [None] + [{str(token): lp, "<other>": -0.1} for token, lp in zip(sequence[1:], logprobs[1:], strict=True)]
        choices.append(
            {
                "index": index,
                "text": decode(sequence),
                "logprobs": {"tokens": [str(t) for t in sequence], "token_logprobs": logprobs, "top_logprobs": top},
                "finish_reason": "length",
            }
        )
    return {"id": "fake", "object": "text_completion", "choices": choices}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: FakeCompletionsServer


class FakeCompletionsServer(LocalServer):
    """The fake, started on enter and stopped on exit; ``requests`` counts requests per path."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._budget: int | None = None
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        super().__init__(httpd)

    @property
    def completions_url(self) -> str:
        return f"{self.url}/v1/completions"

    @property
    def chat_url(self) -> str:
        return f"{self.url}/v1/chat/completions"

    @property
    def messages_url(self) -> str:
        return f"{self.url}/v1/messages"

    def model_calls(self) -> int:
        """Requests to the model endpoints (not the tokenizer's)."""
        with self._lock:
            return sum(count for path, count in self.requests.items() if path.startswith("/v1/"))

    def count(self, path: str) -> None:
        with self._lock:
            self.requests[path] += 1

    def fail_after(self, n: int) -> None:
        """Answer the next ``n`` model requests, then HTTP 500 until :meth:`recover`."""
        with self._lock:
            self._budget = n

    def recover(self) -> None:
        with self._lock:
            self._budget = None

    def admit(self) -> bool:
        with self._lock:
            if self._budget is None:
                return True
            if self._budget > 0:
                self._budget -= 1
                return True
            return False
