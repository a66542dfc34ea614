"""The transport interface: how the requests a client's store cannot answer reach a model (docs/architecture.md §6).

A client answers what it can from its store and hands the rest, its misses, to one transport: the live SDK
(:class:`pbbq.tasks.llm.live.LiveTransport`), the provider's batch API (:class:`pbbq.tasks.llm.batch.BatchTransport`)
or an answerer computed in this process (:class:`InProcessTransport`: the stand-in, the synthetic build's model).
A transport answers one request (:meth:`Transport.answer`) and all of a client's misses (:meth:`Transport.answer_all`),
handing each answer to the client (:class:`Recorder`), which counts it and stores it under its request key, so
every transport's answers replay alike.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from ..core.progress import RequestProgress
from .config import LLMConfig, LLMError, LLMRequest, LLMResponse

Miss = tuple[str, LLMRequest]
"""A request the store could not answer, with its request key."""


class Answer(NamedTuple):
    """What a transport brings back for one request."""

    text: str
    tokens_in: int
    tokens_out: int


class MalformedAnswer(Exception):
    """An answer that could not be read (a 200 whose body is not JSON, an answer with no text): the client asks
    again, at most ``llm.max_retries`` times."""


class CutOff(LLMError):
    """An answer that ended at the token limit with no text: asking again would end the same way."""


class Recorder(Protocol):
    """The client a transport answers for (:class:`pbbq.tasks.llm.client.LLMClient`)."""

    def sent(self, request: LLMRequest) -> None:
        """Count a request as sent to the provider."""
        ...

    def record(self, key: str, request: LLMRequest, answer: Answer) -> LLMResponse:
        """Count an answer's tokens and store it under its request key."""
        ...

    def call_each(
        self, misses: Sequence[Miss], transport: Transport, progress: RequestProgress
    ) -> dict[str, LLMResponse]:
        """Ask ``transport`` for each miss on its own (concurrently, rate limited, a malformed answer asked again),
        recording every answer; stops at the first failure."""
        ...


class Transport(ABC):
    """What carries a client's misses to a model and its answers back."""

    threads = True
    """Whether the client asks for several answers at once (up to ``llm.max_concurrency``)."""

    @abstractmethod
    def answer(self, request: LLMRequest) -> Answer:
        """The answer to one request; :class:`MalformedAnswer` if it could not be read, an :class:`LLMError`
        (naming the request, never the API key) if it cannot be had."""

    def answer_all(self, misses: Sequence[Miss], recorder: Recorder, stages: str) -> dict[str, LLMResponse]:
        """The answers to every miss by request key, each recorded through ``recorder`` as it arrives; by default
        one request at a time (:meth:`answer`), with a progress line naming ``stages``."""
        with RequestProgress(len(misses), stages) as progress:
            return recorder.call_each(misses, self, progress)


class InProcessTransport(Transport):
    """A transport whose answers are computed in this process: no threads (they would only add their cost), and
    words counted as tokens, a stand-in for what a model would count."""

    threads = False

    @abstractmethod
    def text(self, request: LLMRequest) -> str:
        """The text of the answer to ``request``."""

    def answer(self, request: LLMRequest) -> Answer:
        text = self.text(request)
        words = sum(len(content.split()) for _, content in request.messages) + len((request.system or "").split())
        return Answer(text, words, len(text.split()))


def where(config: LLMConfig, request: LLMRequest) -> str:
    """Which model and which request an error or a log line is about."""
    return f"{config.provider} {config.model!r}, stage {request.stage!r} ({request.context})"
