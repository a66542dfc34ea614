"""The live transport: one request at a time through the official ``openai`` and ``anthropic`` SDKs
(docs/architecture.md §6).

Transport failures (429, 5xx, timeouts, dropped connections) are retried by the official
SDKs only (``max_retries``, ``timeout``). A 200 whose body is not valid JSON is not
retried by either SDK (openai 3.54 and anthropic 2.12 both raise a bare
``json.JSONDecodeError`` after one request), so such an answer is a :class:`MalformedAnswer`, which the client
asks again up to ``max_retries`` times (the SDK's own budget for transport errors), as it does for a
well-formed answer that carries no text. A refused request (HTTP 400) is not retried: its error names the
parameter and what to change (``llm.model_rule``).

The API key is read from the environment variable the config names by the client, passed to the SDK
and scrubbed from every error this transport raises; it is never stored or logged.

A transport imports its own provider's SDK only, when it opens, under the import lock (``tasks/imports.py``): the
two SDKs cost 1.2-1.3 s of CPU to import, openai alone 0.45 s, and a build calls one provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..imports import one_import_at_a_time
from .config import (
    REDACTED,
    TOKEN_LIMITS,
    LLMConfig,
    LLMError,
    LLMRequest,
    sent_messages,
    sent_parameters,
)
from .transport import Answer, CutOff, MalformedAnswer, Transport, where

if TYPE_CHECKING:
    import anthropic
    import openai


@dataclass(frozen=True)
class _SDK:
    """One provider's SDK as the transport uses it: its client, one call, and the exception classes that
    :meth:`LiveTransport.answer` tells apart, in the order it tries them."""

    client: openai.OpenAI | anthropic.Anthropic
    send: Callable[[LLMRequest], Answer]
    malformed: tuple[type[Exception], ...]
    """A 200 whose body could not be read: ``json.JSONDecodeError`` or the SDK's response validation error."""
    status: type[openai.APIStatusError] | type[anthropic.APIStatusError]
    timeout: type[Exception]
    connection: type[Exception]
    other: type[Exception]
    """The SDK's base error."""

    @classmethod
    def of(
        cls,
        module: ModuleType,
        client: openai.OpenAI | anthropic.Anthropic,
        send: Callable[[LLMRequest], Answer],
        base_error: type[Exception],
    ) -> _SDK:
        """``module``'s SDK, its exception classes found by the names both SDKs give them."""
        return cls(
            client,
            send,
            (json.JSONDecodeError, module.APIResponseValidationError),
            module.APIStatusError,
            module.APITimeoutError,
            module.APIConnectionError,
            base_error,
        )


def _client_options(config: LLMConfig, secret: str) -> dict[str, Any]:
    """The key, endpoint, retries and timeout, as both SDKs' clients take them."""
    return {
        "api_key": secret,
        "base_url": config.base_url,
        "max_retries": config.max_retries,
        "timeout": config.timeout,
    }


def _openai(config: LLMConfig, secret: str) -> _SDK:
    with one_import_at_a_time():
        import openai

    sdk = openai.OpenAI(**_client_options(config, secret))

    def send(request: LLMRequest) -> Answer:
        completion = sdk.chat.completions.create(
            model=config.model,
            messages=sent_messages(config, request),  # type: ignore[arg-type]  # the SDK types each role's message apart
            **sent_parameters(config),
        )
        return openai_answer(config, completion)

    return _SDK.of(openai, sdk, send, openai.OpenAIError)


def _anthropic(config: LLMConfig, secret: str) -> _SDK:
    with one_import_at_a_time():
        import anthropic

    sdk = anthropic.Anthropic(**_client_options(config, secret))

    def send(request: LLMRequest) -> Answer:
        message = sdk.messages.create(  # type: ignore[call-overload]  # its typed messages, as for OpenAI's above
            model=config.model,
            messages=anthropic_messages(request),
            **sent_parameters(config),
            **anthropic_system(request),
        )
        return anthropic_answer(message)

    return _SDK.of(anthropic, sdk, send, anthropic.AnthropicError)


class LiveTransport(Transport):
    """Each request as one SDK call, with the client's key, endpoint, retries and timeout."""

    def __init__(self, config: LLMConfig, secret: str) -> None:
        self.config = config
        self._secret = secret
        self._api = (_openai if config.provider == "openai" else _anthropic)(config, secret)
        self.sdk = self._api.client

    def answer(self, request: LLMRequest) -> Answer:
        """One SDK call; its failure as an :class:`LLMError` without the key, raised outside the ``except`` so that
        the SDK's exception, whose text may echo the key, is not chained to it."""
        api = self._api
        try:
            return api.send(request)
        except api.malformed as err:
            failure: Exception = MalformedAnswer(self.scrub(f"{type(err).__name__}: {err}"))
        except api.status as err:
            failure = self.error(request, self.refusal(err), err.status_code)
        except api.timeout:
            failure = self.error(request, f"timed out ({self.config.timeout}s) after {self.config.max_retries} retries")
        except api.connection:
            failure = self.error(request, f"connection failed after {self.config.max_retries} retries")
        except api.other as err:
            failure = self.error(request, f"{type(err).__name__}: {err}")
        except CutOff as err:
            failure = self.error(request, str(err))
        raise failure

    def refusal(self, err: openai.APIStatusError | anthropic.APIStatusError) -> str:
        """An HTTP error in one line: status, the API's type, code and the parameter it named, its message, and
        for a parameter the model's rule chose, the ``llm.model_rule`` that changes it."""
        body = err.body.get("error", err.body) if isinstance(err.body, dict) else err.body
        if not isinstance(body, dict):
            body = {"message": body if isinstance(body, str) and body else err.message}
        param = body.get("param")
        kinds = ", ".join(str(body[name]) for name in ("type", "code") if body.get(name))
        named = f"parameter {param!r}" if param else ""
        head = "; ".join(part for part in (kinds, named) if part)
        message = " ".join(str(body.get("message") or err.message).split())
        detail = f"HTTP {err.status_code} ({head}): {message}" if head else f"HTTP {err.status_code}: {message}"
        fix = _rule_fix(str(param or ""), self.config) if self.config.provider == "openai" else None
        if fix is not None:
            detail += f" To change what {self.config.model!r} is sent: {fix}."
        return detail

    def error(self, request: LLMRequest, detail: str, status_code: int | None = None) -> LLMError:
        """A failure of ``request`` as an :class:`LLMError` without the key."""
        return LLMError(self.scrub(f"{where(self.config, request)}: {detail}"), status_code=status_code)

    def scrub(self, text: str) -> str:
        """Replace the API key wherever it occurs."""
        return text.replace(self._secret, REDACTED) if self._secret else text


def _rule_fix(param: str, config: LLMConfig) -> str | None:
    """What to set in the configuration when the API refuses a parameter the model's rule decided."""
    rule = config.rule
    if param in TOKEN_LIMITS:
        other = next(name for name in TOKEN_LIMITS if name != param)
        return f'set [llm] model_rule = {{ token_limit = "{other}" }}'
    if param == "temperature":
        return "set [llm] model_rule = { temperature = false } and remove llm.temperature"
    if param.startswith("messages[") and param.endswith(".role") and rule.system_message:
        return "set [llm] model_rule = { system_message = false }"
    if param == "reasoning_effort":
        return "remove reasoning_effort from [llm] model_rule"
    return None


def _checked(text: object, tokens_in: int | None, tokens_out: int | None) -> Answer:
    """An answer's text and token counts; an answer without text counts as malformed."""
    if not isinstance(text, str):
        raise MalformedAnswer("the answer carries no text")
    return Answer(text, int(tokens_in or 0), int(tokens_out or 0))


def anthropic_messages(request: LLMRequest) -> list[dict[str, str]]:
    """An Anthropic request's messages (its system prompt goes apart: :func:`anthropic_system`)."""
    return [{"role": role, "content": content} for role, content in request.messages]


def anthropic_system(request: LLMRequest) -> dict[str, str]:
    """The ``system`` parameter of an Anthropic request, if it has a system prompt."""
    return {"system": request.system} if request.system is not None else {}


def openai_answer(config: LLMConfig, completion: Any) -> Answer:
    """(text, tokens in, tokens out) of a chat completion; :class:`CutOff` for a limit reached before any text,
    :class:`MalformedAnswer` for no text."""
    choices = getattr(completion, "choices", None) or []
    text = getattr(getattr(choices[0], "message", None), "content", None) if choices else None
    if not text and choices and getattr(choices[0], "finish_reason", None) == "length":
        raise CutOff(
            f"the answer reached the token limit ({config.rule.token_limit} = {config.max_tokens}) "
            "before any text; raise llm.max_tokens"
        )
    usage = getattr(completion, "usage", None)
    return _checked(text, getattr(usage, "prompt_tokens", 0), getattr(usage, "completion_tokens", 0))


def anthropic_answer(message: Any) -> Answer:
    """(text, tokens in, tokens out) of an Anthropic message; :class:`MalformedAnswer` for no text."""
    blocks = getattr(message, "content", None) or []
    texts = [block.text for block in blocks if getattr(block, "type", None) == "text"]
    usage = getattr(message, "usage", None)
    return _checked(
        "".join(texts) if texts else None,
        getattr(usage, "input_tokens", 0),
        getattr(usage, "output_tokens", 0),
    )
