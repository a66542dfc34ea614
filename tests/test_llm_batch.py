"""``llm.mode = "batch"`` (tasks/llm/batch.py) against the fake servers' batch APIs (tests/fakes/llm_servers.py).

A batch must answer as a live call does, under the same store keys, so that a batch build replays like a live one;
what a batch leaves unanswered (expired, errored, missing) is called live or reported; and the key stays secret.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import traceback
from pathlib import Path
from typing import Any

import pytest

from pbbq.tasks.llm import (
    BATCH_DISCOUNT,
    PROVIDERS,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMRequest,
    request_key,
    usage_summary,
)
from pbbq.tasks.llm import batch as llm_batch
from pbbq.tasks.llm.batch import BATCH_LIMITS, BatchLimits
from tests.fakes.llm_servers import FakeLLMServer
from tests.helpers import FAKE_API_KEY, llm_config

pytestmark = pytest.mark.usefixtures("llm_api_keys")
PROMPT_HASH = "b" * 64
CHAT_PATH = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
FAST = {"batch_poll_interval": 0.005, "batch_poll_max_interval": 0.02, "batch_max_wait": 5.0}


def config_for(server: FakeLLMServer, store: Path, provider: str, **overrides: Any) -> LLMConfig:
    settings = {"mode": "batch", "max_retries": 2, "timeout": 5.0, "prices": {"fake-model": (2.0, 10.0)}, **FAST}
    return llm_config(server, store, provider, **settings | overrides)


def client_for(server: FakeLLMServer, store: Path, provider: str, **overrides: Any) -> LLMClient:
    return LLMClient(config_for(server, store, provider, **overrides))


def requests(n: int = 5) -> list[LLMRequest]:
    """Requests with and without a system prompt, one of them Persian."""
    made = [
        LLMRequest(
            messages=(("user", f"question {i}"),),
            system="Answer briefly." if i % 2 else None,
            prompt_hash=PROMPT_HASH,
            stage="translate",
            context=f"example {i}",
        )
        for i in range(n - 1)
    ]
    persian = LLMRequest(
        messages=(("user", "ادامهٔ متن را بنویس"),), prompt_hash=PROMPT_HASH, stage="translate", context="fa"
    )
    return [*made, persian]


def stored(client: LLMClient, keys: list[str]) -> list[tuple[Any, ...]]:
    """The store's records of ``keys``, without their time of writing."""
    records = [client.store.get(key) for key in keys]
    assert all(record is not None for record in records)
    return [(r.key, r.provider, r.model, r.request, r.text, r.tokens_in, r.tokens_out) for r in records if r]


def chat_calls(server: FakeLLMServer, provider: str) -> int:
    return server.requests_by_path[CHAT_PATH[provider]]


# --- a batch answers as a live call does --------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_batch_answers_equal_live_answers(server: FakeLLMServer, tmp_path: Path, provider: str) -> None:
    asked = requests()
    live_client = client_for(server, tmp_path / "live.sqlite", provider, mode="live", max_concurrency=1)
    live = live_client.complete_many(asked)
    live_bodies = list(server.bodies)
    server.reset()

    batch_client = client_for(server, tmp_path / "batch.sqlite", provider)
    batch = batch_client.complete_many(asked)
    assert chat_calls(server, provider) == 0  # every answer came from the batch
    assert len(server.batches) == 1
    assert [(a.text, a.request_id, a.tokens_in, a.tokens_out) for a in batch] == [
        (a.text, a.request_id, a.tokens_in, a.tokens_out) for a in live
    ]
    assert not any(answer.cached for answer in batch)
    keys = [request_key(batch_client.config, request) for request in asked]
    assert [answer.request_id for answer in batch] == keys
    assert stored(batch_client, keys) == stored(live_client, keys)  # same keys, requests, texts, tokens
    # Each item is what the live call sent, under its request key as custom id.
    assert server.batch_items == live_bodies
    [fake_batch] = server.batches.values()
    assert [custom_id for custom_id, _, _ in fake_batch.outcomes] == keys
    assert batch_client.usage("translate").as_dict() == live_client.usage("translate").as_dict()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_replay_after_a_batch_run_has_no_misses(
    server: FakeLLMServer, tmp_path: Path, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store.sqlite"
    asked = requests()
    batch = client_for(server, store, provider).complete_many(asked)
    sent = server.requests_total
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    replay_client = client_for(server, store, provider, mode="replay")
    replay = replay_client.complete_many(asked)
    assert [a.text for a in replay] == [a.text for a in batch]
    assert all(answer.cached for answer in replay)
    assert replay_client.usage("translate").cache_hits == len(asked)
    assert server.requests_total == sent


@pytest.mark.parametrize("provider", PROVIDERS)
def test_batch_sends_only_the_store_misses(server: FakeLLMServer, tmp_path: Path, provider: str) -> None:
    store = tmp_path / "store.sqlite"
    asked = requests()
    client_for(server, store, provider, mode="auto").complete_many(asked[:2])
    server.reset()
    client = client_for(server, store, provider)
    answers = client.complete_many(asked)
    assert [a.cached for a in answers] == [True, True, False, False, False]
    assert len(server.batch_items) == 3
    assert client.usage("translate").as_dict()["requests_sent"] == 3


# --- what a batch leaves unanswered -------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_expired_batch_falls_back_to_live_calls(server: FakeLLMServer, tmp_path: Path, provider: str) -> None:
    server.batch_plan("expired")  # the items at odd positions were never run
    client = client_for(server, tmp_path / "store.sqlite", provider)
    answers = client.complete_many(requests())
    assert [a.text for a in answers][:4] == [f"echo: question {i}" for i in range(4)]
    assert chat_calls(server, provider) == 2
    # the fallback calls run side by side: which one the server saw first is not fixed
    assert sorted(body["messages"][-1]["content"] for body in server.bodies if "messages" in body) == [
        "question 1",
        "question 3",
    ]
    assert len(client.store) == 5
    assert client.usage("translate").requests_sent == 5 + 2  # each batch item, then each live retry


@pytest.mark.parametrize("provider", PROVIDERS)
def test_expired_batch_is_reported_when_the_fallback_is_report(
    server: FakeLLMServer, tmp_path: Path, provider: str
) -> None:
    store = tmp_path / "store.sqlite"
    server.batch_plan("expired")
    client = client_for(server, store, provider, batch_fallback="report")
    with pytest.raises(LLMError) as info:
        client.complete_many(requests())
    message = str(info.value)
    assert "2 of 5 request(s) got no answer" in message
    assert ("batch_expired" if provider == "openai" else "2 × expired") in message
    assert "stage 'translate' (example 1)" in message
    assert 'llm.batch_fallback = "live"' in message
    assert "\n" not in message
    assert chat_calls(server, provider) == 0
    assert len(client.store) == 3  # what the batch answered is kept

    again = client_for(server, store, provider, batch_fallback="report").complete_many(requests())
    assert [a.cached for a in again] == [True, False, True, False, True]
    assert len(server.batch_items) == 5 + 2  # the second batch held only the two missing


@pytest.mark.parametrize("provider", PROVIDERS)
def test_partial_results_are_retried_live(server: FakeLLMServer, tmp_path: Path, provider: str) -> None:
    server.batch_plan("partial")  # the item at position 2 has no line in any result file
    answers = client_for(server, tmp_path / "store.sqlite", provider).complete_many(requests())
    assert answers[2].text == "echo: question 2"
    assert chat_calls(server, provider) == 1
    assert server.bodies[-1]["messages"][-1]["content"] == "question 2"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_errored_items_are_retried_live_or_reported(server: FakeLLMServer, tmp_path: Path, provider: str) -> None:
    server.batch_plan("errored", "errored")  # the items at positions 1 and 4 failed in the batch
    with pytest.raises(LLMError, match=r"2 of 5 request\(s\) got no answer .*2 × .*fake item fault"):
        client_for(server, tmp_path / "a.sqlite", provider, batch_fallback="report").complete_many(requests())
    answers = client_for(server, tmp_path / "b.sqlite", provider).complete_many(requests())
    assert (answers[1].text, answers[4].text) == ("echo: question 1", "echo: ادامهٔ متن را بنویس")
    assert chat_calls(server, provider) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_past_its_max_wait_is_cancelled_and_called_live(
    server: FakeLLMServer, tmp_path: Path, provider: str
) -> None:
    server.batch_plan("stuck")
    client = client_for(server, tmp_path / "store.sqlite", provider, batch_max_wait=0.2)
    answers = client.complete_many(requests(3))
    assert [a.text for a in answers][:2] == ["echo: question 0", "echo: question 1"]
    [batch] = server.batches.values()
    assert batch.cancelled
    assert chat_calls(server, provider) == 3

    server.batch_plan("stuck")
    reporting = client_for(server, tmp_path / "other.sqlite", provider, batch_max_wait=0.1, batch_fallback="report")
    with pytest.raises(LLMError, match=r"not ended within llm\.batch_max_wait = 0\.1 s"):
        reporting.complete_many(requests(3))


def test_a_failure_while_waiting_cancels_the_batches_still_running(
    server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreadable(self: Any, batch_id: str) -> Any:
        raise ValueError(f"results of {batch_id} unreadable")

    monkeypatch.setitem(BATCH_LIMITS, "openai", BatchLimits(2, 10**9))
    monkeypatch.setattr(llm_batch.OpenAIBatches, "results", unreadable)
    server.batch_plan("partial", "stuck")  # the first batch ends, the second never does
    with pytest.raises(LLMError, match=r"reading the results of batch batch_fake1: ValueError: .* unreadable"):
        client_for(server, tmp_path / "store.sqlite", "openai").complete_many(requests(4))
    assert [batch.cancelled for batch in server.batches.values()] == [False, True]


def test_a_refused_item_fails_live_with_the_refusal(tmp_path: Path) -> None:
    """An item the strict fake refuses (max_tokens to o1-mini) fails in the batch, and again, clearly, live."""
    with FakeLLMServer(strict=True) as strict:
        client = client_for(
            strict, tmp_path / "store.sqlite", "openai", model="o1-mini", model_rule={"token_limit": "max_tokens"}
        )
        client = LLMClient(dataclasses.replace(client.config, max_concurrency=1))
        with pytest.raises(LLMError, match=r"HTTP 400 .*parameter 'max_tokens'") as info:
            client.complete_many(requests(2))
    assert "token_limit" in str(info.value)  # the live error names the setting to change
    assert len(strict.refusals) == 2 + 1  # both batch items, then the first live call (the second never starts)


# --- splitting ----------------------------------------------------------------------------------------------


def test_the_provider_limits_are_the_documented_ones() -> None:
    assert BATCH_LIMITS["openai"] == BatchLimits(50_000, 200_000_000)
    assert BATCH_LIMITS["anthropic"] == BatchLimits(100_000, 256_000_000)
    assert BATCH_DISCOUNT == 0.5


@pytest.mark.parametrize("provider", PROVIDERS)
def test_misses_over_the_request_limit_go_in_several_batches(
    server: FakeLLMServer, tmp_path: Path, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(BATCH_LIMITS, provider, BatchLimits(2, 10**9))
    answers = client_for(server, tmp_path / "store.sqlite", provider).complete_many(requests(5))
    assert [batch.size for batch in server.batches.values()] == [2, 2, 1]
    assert len({a.request_id for a in answers}) == 5 and chat_calls(server, provider) == 0


def test_misses_over_the_byte_limit_go_in_several_batches(
    server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_for(server, tmp_path / "store.sqlite", "openai")
    asked = requests(4)
    client = LLMClient(config)
    item_sizes = [
        len(json.dumps(llm_batch.OpenAIBatches(config, None).item(request_key(config, r), r)))  # type: ignore[arg-type]
        for r in asked
    ]
    monkeypatch.setitem(BATCH_LIMITS, "openai", BatchLimits(1000, max(item_sizes) * 2 + 5))
    client.complete_many(asked)
    sizes = [batch.size for batch in server.batches.values()]
    assert sum(sizes) == 4 and max(sizes) == 2


# --- secrets ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_api_key_never_appears_in_a_batch_error(
    server: FakeLLMServer, tmp_path: Path, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.expected_key = "sk-the-right-one"  # the fake's 401 echoes the key it was shown
    client = client_for(server, tmp_path / "store.sqlite", provider)
    with pytest.raises(LLMError) as info:
        client.complete_many(requests(2))
    error = info.value
    text = str(error) + repr(error) + "".join(traceback.format_exception(error))
    assert error.status_code == 401
    assert "submitting a batch of 2 request(s)" in text
    assert "[REDACTED]" in text  # the key was in the answer, and scrubbed
    assert FAKE_API_KEY not in text
    assert FAKE_API_KEY not in caplog.text

    server.expected_key = None
    server.batch_plan("expired")
    with pytest.raises(LLMError) as reported:
        client_for(server, tmp_path / "store.sqlite", provider, batch_fallback="report").complete_many(requests(2))
    assert FAKE_API_KEY not in str(reported.value) + "".join(traceback.format_exception(reported.value))
    for path in tmp_path.iterdir():
        assert FAKE_API_KEY.encode() not in path.read_bytes(), path.name


# --- configuration and summary ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"mode": "bulk"}, "llm.mode must be one of"),
        ({"batch_fallback": "retry"}, r"llm\.batch_fallback must be one of \('live', 'report'\)"),
        ({"batch_poll_interval": 0}, "llm.batch_poll_interval must be a number of seconds > 0"),
        ({"batch_max_wait": float("nan")}, "llm.batch_max_wait must be a number of seconds > 0"),
        ({"batch_max_wait": float("inf")}, "llm.batch_max_wait must be a number of seconds > 0"),
        ({"batch_poll_interval": 60, "batch_poll_max_interval": 30}, "must be >= llm.batch_poll_interval"),
    ],
)
def test_bad_batch_settings_are_refused_in_one_line(overrides: dict[str, Any], message: str) -> None:
    section = {"provider": "openai", "model": "m", **overrides}
    with pytest.raises(ValueError, match=message) as info:
        LLMConfig.from_mapping(section, env={})
    assert "\n" not in str(info.value)


def test_batch_settings_have_defaults_and_read_from_the_config() -> None:
    plain = LLMConfig.from_mapping({"provider": "anthropic", "model": "m"}, env={})
    assert (plain.batch_fallback, plain.batch_poll_interval, plain.batch_poll_max_interval) == ("live", 10.0, 300.0)
    assert plain.batch_max_wait == 90_000.0
    section = {"provider": "openai", "model": "m", "mode": "batch", "batch_fallback": "report", "batch_max_wait": 60}
    config = LLMConfig.from_mapping(section, env={})
    assert (config.mode, config.batch_fallback, config.batch_max_wait) == ("batch", "report", 60.0)
    assert LLMConfig.from_mapping({"provider": "openai", "model": "m"}, env={"PBBQ_LLM_MODE": "batch"}).mode == "batch"
    # The cache identity is what answers depend on, not how they arrive.
    assert (
        config.cache_identity() == LLMConfig.from_mapping({"provider": "openai", "model": "m"}, env={}).cache_identity()
    )


def test_usage_summary_prints_the_cost_live_and_as_batch() -> None:
    usage = {"requests_sent": 4, "cache_hits": 3, "tokens_in": 8000, "tokens_out": 1200, "cost_usd": 0.028}
    unpriced = {**usage, "cost_usd": None}
    lines = usage_summary({"04_disambiguate": {"llm": usage}, "07_translate": {"llm": unpriced}, "02_survey": {}})
    assert lines == [
        "04_disambiguate: 4 requests sent, 3 from the store, 8000 tokens in, 1200 out, $0.0280 live, $0.0140 as batch",
        "07_translate: 4 requests sent, 3 from the store, 8000 tokens in, 1200 out, cost unknown",
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_progress_follows_the_batch(
    server: FakeLLMServer, tmp_path: Path, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, int, int, float | None]] = []

    class Recording(llm_batch.RequestProgress):
        def close(self) -> None:
            seen.append((self.stage, self.total, self.done, self.cost))
            super().close()

    monkeypatch.setattr(llm_batch, "RequestProgress", Recording)
    server.batch_plan("partial")  # the item at position 2 is answered live
    client = client_for(server, tmp_path / "store.sqlite", provider)
    asked = requests(5)
    client.complete_many(asked)
    (stage, total, done, cost), (live_stage, live_total, live_done, _) = seen
    assert (stage, total, done) == ("translate (batch)", 5, 5)
    assert (live_stage, live_total, live_done) == ("translate (live, after batch)", 1, 1)
    by_batch = [client.store.get(request_key(client.config, r)) for i, r in enumerate(asked) if i != 2]
    live_price = sum(r.tokens_in * 2.0 + r.tokens_out * 10.0 for r in by_batch if r) / 1e6
    assert cost == pytest.approx(BATCH_DISCOUNT * live_price) and cost > 0
