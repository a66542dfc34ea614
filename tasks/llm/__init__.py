"""The only package that talks to a model (docs/architecture.md §6).

Every request goes through a response store (:mod:`.store`) keyed by ``request_key`` (:mod:`.config`, with the
configuration and the model rules); the client (:mod:`.client`) answers from the store the sources its mode and
transcript allow and hands the misses to one transport (:mod:`.transport`): the live SDK (:mod:`.live`), the
provider's batch API (:mod:`.batch`) or the stand-in (:mod:`.stand_in`), spaced by ``llm.requests_per_minute``
(:mod:`.rate`). A provider's SDK is imported when a miss opens its transport (the live one loads only the
configured provider's; a batch loads both), so a build that replays its answers never loads ``openai`` or
``anthropic``. The API key is read from
the environment variable the config names, passed to the SDK and scrubbed from every error; it is never stored or
logged.
"""

from .client import LLMClient, UsageCounter, open_llm, usage_summary
from .config import (
    ANTHROPIC_RULE,
    BATCH_DISCOUNT,
    BATCH_FALLBACKS,
    CHAT_MAX_TOKENS,
    CHAT_TIMEOUT,
    DEFAULT_KEY_ENV,
    ENV_OVERRIDES,
    MODEL_RULES,
    MODES,
    PROVIDERS,
    REASONING_MAX_TOKENS,
    REASONING_TIMEOUT,
    REDACTED,
    ROLES,
    RULE_KEYS,
    STAND_IN_MODE,
    SYSTEM_MARK,
    TOKEN_LIMITS,
    LLMConfig,
    LLMError,
    LLMRequest,
    LLMResponse,
    ModelRule,
    ReplayMissError,
    reasoning_efforts,
    request_key,
    request_payload,
    rule_for,
    sampling_parameters,
    sent_messages,
    sent_parameters,
)
from .rate import RateLimiter
from .store import (
    RECORDED,
    STAND_IN,
    TRANSCRIPT_FORMAT,
    TRANSCRIPT_VERSION,
    ResponseStore,
    StoredResponse,
    open_store,
    parse_transcript,
    read_transcript,
    transcript_header,
    transcript_source,
)
from .transport import Answer, InProcessTransport, Transport

__all__ = [
    "ANTHROPIC_RULE",
    "BATCH_DISCOUNT",
    "BATCH_FALLBACKS",
    "CHAT_MAX_TOKENS",
    "CHAT_TIMEOUT",
    "DEFAULT_KEY_ENV",
    "ENV_OVERRIDES",
    "MODEL_RULES",
    "MODES",
    "PROVIDERS",
    "REASONING_MAX_TOKENS",
    "REASONING_TIMEOUT",
    "RECORDED",
    "REDACTED",
    "ROLES",
    "RULE_KEYS",
    "STAND_IN",
    "STAND_IN_MODE",
    "SYSTEM_MARK",
    "TOKEN_LIMITS",
    "TRANSCRIPT_FORMAT",
    "TRANSCRIPT_VERSION",
    "Answer",
    "InProcessTransport",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMRequest",
    "LLMResponse",
    "ModelRule",
    "RateLimiter",
    "ReplayMissError",
    "ResponseStore",
    "StoredResponse",
    "Transport",
    "UsageCounter",
    "open_llm",
    "open_store",
    "parse_transcript",
    "read_transcript",
    "reasoning_efforts",
    "request_key",
    "request_payload",
    "rule_for",
    "sampling_parameters",
    "sent_messages",
    "sent_parameters",
    "transcript_header",
    "transcript_source",
    "usage_summary",
]
