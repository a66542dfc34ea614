"""The only module that talks to a model (docs/architecture.md §6).

Every request goes through a response store keyed by ``request_key`` (sha256 over the
provider, model, system prompt, messages, sampling parameters and the prompt file's
hash; never the base URL or the API key). The store keeps each answer under its source as well: the transcript it
was imported from (by the file's sha256), the model's own answers (``RECORDED``), or the stand-in (``STAND_IN``);
a client reads only the sources its mode and transcript allow (:attr:`LLMClient.sources`, docs/architecture.md
§6), so a build never takes an answer from a transcript it does not name. Modes: ``live`` calls and records,
``replay`` answers from its transcript only, ``auto`` calls on a miss, ``batch`` sends every miss at once through
the provider's batch API at half the price (``tasks/llm_batch.py``) and records the answers under the same keys, so
a batch build replays as a live one does, and ``stand-in`` answers every request offline with labelled placeholder
text (:mod:`pbbq.tasks.stand_in`). A store exports to a JSONL transcript that can be opened read-only for replay,
so a release rebuilds with no key. While requests are sent, ``tasks/progress.py`` shows how far they are.

Transport failures (429, 5xx, timeouts, dropped connections) are retried by the official
SDKs only (``max_retries``, ``timeout``). A 200 whose body is not valid JSON is not
retried by either SDK (openai 3.54 and anthropic 2.12 both raise a bare
``json.JSONDecodeError`` after one request), so this module re-issues such a call up to
``max_retries`` times (the SDK's own budget for transport errors), as it does for a well-formed
answer that carries no text.

What an OpenAI-compatible server is sent follows the model's rule (``MODEL_RULES``): the name of the
token limit, whether a temperature or a system message may be sent, an optional ``reasoning_effort``. The
official API refuses ``max_tokens`` and any temperature but the default for its reasoning models, and a
system message for o1-mini, the model PBBQ §3.3.3 used; ``llm.model_rule`` overrides the table for an
unusual server. A refused request (HTTP 400) is not retried: its error names the parameter and what to change.

The API key is read from the environment variable the config names, passed to the SDK
and scrubbed from every error this module raises; it is never stored or logged.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import gzip
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, get_args, get_origin

import anthropic
import openai
from openai.types.shared import ReasoningEffort

from .core.closing import Closing
from .core.progress import RequestProgress
from .core.redaction import REDACTED

log = logging.getLogger(__name__)

PROVIDERS = ("openai", "anthropic")
STAND_IN_MODE = "stand-in"
MODES = ("live", "replay", "auto", "batch", STAND_IN_MODE)
RECORDED = "recorded"
"""The source of the answers a store got from the model itself (modes live, auto, batch)."""
STAND_IN = "stand-in"
"""The source of stand-in answers (mode ``stand-in``): never read by another mode."""
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
TRANSCRIPT_FORMAT = "pbbq"
TRANSCRIPT_VERSION = 1

_RECORD_FIELDS = ("key", "provider", "model", "request", "response", "tokens_in", "tokens_out", "created_at")
_PLACEHOLDERS = ", ".join("?" * (1 + len(_RECORD_FIELDS)))


class LLMError(Exception):
    """A model call or the response store failed; the message never contains the API key."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ReplayMissError(LLMError):
    """Replay mode met a request with no recorded answer."""


class _MalformedAnswer(Exception):
    """A 200 answer that could not be read; re-issued a bounded number of times."""


def _literal_values(kind: Any) -> tuple[str, ...]:
    """The strings of a Literal type, or of the Literals inside an Optional or a Union."""
    if get_origin(kind) is Literal:
        return tuple(str(value) for value in get_args(kind))
    return tuple(value for arg in get_args(kind) for value in _literal_values(arg))


TOKEN_LIMITS = ("max_completion_tokens", "max_tokens")
REASONING_EFFORTS = _literal_values(ReasoningEffort)
"""The ``reasoning_effort`` values the installed openai SDK knows (which of them a model takes is the server's)."""
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
    if values.get("reasoning_effort", REASONING_EFFORTS[0]) not in REASONING_EFFORTS:
        raise ValueError(
            f"llm.model_rule.reasoning_effort must be one of {REASONING_EFFORTS}, not {values['reasoning_effort']!r}"
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
    longer (``tasks/llm_batch.py``, ``BACKOFF``), up to ``batch_poll_max_interval``."""
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
        if self.provider == "anthropic":
            return ANTHROPIC_RULE
        return dataclasses.replace(rule_for(self.model), **self.model_rule)

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


@dataclass(frozen=True)
class StoredResponse:
    """One row of the response store."""

    key: str
    provider: str
    model: str
    request: dict[str, Any]
    text: str
    tokens_in: int
    tokens_out: int
    created_at: str


def _encode_transcript(path: Path, text: str) -> bytes:
    """A transcript's bytes: gzip for a ``.gz`` path (no timestamp in the header, so deterministic)."""
    data = text.encode("utf-8")
    return gzip.compress(data, mtime=0) if path.suffix == ".gz" else data


def read_transcript(path: Path) -> str:
    """A transcript's text, gzip-decoded for a ``.gz`` path (as ``export_jsonl`` writes it); a ``ValueError``
    naming the file if it is missing, not gzip (a ``.gz`` path), or not UTF-8."""
    if not path.is_file():
        raise ValueError(f"{path}: transcript not found")
    data = path.read_bytes()
    try:
        data = gzip.decompress(data) if path.suffix == ".gz" else data
    except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError; a truncated stream, EOFError
        raise ValueError(f"{path}: not a readable gzip file ({err})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text") from None


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _sha256(text: str) -> str:
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
    return _sha256(_canonical_json(request_payload(config, request)))


def transcript_source(path: str | Path) -> str:
    """The source a transcript's answers are stored under: the sha256 of the file's bytes (the hash the run's
    manifest records for its transcript); "" for a file that cannot be read (its loader then says why)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


class ResponseStore(Closing):
    """Recorded answers keyed by source and request key: a SQLite file, or a read-only JSONL transcript."""

    def __init__(self, path: str | Path, *, _transcript: bool = False) -> None:
        """Open (or create) the SQLite store at ``path``; use ``from_transcript`` for a JSONL file."""
        self.path = Path(path)
        self.read_only = _transcript
        self.header: dict[str, Any] | None = None
        self.transcript_sha256: str | None = None
        """A read-only transcript's source (:func:`transcript_source`)."""
        self._lock = threading.Lock()
        if _transcript:
            self._db = sqlite3.connect(":memory:", check_same_thread=False)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False)
        try:
            self._create()
        except sqlite3.DatabaseError as err:
            self._db.close()
            raise LLMError(
                f"{self.path}: not a response store ({err}); move the file away or set [llm] store_path to another"
            ) from None

    def _create(self) -> None:
        """The tables (and the move of a store written before answers had a source: its rows count as the model's
        own, ``RECORDED``, since imported and called answers cannot be told apart there)."""
        if not self.read_only:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        with self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS answers (source TEXT NOT NULL, key TEXT NOT NULL, provider TEXT NOT NULL, "
                "model TEXT NOT NULL, request TEXT NOT NULL, response TEXT NOT NULL, tokens_in INTEGER NOT NULL, "
                "tokens_out INTEGER NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (source, key))"
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS transcripts (sha256 TEXT PRIMARY KEY, records INTEGER NOT NULL)"
            )
            tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "responses" in tables:
                self._db.execute(
                    f"INSERT OR IGNORE INTO answers SELECT ?, {', '.join(_RECORD_FIELDS)} FROM responses", (RECORDED,)
                )
                self._db.execute("DROP TABLE responses")
            self._db.execute("DROP TABLE IF EXISTS imports")

    @classmethod
    def from_transcript(cls, path: str | Path) -> ResponseStore:
        """Open a JSONL transcript as a read-only store (for replay)."""
        store = cls(path, _transcript=True)
        store.transcript_sha256 = transcript_source(path)
        store.header, _ = store._load_jsonl(Path(path), store.transcript_sha256)
        return store

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def get(self, key: str, sources: Sequence[str] = (RECORDED,)) -> StoredResponse | None:
        """The answer for ``key`` from the first of ``sources`` that has one, or None."""
        marks = ", ".join("?" * len(sources))
        with self._lock:
            rows = self._db.execute(
                f"SELECT source, {', '.join(_RECORD_FIELDS)} FROM answers WHERE key = ? AND source IN ({marks})",
                (key, *sources),
            ).fetchall()
        found = {row[0]: row[1:] for row in rows}
        return next((_row_to_record(found[source]) for source in sources if source in found), None)

    def put(self, record: StoredResponse, source: str = RECORDED) -> None:
        """Record (or replace) an answer of ``source``."""
        if self.read_only:
            raise LLMError(f"response store {self.path} is a read-only transcript; import it into a SQLite store")
        with self._lock:
            self._insert([record], source)

    def export_jsonl(
        self,
        path: str | Path,
        header: Mapping[str, Any],
        keys: Iterable[str] | None = None,
        sources: Sequence[str] = (RECORDED,),
    ) -> int:
        """Write a transcript of the answers of ``sources`` (a key held by several: the first's): a header line,
        then one record per line sorted by key; returns the count.

        ``keys`` limits it to those answers (a build's own requests); a key the store lacks is an error, since
        the transcript could not replay the build. The same store and keys always give the same bytes; the file
        is written to a temporary name and renamed.
        """
        marks = ", ".join("?" * len(sources))
        with self._lock:
            rows = self._db.execute(
                f"SELECT source, {', '.join(_RECORD_FIELDS)} FROM answers WHERE source IN ({marks}) ORDER BY key",
                tuple(sources),
            ).fetchall()
        rank = {source: index for index, source in enumerate(sources)}
        chosen: dict[str, tuple[Any, ...]] = {}
        for row in rows:
            held = chosen.get(row[1])
            if held is None or rank[row[0]] < rank[held[0]]:
                chosen[row[1]] = row
        records = [_row_to_record(row[1:]) for _, row in sorted(chosen.items())]
        if keys is not None:
            wanted = set(keys)
            records = [record for record in records if record.key in wanted]
            missing = wanted - {record.key for record in records}
            if missing:
                raise LLMError(
                    f"response store {self.path} lacks {len(missing)} answer(s) of this build, e.g. {min(missing)[:12]}"
                )
        head = {
            **header,
            "transcript": TRANSCRIPT_FORMAT,
            "version": TRANSCRIPT_VERSION,
            "records": len(records),
        }
        lines = [_canonical_json(head)]
        lines.extend(_canonical_json(_record_to_json(record)) for record in records)
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(_encode_transcript(target, "\n".join(lines) + "\n"))
        os.replace(tmp, target)
        return len(records)

    def import_jsonl(self, path: str | Path) -> int:
        """Add every record of a transcript under its own source (:func:`transcript_source`); returns the count.
        A file imported before is not read again: its answers are there, under its hash."""
        if self.read_only:
            raise LLMError(f"response store {self.path} is a read-only transcript; import into a SQLite store")
        digest = transcript_source(path)
        with self._lock:
            done = self._db.execute("SELECT records FROM transcripts WHERE sha256 = ?", (digest,)).fetchone()
        if done is not None:
            return int(done[0])
        _, count = self._load_jsonl(Path(path), digest)
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO transcripts VALUES (?, ?)", (digest, count))
        log.info("imported %d records from transcript %s into %s", count, path, self.path)
        return count

    def _load_jsonl(self, path: Path, source: str) -> tuple[dict[str, Any], int]:
        """Validate a transcript and insert its records under ``source`` in one transaction; returns (header,
        count)."""
        header, records = parse_transcript(path)
        with self._lock:
            self._insert(records, source)
        return header, len(records)

    def _insert(self, records: Sequence[StoredResponse], source: str) -> None:
        with self._db:
            self._db.executemany(
                f"INSERT OR REPLACE INTO answers (source, {', '.join(_RECORD_FIELDS)}) VALUES ({_PLACEHOLDERS})",
                [
                    (
                        source,
                        r.key,
                        r.provider,
                        r.model,
                        _canonical_json(r.request),
                        r.text,
                        r.tokens_in,
                        r.tokens_out,
                        r.created_at,
                    )
                    for r in records
                ],
            )


def parse_transcript(path: Path) -> tuple[dict[str, Any], list[StoredResponse]]:
    """A transcript's header and records, every line checked; a ``ValueError`` naming the file and line."""
    lines = read_transcript(path).splitlines()
    if not lines:
        raise ValueError(f"{path}: empty file, expected a PBBQ transcript header on line 1")
    header = _parse_line(path, 1, lines[0])
    if header.get("transcript") != TRANSCRIPT_FORMAT or header.get("version") != TRANSCRIPT_VERSION:
        raise ValueError(
            f"{path}:1: not a PBBQ transcript header (expected transcript={TRANSCRIPT_FORMAT!r}, "
            f"version={TRANSCRIPT_VERSION})"
        )
    records = [
        _json_to_record(path, number, _parse_line(path, number, line)) for number, line in enumerate(lines[1:], 2)
    ]
    if header.get("records") != len(records):
        raise ValueError(f"{path}: header announces {header.get('records')!r} records, the file holds {len(records)}")
    return header, records


def open_store(path: str | Path) -> ResponseStore:
    """A ``.jsonl`` (or ``.jsonl.gz``) path opens as a read-only transcript, anything else as a SQLite store."""
    is_transcript = Path(path).name.endswith((".jsonl", ".jsonl.gz"))
    return ResponseStore.from_transcript(path) if is_transcript else ResponseStore(path)


def _row_to_record(row: tuple[Any, ...]) -> StoredResponse:
    key, provider, model, request, response, tokens_in, tokens_out, created_at = row
    return StoredResponse(key, provider, model, json.loads(request), response, tokens_in, tokens_out, created_at)


def _record_to_json(record: StoredResponse) -> dict[str, Any]:
    return {
        "key": record.key,
        "provider": record.provider,
        "model": record.model,
        "request": record.request,
        "response": record.text,
        "tokens_in": record.tokens_in,
        "tokens_out": record.tokens_out,
        "created_at": record.created_at,
    }


def _parse_line(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{number}: not valid JSON ({err.msg})") from None
    except (ValueError, RecursionError) as err:  # an integer of over 4300 digits; nesting too deep
        raise ValueError(f"{path}:{number}: not usable JSON ({err})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}:{number}: expected a JSON object")
    try:
        if "\\u" in line:  # only a \u escape makes a lone surrogate
            _canonical_json(value).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{path}:{number}: a \\u escape of a lone surrogate (\\ud800-\\udfff) is not text") from None
    return value


def _json_to_record(path: Path, number: int, value: dict[str, Any]) -> StoredResponse:
    missing = [name for name in _RECORD_FIELDS if name not in value]
    if missing:
        raise ValueError(f"{path}:{number}: record is missing {missing}")
    types = {"request": dict, "response": str, "tokens_in": int, "tokens_out": int}
    for name, kind in types.items():
        if not isinstance(value[name], kind):
            raise ValueError(f"{path}:{number}: {name} must be a {kind.__name__}")
    for name in ("tokens_in", "tokens_out"):
        if not 0 <= value[name] < 2**63:  # what SQLite stores
            raise ValueError(f"{path}:{number}: {name} = {value[name]} is not a token count (0 … 2**63 - 1)")
    if _sha256(_canonical_json(value["request"])) != value["key"]:
        raise ValueError(f"{path}:{number}: key {value['key']!r} is not the sha256 of the record's request")
    return StoredResponse(
        key=value["key"],
        provider=str(value["provider"]),
        model=str(value["model"]),
        request=value["request"],
        text=value["response"],
        tokens_in=value["tokens_in"],
        tokens_out=value["tokens_out"],
        created_at=str(value["created_at"]),
    )


class RateLimiter:
    """Spaces the dispatch of requests at least 60/rpm seconds apart across threads (a bucket of one token). What
    it promises is when a request leaves, not when it arrives: a connection being opened delays an arrival."""

    def __init__(
        self,
        requests_per_minute: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval = 60.0 / requests_per_minute
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._next = 0.0

    def acquire(self) -> None:
        """Reserve the next free slot and sleep until it comes."""
        with self._lock:
            now = self._clock()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            self._sleep(slot - now)


class Answerer(Protocol):
    """A transport that computes an answer in-process instead of calling a provider (the stand-in)."""

    def answer(self, request: LLMRequest) -> str:
        """The text of the answer to ``request``."""
        ...


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
        answerer: Answerer | None = None,
    ) -> None:
        """``store`` defaults to ``open_store(config.store_path)``; ``transcript`` is imported into it and is the
        only recording this client reads (:attr:`sources`). ``answerer`` computes the answers in place of a
        provider (mode ``stand-in`` has :class:`pbbq.tasks.stand_in.StandInAnswerer` unless given another)."""
        self.config = config
        self.store = store if store is not None else open_store(config.store_path)
        self._limiter = RateLimiter(config.requests_per_minute) if config.requests_per_minute else None
        self._usage: dict[str, UsageCounter] = {}
        self._usage_lock = threading.Lock()
        self._sdk: openai.OpenAI | anthropic.Anthropic | None = None
        self._secret = ""
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
        if answerer is None and config.mode == STAND_IN_MODE:
            from .stand_in import StandInAnswerer  # imported here: stand_in imports this module

            answerer = StandInAnswerer()
        self.answerer = answerer

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

    def export(self, keys: Iterable[str], path: Path, note: str) -> int:
        """Write the answers of a build's own requests (``keys``) as a transcript that replays it with no key,
        each from the sources this client read or wrote; the header of a build with stand-in answers (its own or a
        replayed stand-in transcript's) says ``"stand_in": true``."""
        header: dict[str, Any] = {"note": note, "provider": self.config.provider, "model": self.config.model}
        if self.stand_in:
            header["stand_in"] = True
        sources = tuple(dict.fromkeys((*self.sources, self.record_source)))
        return self.store.export_jsonl(path, header=header, keys=keys, sources=sources)

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
            for key, request in distinct.items():
                record = self.store.get(key, self.sources)
                if record is not None:
                    answers[key] = LLMResponse(record.text, key, True, record.tokens_in, record.tokens_out)
                    self.usage(request.stage).record_hit()
        misses = [(key, request) for key, request in distinct.items() if key not in answers]
        if misses:
            self._prepare_calls(misses)
            stages = ", ".join(sorted({request.stage for _, request in misses}))
            if self.config.mode == "batch":
                from .llm_batch import complete_in_batches  # imported here: llm_batch imports this module

                answers.update(complete_in_batches(self, misses, stages))
            else:
                with RequestProgress(len(misses), stages) as progress:
                    answers.update(self._call_all(misses, progress))
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

    def _prepare_calls(self, misses: Sequence[tuple[str, LLMRequest]]) -> None:
        """Fail early, naming what is missing and how to go live, when a miss cannot be called."""
        key, first = misses[0]
        where = f"stage {first.stage!r} ({first.context}), prompt {first.prompt_hash[:12]}, request {key[:12]}"
        if self.config.mode == "replay":
            recording = f"the transcript {self.transcript}" if self.transcript else f"the store {self.store.path}"
            raise ReplayMissError(
                f"replay mode: no recorded answer for {where}; {len(misses)} request(s) missing from {recording}. "
                f'To try the change offline, build with --stand-in ([llm] mode = "stand-in": labelled placeholder '
                f"answers, never uploaded); to call the model, set PBBQ_LLM_MODE=live or auto and the API key env "
                f"var {self.config.api_key_env}."
            )
        if self.answerer is not None:
            return
        if self.store.read_only:
            raise LLMError(
                f"{len(misses)} request(s) not in the read-only transcript {self.store.path} "
                f"(first: {where}); import it into a SQLite store (llm.store_path) to record new answers."
            )
        if self._sdk is None:
            secret = os.environ.get(self.config.api_key_env, "")
            if not secret:
                raise LLMError(
                    f"mode {self.config.mode!r} must call {self.config.provider} for {len(misses)} "
                    f"request(s) (first: {where}) but the API key env var {self.config.api_key_env} is not set; set it "
                    "(a local OpenAI-compatible server accepts any value) or replay a complete transcript."
                )
            self._secret = secret
            self._sdk = self._make_sdk(secret)

    def _make_sdk(self, secret: str) -> openai.OpenAI | anthropic.Anthropic:
        cfg = self.config
        if cfg.provider == "openai":
            return openai.OpenAI(
                api_key=secret, base_url=cfg.base_url, max_retries=cfg.max_retries, timeout=cfg.timeout
            )
        return anthropic.Anthropic(
            api_key=secret, base_url=cfg.base_url, max_retries=cfg.max_retries, timeout=cfg.timeout
        )

    def _call_all(
        self, misses: Sequence[tuple[str, LLMRequest]], progress: RequestProgress | None = None
    ) -> dict[str, LLMResponse]:
        """Call every miss on at most ``max_concurrency`` threads; stop at the first failure: no call starts after
        it (a refused request would be refused again), and the calls in flight finish. ``progress`` advances
        from this thread (the one holding the Prefect run context) as calls complete."""
        if self.answerer is not None:  # computed in this process: threads would only add their cost
            answers = {}
            for key, request in misses:
                answers[key] = self._call_one(key, request)
                if progress is not None:
                    progress.advance(1, self._cost([answers[key]]))
            return {answer.request_id: answer for answer in answers.values()}
        workers = min(self.config.max_concurrency, len(misses))
        failed = threading.Event()

        def call(key: str, request: LLMRequest) -> LLMResponse:
            if failed.is_set():
                raise _Stopped
            try:
                return self._call_one(key, request)
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
                if progress is not None:
                    progress.advance(1, self._cost([done.result()]))
        for future in futures:
            error = None if future.cancelled() else future.exception()
            if error is not None and not isinstance(error, _Stopped):
                raise error
        return {response.request_id: response for response in (future.result() for future in futures)}

    def _call_one(self, key: str, request: LLMRequest) -> LLMResponse:
        """Call once (re-issuing a malformed answer a bounded number of times) and record the answer."""
        usage = self.usage(request.stage)
        attempts = 1 + self.config.max_retries
        for attempt in range(1, attempts + 1):
            if self._limiter is not None:
                self._limiter.acquire()
            usage.record_sent()
            failure: LLMError | None = None
            try:
                text, tokens_in, tokens_out = self._send(request)
            except (
                json.JSONDecodeError,
                openai.APIResponseValidationError,
                anthropic.APIResponseValidationError,
                _MalformedAnswer,
            ) as err:
                log.warning(
                    "%s: malformed answer (%s), attempt %d of %d",
                    self._where(request),
                    self._scrub(f"{type(err).__name__}: {err}"),
                    attempt,
                    attempts,
                )
                continue
            except (openai.APIStatusError, anthropic.APIStatusError) as err:
                failure = self._error(request, self._refusal(err), err.status_code)
            except (openai.APITimeoutError, anthropic.APITimeoutError):
                failure = self._error(
                    request, f"timed out ({self.config.timeout}s) after {self.config.max_retries} retries"
                )
            except (openai.APIConnectionError, anthropic.APIConnectionError):
                failure = self._error(request, f"connection failed after {self.config.max_retries} retries")
            except (openai.OpenAIError, anthropic.AnthropicError) as err:
                failure = self._error(request, f"{type(err).__name__}: {err}")
            except _CutOff as err:
                failure = self._error(request, str(err))
            if failure is not None:
                raise failure
            return self._record_answer(key, request, text, tokens_in, tokens_out)
        raise self._error(request, f"malformed answer {attempts} times in a row")

    def _record_answer(self, key: str, request: LLMRequest, text: str, tokens_in: int, tokens_out: int) -> LLMResponse:
        """Count an answer's tokens and store it under its request key (a live call's and a batch's alike)."""
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
            self._where(request),
            key[:12],
            tokens_in,
            tokens_out,
        )
        return LLMResponse(text, key, False, tokens_in, tokens_out)

    def _cost(self, answers: Iterable[LLMResponse], factor: float = 1.0) -> float | None:
        """Estimated cost of ``answers`` in USD at the live price times ``factor``, None without a price."""
        price = self.config.prices.get(self.config.model)
        if price is None:
            return None
        tokens_in = sum(answer.tokens_in for answer in answers)
        tokens_out = sum(answer.tokens_out for answer in answers)
        return factor * (tokens_in * price[0] + tokens_out * price[1]) / 1_000_000

    def _send(self, request: LLMRequest) -> tuple[str, int, int]:
        """One SDK call, or the answerer's answer; returns (text, tokens in, tokens out) (an answerer's tokens are
        words, a stand-in for what a model would count)."""
        if self.answerer is not None:
            text = self.answerer.answer(request)
            words = sum(len(content.split()) for _, content in request.messages) + len((request.system or "").split())
            return text, words, len(text.split())
        if isinstance(self._sdk, openai.OpenAI):
            return self._send_openai(self._sdk, request)
        assert isinstance(self._sdk, anthropic.Anthropic)
        return self._send_anthropic(self._sdk, request)

    def _send_openai(self, sdk: openai.OpenAI, request: LLMRequest) -> tuple[str, int, int]:
        completion = sdk.chat.completions.create(
            model=self.config.model, messages=sent_messages(self.config, request), **sent_parameters(self.config)
        )
        return openai_answer(self.config, completion)

    def _send_anthropic(self, sdk: anthropic.Anthropic, request: LLMRequest) -> tuple[str, int, int]:
        message = sdk.messages.create(
            model=self.config.model,
            messages=anthropic_messages(request),
            **sent_parameters(self.config),
            **anthropic_system(request),
        )
        return anthropic_answer(message)

    def _refusal(self, err: openai.APIStatusError | anthropic.APIStatusError) -> str:
        """An HTTP error in one line: status, the API's type, code and the parameter it named, its message, and
        for a parameter this module chose, the ``llm.model_rule`` that changes it."""
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

    def _where(self, request: LLMRequest) -> str:
        return f"{self.config.provider} {self.config.model!r}, stage {request.stage!r} ({request.context})"

    def _error(self, request: LLMRequest, detail: str, status_code: int | None = None) -> LLMError:
        return LLMError(self._scrub(f"{self._where(request)}: {detail}"), status_code=status_code)

    def _scrub(self, text: str) -> str:
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


class _Stopped(Exception):
    """A call not started because another call of the batch had failed."""


class _CutOff(LLMError):
    """An answer that ended at the token limit with no text: asking again would end the same way."""


def _checked(text: object, tokens_in: object, tokens_out: object) -> tuple[str, int, int]:
    """An answer's text and token counts; an answer without text counts as malformed."""
    if not isinstance(text, str):
        raise _MalformedAnswer("the answer carries no text")
    return text, int(tokens_in or 0), int(tokens_out or 0)


def anthropic_messages(request: LLMRequest) -> list[dict[str, str]]:
    """An Anthropic request's messages (its system prompt goes apart: :func:`anthropic_system`)."""
    return [{"role": role, "content": content} for role, content in request.messages]


def anthropic_system(request: LLMRequest) -> dict[str, str]:
    """The ``system`` parameter of an Anthropic request, if it has a system prompt."""
    return {"system": request.system} if request.system is not None else {}


def openai_answer(config: LLMConfig, completion: Any) -> tuple[str, int, int]:
    """(text, tokens in, tokens out) of a chat completion; ``_CutOff`` for a limit reached before any text,
    ``_MalformedAnswer`` for no text."""
    choices = getattr(completion, "choices", None) or []
    text = getattr(getattr(choices[0], "message", None), "content", None) if choices else None
    if not text and choices and getattr(choices[0], "finish_reason", None) == "length":
        raise _CutOff(
            f"the answer reached the token limit ({config.rule.token_limit} = {config.max_tokens}) "
            "before any text; raise llm.max_tokens"
        )
    usage = getattr(completion, "usage", None)
    return _checked(text, getattr(usage, "prompt_tokens", 0), getattr(usage, "completion_tokens", 0))


def anthropic_answer(message: Any) -> tuple[str, int, int]:
    """(text, tokens in, tokens out) of an Anthropic message; ``_MalformedAnswer`` for no text."""
    blocks = getattr(message, "content", None) or []
    texts = [block.text for block in blocks if getattr(block, "type", None) == "text"]
    usage = getattr(message, "usage", None)
    return _checked(
        "".join(texts) if texts else None,
        getattr(usage, "input_tokens", 0),
        getattr(usage, "output_tokens", 0),
    )


def open_llm(config: LLMConfig, transcript: Path | None) -> LLMClient:
    """A client over the configured store, with a transcript's answers imported first (every line checked, the
    first time the store sees the file) when one is given."""
    return LLMClient(config, open_store(config.store_path), transcript=transcript)


def transcript_header(path: Path) -> dict[str, Any]:
    """A transcript's header line (a run's own transcript: ``"stand_in": true`` marks stand-in answers)."""
    return _parse_line(path, 1, read_transcript(path).partition("\n")[0])


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
