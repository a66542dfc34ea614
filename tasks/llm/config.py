"""What the LLM layer is told: the configuration, the model rules and a request's key (docs/architecture.md §6).

A request's key (``request_key``) is the sha256 over the provider, model, system prompt, messages, sampling
parameters and the prompt file's hash; never the base URL or the API key.

What an OpenAI-compatible server is sent follows the model's rule (``MODEL_RULES``): the name of the
token limit, whether a temperature or a system message may be sent, an optional ``reasoning_effort``. The
official API refuses ``max_tokens`` and any temperature but the default for its reasoning models, and a
system message for o1-mini, the model PBBQ §3.3.3 used; ``llm.model_rule`` overrides the table for an
unusual server.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from ..core.redaction import REDACTED as REDACTED  # re-exported: what the client scrubs a key to
from ..imports import one_import_at_a_time

PROVIDERS = ("openai", "anthropic")
STAND_IN_MODE = "stand-in"
MODES = ("live", "replay", "auto", "batch", STAND_IN_MODE)
BATCH_FALLBACKS = ("live", "report")
"""What ``mode = "batch"`` does with a request its batch did not answer (expired, errored, missing): call it
live, or report them all in one :class:`LLMError` (the answers the batch did give are stored either way)."""
BATCH_DISCOUNT = 0.5
"""Price of a batch request relative to a live one: OpenAI's Batch API and Anthropic's Message Batches both
bill 50 % of the standard price. The build summary prints the estimated cost at both prices."""
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
ENV_OVERRIDES = {
    "PBBQ_LLM_MODE": "mode",
    "PBBQ_LLM_BASE_URL": "base_url",
    "PBBQ_LLM_PROVIDER": "provider",
    "PBBQ_LLM_MODEL": "model",
}
ROLES = ("user", "assistant")


class LLMError(Exception):
    """A model call or the response store failed; the message never contains the API key."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ReplayMissError(LLMError):
    """Replay mode met a request with no recorded answer."""


def _literal_values(kind: Any) -> tuple[str, ...]:
    """The strings of a Literal type, or of the Literals inside an Optional or a Union."""
    if get_origin(kind) is Literal:
        return tuple(str(value) for value in get_args(kind))
    return tuple(value for arg in get_args(kind) for value in _literal_values(arg))


TOKEN_LIMITS = ("max_completion_tokens", "max_tokens")


@functools.cache
def reasoning_efforts() -> tuple[str, ...]:
    """The ``reasoning_effort`` values the installed openai SDK knows (which of them a model takes is the server's);
    the SDK is imported only when a configuration names one (a replay sends nothing: no SDK is loaded)."""
    with one_import_at_a_time():
        from openai.types.shared import ReasoningEffort

    return _literal_values(ReasoningEffort)


CHAT_MAX_TOKENS = 1024
REASONING_MAX_TOKENS = 25_000
"""Default token limit of a reasoning model, whose limit covers its hidden reasoning as well as its answer: OpenAI's
reasoning guide advises reserving at least 25,000 tokens, and a smaller limit can end before any text."""
CHAT_TIMEOUT = 60.0
REASONING_TIMEOUT = 600.0
SYSTEM_MARK = "[System message]\n{system}\n[End of system message]\n\n{content}"
"""How a system prompt leads the first user message for a model that takes no system message."""


@dataclass(frozen=True, kw_only=True)
class ModelRule:
    """What an OpenAI-compatible chat completions endpoint accepts from one model."""

    token_limit: str = "max_completion_tokens"
    """The name ``llm.max_tokens`` is sent under: ``max_completion_tokens`` (current OpenAI models; vLLM reads it
    too) or ``max_tokens`` (deprecated by OpenAI and refused by its reasoning models; what Ollama and llama.cpp
    read)."""
    temperature: bool = True
    """Whether ``llm.temperature`` is sent: OpenAI's reasoning models accept only their default."""
    system_message: bool = True
    """Whether a system message may be sent; if not, its text leads the first user message (``SYSTEM_MARK``)."""
    reasoning_effort: str | None = None
    """Sent as ``reasoning_effort`` when set (never by the table: o1-mini refuses it)."""
    reasoning: bool = False
    """A reasoning model: ``llm.max_tokens`` and ``llm.timeout`` default to ``REASONING_MAX_TOKENS`` and
    ``REASONING_TIMEOUT``, since it thinks before it answers."""


RULE_KEYS: dict[str, type] = {"token_limit": str, "temperature": bool, "system_message": bool, "reasoning_effort": str}
"""The keys of ``llm.model_rule``, the configuration's override of the table for an unusual server."""

MODEL_RULES: tuple[tuple[str, ModelRule], ...] = (
    # model name pattern (the name after the last '/', lower case; the first match wins)
    ("o1-mini*", ModelRule(temperature=False, system_message=False, reasoning=True)),
    ("o1-preview*", ModelRule(temperature=False, system_message=False, reasoning=True)),
    ("o1*", ModelRule(temperature=False, reasoning=True)),
    ("o3*", ModelRule(temperature=False, reasoning=True)),
    ("o4-mini*", ModelRule(temperature=False, reasoning=True)),
    ("gpt-5*", ModelRule(temperature=False, reasoning=True)),
    ("gpt-oss*", ModelRule(token_limit="max_tokens")),  # open weights, served by vLLM, Ollama, llama.cpp
    ("gpt-*", ModelRule()),
    ("chatgpt-*", ModelRule()),
    ("*", ModelRule(token_limit="max_tokens")),  # any other model: an OpenAI-compatible server (Ollama, llama.cpp)
)
"""Model-name patterns to what the official API (or the server a model is usually served by) accepts. The rule
follows the name wherever it is served: o1-mini behind vLLM or a router (``openai/o1-mini``) gets o1-mini's rule."""

ANTHROPIC_RULE = ModelRule(token_limit="max_tokens", temperature=False)
"""The anthropic SDK's messages.create: ``max_tokens`` and a ``system`` parameter for every model, no temperature."""


def rule_for(model: str) -> ModelRule:
    """The table's rule for an OpenAI-compatible model name."""
    name = model.lower().rsplit("/", 1)[-1]
    return next(rule for pattern, rule in MODEL_RULES if fnmatch.fnmatchcase(name, pattern))


@functools.cache
def _rule(provider: str, model: str, overrides: tuple[tuple[str, Any], ...]) -> ModelRule:
    """:attr:`LLMConfig.rule`, made once per model: every request's key reads it (41,000 at paper scale)."""
    if provider == "anthropic":
        return ANTHROPIC_RULE
    return dataclasses.replace(rule_for(model), **dict(overrides))


def _rule_overrides(values: Any) -> dict[str, Any]:
    """``llm.model_rule`` checked by name, type and value."""
    if not isinstance(values, Mapping):
        raise ValueError(f"llm.model_rule must be a table of {sorted(RULE_KEYS)}, not {values!r}")
    unknown = sorted(set(values) - set(RULE_KEYS))
    if unknown:
        raise ValueError(f"llm.model_rule has unknown key(s) {unknown}; known: {sorted(RULE_KEYS)}")
    for name, value in values.items():
        if type(value) is not RULE_KEYS[name]:
            raise ValueError(f"llm.model_rule.{name} must be a {RULE_KEYS[name].__name__}, not {value!r}")
    if values.get("token_limit", TOKEN_LIMITS[0]) not in TOKEN_LIMITS:
        raise ValueError(f"llm.model_rule.token_limit must be one of {TOKEN_LIMITS}, not {values['token_limit']!r}")
    if "reasoning_effort" in values and values["reasoning_effort"] not in reasoning_efforts():
        raise ValueError(
            f"llm.model_rule.reasoning_effort must be one of {reasoning_efforts()}, not {values['reasoning_effort']!r}"
        )
    return dict(values)


@dataclass(frozen=True, kw_only=True)
class LLMConfig:
    """Which model to call and how; the API key itself is only named (``api_key_env``)."""

    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str = ""
    mode: str = "auto"
    store_path: Path = Path("outputs/llm/responses.sqlite")
    max_concurrency: int = 8
    requests_per_minute: float | None = None
    max_retries: int = 5
    timeout: float | None = None
    """Seconds per HTTP request; defaults to 60, or 600 (the openai SDK's own default) for a reasoning model."""
    temperature: float | None = None
    """Sent when the model's rule allows it (0.0 unless set); an error to set for a model that takes none."""
    max_tokens: int | None = None
    """The token limit, sent under the rule's name; defaults to 1024, or 25,000 for a reasoning model."""
    model_rule: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of the ``MODEL_RULES`` entry for this model (keys ``RULE_KEYS``), for an unusual server."""
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    batch_fallback: str = "live"
    """``mode = "batch"``: what happens to requests a batch did not answer (``BATCH_FALLBACKS``)."""
    batch_poll_interval: float = 10.0
    """``mode = "batch"``: seconds before the first look at a submitted batch; each later wait is 1.5 times
    longer (``tasks/llm/batch.py``, ``BACKOFF``), up to ``batch_poll_max_interval``."""
    batch_poll_max_interval: float = 300.0
    """``mode = "batch"``: the longest wait between two looks at a batch."""
    batch_max_wait: float = 90_000.0
    """``mode = "batch"``: seconds to wait for a batch to end (25 h: both providers end a batch within 24 h);
    past it the batch is cancelled and its unanswered requests go to ``batch_fallback``."""

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"llm.provider must be one of {PROVIDERS}, not {self.provider!r}")
        if self.mode not in MODES:
            raise ValueError(f"llm.mode must be one of {MODES}, not {self.mode!r}")
        if self.batch_fallback not in BATCH_FALLBACKS:
            raise ValueError(f"llm.batch_fallback must be one of {BATCH_FALLBACKS}, not {self.batch_fallback!r}")
        for name in ("batch_poll_interval", "batch_poll_max_interval", "batch_max_wait"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
                raise ValueError(f"llm.{name} must be a number of seconds > 0, not {value!r}")
            object.__setattr__(self, name, float(value))
        if self.batch_poll_max_interval < self.batch_poll_interval:
            raise ValueError(
                f"llm.batch_poll_max_interval ({self.batch_poll_max_interval}) must be >= llm.batch_poll_interval "
                f"({self.batch_poll_interval})"
            )
        if not self.model:
            raise ValueError("llm.model must be a non-empty model name")
        if self.max_concurrency < 1:
            raise ValueError(f"llm.max_concurrency must be >= 1, not {self.max_concurrency}")
        if self.requests_per_minute is not None and self.requests_per_minute <= 0:
            raise ValueError(f"llm.requests_per_minute must be > 0 or unset, not {self.requests_per_minute}")
        if self.provider == "anthropic":
            if self.model_rule:
                raise ValueError(
                    "llm.model_rule applies to provider 'openai' only: the anthropic SDK's messages.create takes "
                    "max_tokens and a system prompt for every model"
                )
            if self.temperature not in (None, 0.0):
                raise ValueError(
                    "llm.temperature cannot be set for provider 'anthropic': the anthropic SDK's messages.create "
                    "takes no temperature"
                )
            temperature = None
        else:
            object.__setattr__(self, "model_rule", _rule_overrides(self.model_rule))
            if not self.rule.temperature and self.temperature is not None:
                raise ValueError(
                    f"llm.temperature cannot be set for model {self.model!r}: it accepts only its default temperature, "
                    "so none is sent (for a server that takes one, set llm.model_rule = { temperature = true })"
                )
            temperature = (
                (0.0 if self.temperature is None else float(self.temperature)) if self.rule.temperature else None
            )
        max_tokens = self.max_tokens
        if max_tokens is None:
            max_tokens = REASONING_MAX_TOKENS if self.rule.reasoning else CHAT_MAX_TOKENS
        timeout = self.timeout
        if timeout is None:
            timeout = REASONING_TIMEOUT if self.rule.reasoning else CHAT_TIMEOUT
        if self.max_retries < 0 or timeout <= 0 or max_tokens < 1:
            raise ValueError("llm.max_retries must be >= 0, llm.timeout > 0 and llm.max_tokens >= 1")
        prices: dict[str, tuple[float, float]] = {}
        for model, pair in self.prices.items():
            if len(pair) != 2 or min(pair) < 0:
                raise ValueError(f"llm.prices[{model!r}] must be [usd per 1M input tokens, usd per 1M output tokens]")
            prices[str(model)] = (float(pair[0]), float(pair[1]))
        object.__setattr__(self, "prices", prices)
        object.__setattr__(self, "api_key_env", self.api_key_env or DEFAULT_KEY_ENV[self.provider])
        object.__setattr__(self, "store_path", Path(self.store_path))
        object.__setattr__(self, "temperature", temperature)
        object.__setattr__(self, "max_tokens", int(max_tokens))
        object.__setattr__(self, "timeout", float(timeout))

    @property
    def rule(self) -> ModelRule:
        """What this model is sent: the table's rule with ``model_rule``'s overrides (anthropic: its SDK's)."""
        return _rule(self.provider, self.model, tuple(sorted(self.model_rule.items())))

    def cache_identity(self) -> dict[str, Any]:
        """What a stage's cached result depends on: the same fields as a request key (provider, model, sampling
        parameters, and where a system prompt goes when it cannot be a system message). Not the store, the mode,
        the endpoint or the transport settings, which change how answers arrive, not what they are."""
        identity: dict[str, Any] = {
            "provider": self.provider,
            "model": self.model,
            "sampling": sampling_parameters(self),
        }
        if not self.rule.system_message:
            identity["system_placement"] = "first_user_message"
        return identity

    @classmethod
    def from_mapping(cls, section: Mapping[str, Any], env: Mapping[str, str] | None = None) -> LLMConfig:
        """Build from a run config's ``llm`` section; non-empty PBBQ_LLM_* variables in ``env`` win."""
        environ = os.environ if env is None else env
        if "api_key" in section:
            raise ValueError(
                "llm.api_key is not allowed: put the key in an environment variable named by llm.api_key_env"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise ValueError(f"unknown llm config keys {unknown}; known keys: {sorted(known)}")
        values = dict(section)
        for var, name in ENV_OVERRIDES.items():
            if environ.get(var):
                values[name] = environ[var]
        missing = sorted({"provider", "model"} - set(values))
        if missing:
            raise ValueError(f"llm config is missing {missing}")
        return cls(**values)


@dataclass(frozen=True, kw_only=True)
class LLMRequest:
    """One chat request: (role, content) messages, an optional system prompt, and provenance."""

    messages: tuple[tuple[str, str], ...]
    system: str | None = None
    prompt_hash: str
    stage: str
    context: str
    languages: tuple[str, ...] = ()
    """A translation's source and target codes (provenance, as ``stage`` and ``context``: not in its key), so
    that the stand-in answers any pair (:mod:`.stand_in`)."""

    def __post_init__(self) -> None:
        messages = tuple((str(role), str(content)) for role, content in self.messages)
        if not messages:
            raise ValueError(f"stage {self.stage!r} ({self.context}): a request needs at least one message")
        bad = sorted({role for role, _ in messages} - set(ROLES))
        if bad:
            raise ValueError(
                f"stage {self.stage!r} ({self.context}): message roles must be {ROLES}, not {bad}; "
                "pass a system prompt as LLMRequest.system"
            )
        object.__setattr__(self, "messages", messages)


@dataclass(frozen=True)
class LLMResponse:
    """A model's answer; ``request_id`` is the request key, ``cached`` says it came from the store."""

    text: str
    request_id: str
    cached: bool
    tokens_in: int
    tokens_out: int


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_payload(config: LLMConfig, request: LLMRequest) -> dict[str, Any]:
    """What a request's key is computed over (and what the store records as its request).

    A system prompt that leads the first user message (a model without system messages) adds
    ``system_placement``; without one the payload has the same fields it always had."""
    payload = {
        "provider": config.provider,
        "model": config.model,
        "system": request.system,
        "messages": [list(message) for message in request.messages],
        "parameters": sampling_parameters(config),
        "prompt_hash": request.prompt_hash,
    }
    if request.system is not None and not config.rule.system_message:
        payload["system_placement"] = "first_user_message"
    return payload


def sampling_parameters(config: LLMConfig) -> dict[str, Any]:
    """The parameters a request's answer depends on, as its key holds them: those actually sent, with the token
    limit under one name, ``max_tokens``, whichever name the server reads (a rename changes no answer, so a
    recorded transcript keeps replaying)."""
    rule = config.rule
    parameters: dict[str, Any] = {"max_tokens": config.max_tokens}
    if rule.temperature:
        parameters["temperature"] = config.temperature
    if rule.reasoning_effort is not None:
        parameters["reasoning_effort"] = rule.reasoning_effort
    return parameters


def sent_parameters(config: LLMConfig) -> dict[str, Any]:
    """The keyword arguments of the SDK call: ``sampling_parameters`` with the token limit under the rule's name."""
    parameters = sampling_parameters(config)
    parameters[config.rule.token_limit] = parameters.pop("max_tokens")
    return parameters


def sent_messages(config: LLMConfig, request: LLMRequest) -> list[dict[str, str]]:
    """An OpenAI-compatible request's messages: the system prompt first, or, for a model that takes no system
    message, leading the first user message (``SYSTEM_MARK``)."""
    messages = [{"role": role, "content": content} for role, content in request.messages]
    if request.system is None:
        return messages
    if config.rule.system_message:
        return [{"role": "system", "content": request.system}, *messages]
    first = next((i for i, message in enumerate(messages) if message["role"] == "user"), None)
    if first is None:
        return [{"role": "user", "content": SYSTEM_MARK.format(system=request.system, content="").rstrip()}, *messages]
    messages[first] = {
        "role": "user",
        "content": SYSTEM_MARK.format(system=request.system, content=messages[first]["content"]),
    }
    return messages


def request_key(config: LLMConfig, request: LLMRequest) -> str:
    """sha256 of the canonical JSON of ``request_payload``: not the base URL, not the key."""
    return sha256_text(canonical_json(request_payload(config, request)))


def estimated_cost(config: LLMConfig, answers: Iterable[LLMResponse], factor: float = 1.0) -> float | None:
    """Estimated cost of ``answers`` in USD at the live price times ``factor``, None without a price."""
    price = config.prices.get(config.model)
    if price is None:
        return None
    tokens_in = sum(answer.tokens_in for answer in answers)
    tokens_out = sum(answer.tokens_out for answer in answers)
    return factor * (tokens_in * price[0] + tokens_out * price[1]) / 1_000_000
