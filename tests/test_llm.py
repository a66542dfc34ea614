"""The LLM client layer against real local HTTP servers (tests/fakes/llm_servers.py)."""

from __future__ import annotations

import json
import logging
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from pbbq.tasks.core.prompts import PromptBundle
from pbbq.tasks.llm import (
    PROVIDERS,
    InProcessTransport,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMRequest,
    LLMResponse,
    RateLimiter,
    ReplayMissError,
    ResponseStore,
    open_store,
    request_key,
    transcript_source,
)
from tests.fakes.llm_servers import FakeLLMServer
from tests.helpers import FAKE_API_KEY, llm_config

pytestmark = pytest.mark.usefixtures("llm_api_keys")
PROMPT_HASH = "a" * 64


def config_for(server: FakeLLMServer, tmp_path: Path, provider: str = "openai", **overrides: Any) -> LLMConfig:
    settings = {"max_retries": 3, "timeout": 5.0}
    return llm_config(server, tmp_path / "store.sqlite", provider, **settings | overrides)


def client_for(server: FakeLLMServer, tmp_path: Path, provider: str = "openai", **overrides: Any) -> LLMClient:
    return LLMClient(config_for(server, tmp_path, provider, **overrides))


def req(i: int, *, prompt_hash: str = PROMPT_HASH, system: str | None = None) -> LLMRequest:
    return LLMRequest(
        messages=(("user", f"question {i}"),),
        system=system,
        prompt_hash=prompt_hash,
        stage="disambiguate",
        context=f"template AGE-{i:02d}-T1, assignment biased",
    )


# --- transport faults -------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("fault", ["429", "500", "slow"])
def test_transport_fault_is_retried_by_the_sdk(
    server: FakeLLMServer, tmp_path: Path, provider: str, fault: str
) -> None:
    server.slow_seconds = 1.5
    client = client_for(server, tmp_path, provider, timeout=0.5)
    server.plan(fault)
    [answer] = client.complete_many([req(1)])
    assert answer.text == "echo: question 1"
    assert server.faults_served[fault] == 1
    assert server.requests_total == 2
    # One call from our side: the second HTTP request was the SDK's own retry.
    assert client.usage("disambiguate").requests_sent == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_malformed_200_is_reissued_by_the_client(server: FakeLLMServer, tmp_path: Path, provider: str) -> None:
    client = client_for(server, tmp_path, provider)
    server.plan("malformed")
    [answer] = client.complete_many([req(1)])
    assert answer.text == "echo: question 1"
    assert server.requests_total == 2
    assert client.usage("disambiguate").requests_sent == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_sdk_alone_does_not_retry_a_malformed_200(server: FakeLLMServer, provider: str) -> None:
    """The finding behind the client's re-issue of malformed answers: if an SDK starts retrying these, drop it."""
    server.plan("malformed")
    with pytest.raises(json.JSONDecodeError):
        if provider == "openai":
            sdk = openai.OpenAI(api_key=FAKE_API_KEY, base_url=server.openai_base_url, max_retries=3)
            sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5)
        else:
            sdk_a = anthropic.Anthropic(api_key=FAKE_API_KEY, base_url=server.anthropic_base_url, max_retries=3)
            sdk_a.messages.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5)
    assert server.requests_total == 1


def test_persistent_malformed_answer_gives_up_after_max_retries(server: FakeLLMServer, tmp_path: Path) -> None:
    client = client_for(server, tmp_path, max_retries=2)
    server.fail_rate("malformed", 1.0)
    with pytest.raises(LLMError, match="malformed answer 3 times") as info:
        client.complete_many([req(1)])
    assert "AGE-01-T1" in str(info.value)
    assert server.requests_total == 1 + 2  # the first call and max_retries re-issues


def test_persistent_500_fails_after_the_sdk_retries(server: FakeLLMServer, tmp_path: Path) -> None:
    client = client_for(server, tmp_path, max_retries=1)  # not the SDK default (2)
    server.fail_rate("500", 1.0)
    with pytest.raises(LLMError) as info:
        client.complete_many([req(4)])
    assert info.value.status_code == 500
    assert "HTTP 500" in str(info.value)
    assert "stage 'disambiguate' (template AGE-04-T1, assignment biased)" in str(info.value)
    assert server.requests_total == 2
    assert len(client.store) == 0


# --- modes, store and keys --------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_replay_after_live_gives_identical_answers_without_requests(
    server: FakeLLMServer, tmp_path: Path, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = [req(i) for i in range(5)]
    live = client_for(server, tmp_path, provider, mode="live").complete_many(requests)
    assert server.requests_total == 5
    assert not any(answer.cached for answer in live)
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    replay = client_for(server, tmp_path, provider, mode="replay").complete_many(requests)
    assert [a.text for a in replay] == [a.text for a in live]
    assert [a.request_id for a in replay] == [a.request_id for a in live]
    assert all(answer.cached for answer in replay)
    assert server.requests_total == 5


def test_live_mode_always_calls(server: FakeLLMServer, tmp_path: Path) -> None:
    client_for(server, tmp_path, mode="live").complete_many([req(1), req(2)])
    again = client_for(server, tmp_path, mode="live").complete_many([req(1), req(2)])
    assert server.requests_total == 4
    assert not any(answer.cached for answer in again)


def test_replay_miss_names_stage_context_and_how_to_go_live(server: FakeLLMServer, tmp_path: Path) -> None:
    client = client_for(server, tmp_path, mode="replay")
    with pytest.raises(ReplayMissError) as info:
        client.complete_many([req(7)])
    message = str(info.value)
    assert "stage 'disambiguate'" in message
    assert "template AGE-07-T1, assignment biased" in message
    assert "PBBQ_LLM_MODE=live or auto" in message
    assert "OPENAI_API_KEY" in message
    assert server.requests_total == 0


def test_order_is_preserved_and_duplicates_are_called_once(server: FakeLLMServer, tmp_path: Path) -> None:
    answers = client_for(server, tmp_path).complete_many([req(3), req(1), req(3), req(2)])
    assert [a.text for a in answers] == ["echo: question 3", "echo: question 1", "echo: question 3", "echo: question 2"]
    assert server.requests_total == 3


@dataclass(frozen=True)
class OnePrompt(PromptBundle):
    """A stage's prompt bundle of one file, hashed as every stage hashes its bundle (tasks/core/prompts.py)."""

    text: str


def test_changed_prompt_file_invalidates_exactly_its_requests(server: FakeLLMServer, tmp_path: Path) -> None:
    prompt_a, prompt_b = tmp_path / "a.txt", tmp_path / "b.txt"
    prompt_a.write_text("Continue the story, version 1.", encoding="utf-8")
    prompt_b.write_text("Translate the example.", encoding="utf-8")

    def batch() -> list[LLMRequest]:
        hash_a, hash_b = OnePrompt.read((prompt_a,)).sha256, OnePrompt.read((prompt_b,)).sha256
        return [req(1, prompt_hash=hash_a), req(2, prompt_hash=hash_b), req(3, prompt_hash=hash_b)]

    client = client_for(server, tmp_path)
    client.complete_many(batch())
    assert client.complete_many(batch())[0].cached
    assert server.requests_total == 3
    prompt_a.write_text("Continue the story, version 2.", encoding="utf-8")
    answers = client.complete_many(batch())
    assert [a.cached for a in answers] == [False, True, True]
    assert server.requests_total == 4
    assert server.bodies[-1]["messages"][-1]["content"] == "question 1"


def test_request_key_covers_the_request_not_the_endpoint(server: FakeLLMServer, tmp_path: Path) -> None:
    base = config_for(server, tmp_path)
    elsewhere = config_for(server, tmp_path, base_url="http://127.0.0.1:1/v1", api_key_env="OTHER_KEY")
    assert request_key(base, req(1)) == request_key(elsewhere, req(1))
    assert request_key(base, req(1)) == request_key(config_for(server, tmp_path, temperature=0), req(1))
    changed = [
        request_key(config_for(server, tmp_path, temperature=0.7), req(1)),
        request_key(config_for(server, tmp_path, max_tokens=99), req(1)),
        request_key(config_for(server, tmp_path, model="other-model"), req(1)),
        request_key(config_for(server, tmp_path, provider="anthropic"), req(1)),
        request_key(base, req(1, system="You are careful.")),
        request_key(base, req(1, prompt_hash="b" * 64)),
        request_key(base, req(2)),
    ]
    assert request_key(base, req(1)) not in changed
    assert len(set(changed)) == len(changed)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_system_prompt_reaches_the_provider_in_its_shape(server: FakeLLMServer, tmp_path: Path, provider: str) -> None:
    client_for(server, tmp_path, provider).complete_many([req(1, system="Answer in Persian.")])
    body = server.bodies[-1]
    if provider == "openai":
        assert server.requests_by_path["/v1/chat/completions"] == 1
        assert body["messages"][0] == {"role": "system", "content": "Answer in Persian."}
    else:
        assert server.requests_by_path["/v1/messages"] == 1
        assert body["system"] == "Answer in Persian."
        assert [m["role"] for m in body["messages"]] == ["user"]
    assert body["max_tokens"] == 1024
    assert body.get("temperature") == (0.0 if provider == "openai" else None)


class Shouting(InProcessTransport):
    """A transport of one's own: answers each request with its message in capitals, and notes what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def text(self, request: LLMRequest) -> str:
        self.asked.append(request.messages[0][1])
        return request.messages[0][1].upper()


def test_a_transport_answers_only_the_misses_and_its_answers_replay(tmp_path: Path) -> None:
    config = LLMConfig(provider="openai", model="m", mode="auto", store_path=tmp_path / "store.sqlite")
    shouting = Shouting()
    client = LLMClient(config, transport=shouting)
    client.complete(req(1))
    answers = client.complete_many([req(1), req(2), req(2)])
    assert [answer.text for answer in answers] == ["QUESTION 1", "QUESTION 2", "QUESTION 2"]
    assert [answer.cached for answer in answers] == [True, False, False]
    assert shouting.asked == ["question 1", "question 2"]  # the store answered the rest
    usage = client.usage("disambiguate")
    assert (usage.requests_sent, usage.cache_hits, usage.tokens_in, usage.tokens_out) == (2, 1, 4, 4)  # words
    client.store.close()
    replay = LLMClient(LLMConfig(provider="openai", model="m", mode="replay", store_path=tmp_path / "store.sqlite"))
    assert replay.complete(req(2)) == LLMResponse("QUESTION 2", request_key(config, req(2)), True, 2, 2)
    replay.store.close()


# --- transcripts ------------------------------------------------------------------------------


def recorded_store(server: FakeLLMServer, tmp_path: Path) -> LLMClient:
    client = client_for(server, tmp_path)
    persian = LLMRequest(
        messages=(("user", "ادامهٔ متن را بنویس"),), prompt_hash=PROMPT_HASH, stage="translate", context="x"
    )
    client.complete_many([req(i) for i in range(4)] + [persian])
    return client


def test_transcript_round_trip_is_deterministic(server: FakeLLMServer, tmp_path: Path) -> None:
    client = recorded_store(server, tmp_path)
    header = {"note": "answers written to stand in for a model's", "build": "sample"}
    first, second = tmp_path / "t1.jsonl", tmp_path / "t2.jsonl"
    assert client.store.export_jsonl(first, header) == 5
    client.store.export_jsonl(second, header)
    assert first.read_bytes() == second.read_bytes()

    lines = first.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0])
    assert head["transcript"] == "pbbq"
    assert head["note"] == header["note"]
    assert head["records"] == 5
    keys = [json.loads(line)["key"] for line in lines[1:]]
    assert keys == sorted(keys)
    assert "ادامهٔ متن را بنویس" in first.read_text(encoding="utf-8")

    with ResponseStore(tmp_path / "fresh.sqlite") as fresh:
        assert fresh.import_jsonl(first) == 5
        third = tmp_path / "t3.jsonl"
        fresh.export_jsonl(third, header, sources=(transcript_source(first),))
    assert third.read_bytes() == first.read_bytes()


def test_a_transcript_is_imported_once_per_store(server: FakeLLMServer, tmp_path: Path, monkeypatch) -> None:
    """A build imports its transcript into the store each time it opens the client: the same file again is
    skipped (its answers are there), a changed one is imported."""
    client = recorded_store(server, tmp_path)
    transcript = tmp_path / "t.jsonl"
    client.store.export_jsonl(transcript, {"note": "n"})
    inserted: list[int] = []
    with ResponseStore(tmp_path / "fresh.sqlite") as fresh:
        monkeypatch.setattr(fresh, "_insert", lambda records, source: inserted.append(len(list(records))))
        assert fresh.import_jsonl(transcript) == 5 and inserted == [5]
        assert fresh.import_jsonl(transcript) == 5 and inserted == [5]  # skipped
        client.store.export_jsonl(transcript, {"note": "another recording"})
        assert fresh.import_jsonl(transcript) == 5 and inserted == [5, 5]


def test_transcript_replays_read_only(server: FakeLLMServer, tmp_path: Path) -> None:
    client = recorded_store(server, tmp_path)
    transcript = tmp_path / "t.jsonl"
    client.store.export_jsonl(transcript, {"note": "test"})
    before = server.requests_total

    store = open_store(transcript)
    assert store.read_only
    assert store.header is not None and store.header["note"] == "test"
    replay = LLMClient(config_for(server, tmp_path, mode="replay"), store)
    answers = replay.complete_many([req(i) for i in range(4)])
    assert [a.text for a in answers] == [f"echo: question {i}" for i in range(4)]
    assert server.requests_total == before

    auto = LLMClient(config_for(server, tmp_path, mode="auto"), store)
    with pytest.raises(LLMError, match="read-only transcript"):
        auto.complete_many([req(99)])
    assert server.requests_total == before


def test_tampered_transcript_is_refused_with_its_line(server: FakeLLMServer, tmp_path: Path) -> None:
    client = recorded_store(server, tmp_path)
    transcript = tmp_path / "t.jsonl"
    client.store.export_jsonl(transcript, {})
    lines = transcript.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[2])
    record["request"]["model"] = "another-model"
    lines[2] = json.dumps(record, ensure_ascii=False)
    transcript.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"t\.jsonl:3: key .* is not the sha256"):
        ResponseStore(tmp_path / "other.sqlite").import_jsonl(transcript)


# --- concurrency and rate limit ---------------------------------------------------------------


def test_concurrency_is_bounded_and_used(server: FakeLLMServer, tmp_path: Path) -> None:
    server.latency = 0.05
    client_for(server, tmp_path, max_concurrency=4).complete_many([req(i) for i in range(24)])
    assert server.requests_total == 24
    assert server.max_in_flight in range(2, 5)  # concurrency is used, and bounded by 4


def test_rate_limit_spaces_requests(server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The limiter promises when requests leave (60/rpm s apart across threads), not when they arrive: a clock
    that stands still shows every request of six threads waiting for its own slot, one interval after the last."""
    waits: list[float] = []

    class Recording(RateLimiter):
        def __init__(self, requests_per_minute: float) -> None:
            super().__init__(requests_per_minute, clock=lambda: 1000.0, sleep=waits.append)

    monkeypatch.setattr("pbbq.tasks.llm.client.RateLimiter", Recording)
    client = client_for(server, tmp_path, max_concurrency=6, requests_per_minute=600)
    client.complete_many([req(i) for i in range(6)])
    assert server.requests_total == 6
    assert sorted(waits) == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])  # 60 s / 600; the first leaves at once


# --- secrets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_api_key_never_leaks(
    server: FakeLLMServer, tmp_path: Path, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = client_for(server, tmp_path, provider, max_concurrency=2)
    server.plan("500", "malformed")
    client.complete_many([req(1), req(2)])
    transcript = tmp_path / "t.jsonl"
    client.store.export_jsonl(transcript, {"note": "test"})
    # The key did travel: the fake saw it on every request.
    assert all(FAKE_API_KEY in json.dumps(headers) for headers in server.headers)

    server.expected_key = "sk-the-right-one"
    with pytest.raises(LLMError) as info:
        client.complete_many([req(3)])
    error = info.value
    assert error.status_code == 401
    text = str(error) + repr(error) + "".join(traceback.format_exception(error))
    assert "401" in text
    assert "[REDACTED]" in text  # the fake echoed the key; it was scrubbed, not absent
    assert FAKE_API_KEY not in text

    for path in tmp_path.iterdir():  # the SQLite file, its WAL and the transcript
        assert FAKE_API_KEY.encode() not in path.read_bytes(), path.name
    assert FAKE_API_KEY not in caplog.text
    assert FAKE_API_KEY not in repr(client.config)


def test_missing_api_key_names_the_env_var(
    server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(LLMError, match="API key env var OPENAI_API_KEY is not set"):
        client_for(server, tmp_path).complete_many([req(1)])
    with pytest.raises(LLMError, match="API key env var PBBQ_TEST_KEY is not set"):
        client_for(server, tmp_path, api_key_env="PBBQ_TEST_KEY").complete_many([req(1)])
    assert server.requests_total == 0


def test_custom_key_env_is_the_one_sent(server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PBBQ_TEST_KEY", "sk-test-other-987")
    client_for(server, tmp_path, api_key_env="PBBQ_TEST_KEY").complete_many([req(1)])
    assert server.headers[-1]["authorization"] == "Bearer sk-test-other-987"


# --- usage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_usage_counts_and_cost(server: FakeLLMServer, tmp_path: Path, provider: str) -> None:
    client = client_for(server, tmp_path, provider, prices={"fake-model": (2.0, 10.0)})
    client.complete_many([req(i) for i in range(3)])  # 'question i' = 2 tokens in, 'echo: question i' = 3 out
    client.complete_many([req(i) for i in range(4)])
    usage = client.usage("disambiguate").as_dict()
    assert usage == {
        "stage": "disambiguate",
        "provider": provider,
        "model": "fake-model",
        "requests_sent": 4,
        "cache_hits": 3,
        "tokens_in": 8,
        "tokens_out": 12,
        "cost_usd": round((8 * 2.0 + 12 * 10.0) / 1e6, 6),
        "cost_note": None,
    }
    assert client.usage("translate").as_dict()["requests_sent"] == 0


def test_unknown_model_has_no_cost_but_a_note(server: FakeLLMServer, tmp_path: Path) -> None:
    client = client_for(server, tmp_path, prices={"another-model": (1.0, 1.0)})
    client.complete_many([req(1)])
    usage = client.usage("disambiguate").as_dict()
    assert usage["tokens_in"] == 2
    assert usage["cost_usd"] is None
    assert usage["cost_note"] == "no price for model 'fake-model' in llm.prices"


# --- configuration ----------------------------------------------------------------------------


def test_config_from_mapping_with_env_overrides() -> None:
    section = {"provider": "openai", "model": "gpt-x", "mode": "replay", "prices": {"gpt-x": [1, 4]}}
    plain = LLMConfig.from_mapping(section, env={})
    assert (plain.mode, plain.api_key_env, plain.base_url) == ("replay", "OPENAI_API_KEY", None)
    assert plain.prices == {"gpt-x": (1.0, 4.0)}
    env = {
        "PBBQ_LLM_MODE": "live",
        "PBBQ_LLM_PROVIDER": "anthropic",
        "PBBQ_LLM_MODEL": "claude-x",
        "PBBQ_LLM_BASE_URL": "http://127.0.0.1:9/",
    }
    overridden = LLMConfig.from_mapping(section, env=env)
    assert (overridden.mode, overridden.provider, overridden.model) == ("live", "anthropic", "claude-x")
    assert overridden.base_url == "http://127.0.0.1:9/"
    assert overridden.api_key_env == "ANTHROPIC_API_KEY"
    assert LLMConfig.from_mapping(section, env={"PBBQ_LLM_MODE": ""}).mode == "replay"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"provider": "openai", "model": "m", "api_key": FAKE_API_KEY}, "llm.api_key is not allowed"),
        ({"provider": "openai", "model": "m", "temprature": 0}, r"unknown llm config keys \['temprature'\]"),
        ({"provider": "azure", "model": "m"}, "llm.provider must be one of"),
        ({"provider": "openai", "model": "m", "mode": "record"}, "llm.mode must be one of"),
        ({"provider": "openai"}, r"missing \['model'\]"),
        ({"provider": "openai", "model": "m", "max_concurrency": 0}, "max_concurrency must be >= 1"),
        ({"provider": "anthropic", "model": "m", "temperature": 0.7}, "takes no temperature"),
    ],
)
def test_bad_config_is_refused_clearly(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        LLMConfig.from_mapping(section, env={})
    assert FAKE_API_KEY not in str(info.value)


def test_request_refuses_a_system_role_message() -> None:
    with pytest.raises(ValueError, match=r"pass a system prompt as LLMRequest\.system"):
        LLMRequest(messages=(("system", "x"),), prompt_hash=PROMPT_HASH, stage="s", context="c")
