"""Real providers as they are today: the model rules of ``tasks/llm/config.py`` against a fake OpenAI server
that refuses, as the official API does, what its reasoning models do not take (``tests/fakes/llm_servers.py``,
``strict=True``). The fake's rules are written independently of the client's table, so a wrong row fails here.
"""

from __future__ import annotations

import gzip
import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pandas as pd
import pyarrow as pa
import pytest

from pbbq.flows.config import ConfigError, load_config
from pbbq.tasks.core.schemas import TEMPLATE
from pbbq.tasks.disambiguate import COLUMNS, DisambiguateParams, Prompts, disambiguate
from pbbq.tasks.llm import (
    MODEL_RULES,
    REASONING_MAX_TOKENS,
    SYSTEM_MARK,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMRequest,
    ResponseStore,
    request_key,
    request_payload,
    rule_for,
)
from pbbq.tasks.translate.batch import translate_segments
from pbbq.tasks.translate.glossary import GLOSSARY_COLUMNS, Glossary
from pbbq.tasks.translate.pair import TranslateParams
from pbbq.tasks.translate.requests import TranslatePrompts
from pbbq.tasks.translate.segments import segments
from tests.fakes.llm_servers import FakeLLMServer
from tests.helpers import llm_config

KEY = "test.strict.key.0a1b2c3d"  # fake, shaped unlike a real key
PROMPT_HASH = "c" * 64
TRANSCRIPT = Path(__file__).resolve().parents[1] / "prompts" / "transcripts" / "sample.jsonl.gz"
STAGE_MODELS = ["o1-mini", "o3-mini", "gpt-4o"]
OFFICIAL_MODELS = [
    "o1",
    "o1-mini",
    "o1-mini-2024-09-12",
    "o1-preview",
    "o3",
    "o3-mini",
    "o4-mini",
    "o4-mini-2025-04-16",
    "gpt-5",
    "gpt-5-mini",
    "gpt-5-nano",
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4.1",
    "chatgpt-4o-latest",
]


@pytest.fixture
def strict() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(strict=True, expected_key=KEY) as server:
        yield server


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def config_for(server: FakeLLMServer, tmp_path: Path, model: str, **overrides: Any) -> LLMConfig:
    settings = {"model": model, "max_retries": 3, "timeout": 5.0}
    return llm_config(server, tmp_path / f"{model}.sqlite", **settings | overrides)


def req(i: int, *, system: str | None = None, turns: int = 1) -> LLMRequest:
    messages: tuple[tuple[str, str], ...] = (("user", f"question {i}"),)
    if turns > 1:
        messages += (("assistant", "a first answer"), ("user", "try again"))
    return LLMRequest(messages=messages, system=system, prompt_hash=PROMPT_HASH, stage="disambiguate", context=f"#{i}")


def sent_only_what_is_accepted(server: FakeLLMServer, model: str) -> None:
    """Every body the fake saw is one the official API takes from ``model``, and names the model's parameters."""
    assert server.refusals == []
    assert server.bodies
    reasoning = model.startswith(("o1", "o3", "o4", "gpt-5"))
    for body in server.bodies:
        assert body["model"] == model
        assert "max_tokens" not in body
        assert body["max_completion_tokens"] == (REASONING_MAX_TOKENS if reasoning else 1024)
        assert ("temperature" in body) == (not reasoning)
        if model == "o1-mini":
            assert {m["role"] for m in body["messages"]} <= {"user", "assistant"}


# --- the table ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "token_limit", "temperature", "system_message", "reasoning"),
    [
        ("o1-mini", "max_completion_tokens", False, False, True),
        ("o1-mini-2024-09-12", "max_completion_tokens", False, False, True),
        ("openai/o1-mini", "max_completion_tokens", False, False, True),  # the name behind a router or vLLM
        ("o1", "max_completion_tokens", False, True, True),
        ("o3-mini", "max_completion_tokens", False, True, True),
        ("o4-mini", "max_completion_tokens", False, True, True),
        ("GPT-5-mini", "max_completion_tokens", False, True, True),
        ("gpt-4o", "max_completion_tokens", True, True, False),
        ("gpt-4.1-mini", "max_completion_tokens", True, True, False),
        ("chatgpt-4o-latest", "max_completion_tokens", True, True, False),
        ("gpt-oss:20b", "max_tokens", True, True, False),
        ("llama3.1:8b", "max_tokens", True, True, False),
        ("Qwen/Qwen2.5-7B-Instruct", "max_tokens", True, True, False),
        ("sample-stand-in", "max_tokens", True, True, False),
    ],
)
def test_rule_follows_the_model_name(
    model: str, token_limit: str, temperature: bool, system_message: bool, reasoning: bool
) -> None:
    rule = rule_for(model)
    assert (rule.token_limit, rule.temperature, rule.system_message, rule.reasoning) == (
        token_limit,
        temperature,
        system_message,
        reasoning,
    )
    assert rule.reasoning_effort is None  # the table never sends one: o1-mini refuses it
    assert MODEL_RULES[-1][0] == "*"  # every name has a rule


@pytest.mark.parametrize("model", OFFICIAL_MODELS)
def test_every_official_model_accepts_what_its_rule_sends(strict: FakeLLMServer, tmp_path: Path, model: str) -> None:
    client = LLMClient(config_for(strict, tmp_path, model))
    answers = client.complete_many([req(1, system="Answer in Persian.", turns=2), req(2)])
    assert [a.text for a in answers] == ["echo: try again", "echo: question 2"]
    assert strict.refusals == []
    [first] = [
        body["messages"][0]
        for body in strict.bodies
        if len(body["messages"]) > 1 and body["messages"][-1]["content"] == "try again"
    ]
    if rule_for(model).system_message:
        assert first == {"role": "system", "content": "Answer in Persian."}
    else:  # the system prompt leads the first user message, marked as such
        assert first == {
            "role": "user",
            "content": SYSTEM_MARK.format(system="Answer in Persian.", content="question 1"),
        }
        assert first["content"].startswith("[System message]\nAnswer in Persian.\n[End of system message]\n\n")


# --- the strict fake is the official API ---------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "arguments", "param", "code"),
    [
        ("o1-mini", {"max_tokens": 5}, "max_tokens", "unsupported_parameter"),
        ("o3-mini", {"max_completion_tokens": 5, "temperature": 0.0}, "temperature", "unsupported_value"),
        ("gpt-5-mini", {"max_tokens": 5}, "max_tokens", "unsupported_parameter"),
        ("o1-mini", {"system": True}, "messages[0].role", "unsupported_value"),
        ("o1-mini", {"reasoning_effort": "low"}, "reasoning_effort", "unsupported_parameter"),
        ("gpt-4o", {"reasoning_effort": "low"}, "reasoning_effort", "unsupported_parameter"),
        ("o3-mini", {"reasoning_effort": "minimal"}, "reasoning_effort", "unsupported_value"),
    ],
)
def test_strict_fake_refuses_as_the_official_api(
    strict: FakeLLMServer, model: str, arguments: dict[str, Any], param: str, code: str
) -> None:
    sdk = openai.OpenAI(api_key=KEY, base_url=strict.openai_base_url, max_retries=3)
    messages = [{"role": "user", "content": "hi"}]
    if arguments.pop("system", False):
        messages.insert(0, {"role": "system", "content": "be brief"})
    with pytest.raises(openai.BadRequestError) as info:
        sdk.chat.completions.create(model=model, messages=messages, **arguments)  # type: ignore[call-overload]
    assert (info.value.status_code, info.value.type, info.value.param, info.value.code) == (
        400,
        "invalid_request_error",
        param,
        code,
    )
    assert f"'{param}'" in str(info.value.body)
    assert strict.requests_total == 1  # the SDK does not retry a 400


def test_strict_fake_accepts_what_the_official_api_accepts(strict: FakeLLMServer) -> None:
    sdk = openai.OpenAI(api_key=KEY, base_url=strict.openai_base_url, max_retries=0)
    user = [{"role": "user", "content": "hi"}]
    sdk.chat.completions.create(model="gpt-4o", messages=user, max_tokens=5, temperature=0.0)  # deprecated, taken
    sdk.chat.completions.create(model="o3-mini", messages=user, temperature=1, reasoning_effort="high")
    sdk.chat.completions.create(model="o1", messages=[{"role": "system", "content": "x"}, *user])
    assert strict.refusals == [] and strict.requests_total == 3
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        sdk.chat.completions.create(model="gpt-7-imaginary", messages=user)


# --- a refused request: not retried, one line, what to change -------------------------------------


@pytest.mark.parametrize(
    ("model", "rule", "system", "param", "fix"),
    [
        (
            "o1-mini",
            {"token_limit": "max_tokens"},
            None,
            "max_tokens",
            'model_rule = { token_limit = "max_completion_tokens" }',
        ),
        ("o3-mini", {"temperature": True}, None, "temperature", "model_rule = { temperature = false }"),
        (
            "o1-mini",
            {"system_message": True},
            "Be brief.",
            "messages[0].role",
            "model_rule = { system_message = false }",
        ),
        (
            "o1-mini",
            {"reasoning_effort": "low"},
            None,
            "reasoning_effort",
            "remove reasoning_effort from [llm] model_rule",
        ),
    ],
)
def test_a_refusal_is_not_retried_and_says_what_to_change(
    strict: FakeLLMServer, tmp_path: Path, model: str, rule: dict[str, Any], system: str | None, param: str, fix: str
) -> None:
    client = LLMClient(config_for(strict, tmp_path, model, model_rule=rule))
    with pytest.raises(LLMError) as info:
        client.complete_many([req(1, system=system)])
    message = str(info.value)
    assert info.value.status_code == 400
    assert "\n" not in message
    assert "HTTP 400 (invalid_request_error, unsupported_" in message
    assert f"parameter {param!r}" in message
    assert f"To change what {model!r} is sent: " in message and fix in message
    assert "stage 'disambiguate' (#1)" in message
    assert strict.requests_total == 1  # neither the SDK nor the client asked again
    assert client.usage("disambiguate").requests_sent == 1
    assert len(client.store) == 0


def test_no_call_starts_after_a_refusal(strict: FakeLLMServer, tmp_path: Path) -> None:
    strict.latency = 0.05
    config = config_for(strict, tmp_path, "o1-mini", model_rule={"token_limit": "max_tokens"}, max_concurrency=3)
    with pytest.raises(LLMError, match="parameter 'max_tokens'"):
        LLMClient(config).complete_many([req(i) for i in range(30)])
    assert 1 <= strict.requests_total <= 3  # the calls in flight at the first refusal; none after it


def test_a_refusal_is_scrubbed_of_the_key(
    strict: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 400 path goes through the scrubber: a key that happens to be words of the API's message is redacted."""
    monkeypatch.setenv("OPENAI_API_KEY", "is not supported with this model")
    strict.expected_key = None
    client = LLMClient(config_for(strict, tmp_path, "o1-mini", model_rule={"token_limit": "max_tokens"}))
    with pytest.raises(LLMError) as info:
        client.complete_many([req(1)])
    assert "Unsupported parameter: 'max_tokens' [REDACTED]." in str(info.value)
    assert "is not supported with this model" not in str(info.value)


def test_an_answer_cut_off_before_any_text_is_an_error_not_a_retry(tmp_path: Path) -> None:
    """A reasoning model that spends its whole token limit thinking returns no text (finish_reason 'length')."""

    def cut_off(body: dict[str, Any]) -> str:
        return ""

    with FakeLLMServer(answer=cut_off) as server:
        original = server._httpd.RequestHandlerClass._respond  # type: ignore[attr-defined]

        def respond(handler: Any, fake: Any, body: dict[str, Any], headers: dict[str, str], fault: Any) -> None:
            handler._send(
                200,
                {
                    "id": "chatcmpl-cut",
                    "object": "chat.completion",
                    "created": 1,
                    "model": body["model"],
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "length"}
                    ],
                    "usage": {"prompt_tokens": 2, "completion_tokens": 64, "total_tokens": 66},
                },
            )

        server._httpd.RequestHandlerClass._respond = respond  # type: ignore[attr-defined]
        try:
            client = LLMClient(config_for(server, tmp_path, "o3-mini", max_tokens=64))
            with pytest.raises(
                LLMError, match=r"token limit \(max_completion_tokens = 64\) before any text; raise llm"
            ):
                client.complete_many([req(1)])
        finally:
            server._httpd.RequestHandlerClass._respond = original  # type: ignore[attr-defined]
        assert server.requests_total == 1


# --- the stages against the strict fake ------------------------------------------------------------

GOOD = "{stereo} نتوانست نوبت بگیرد و {nonstereo} زود نوبت گرفت."
ENGLISH = {
    "مرد هفتاد ساله": "seventy-year-old man",
    "بانک": "bank",
    "دختر دانشجو": "female student",
    "کدام‌یک نتوانست نوبت بگیرد؟": "Who could not get a ticket?",
    "سالمندان": "elderly people",
    "جوانان": "young people",
    "یک مرد هفتاد ساله و یک دختر دانشجو در صف بانک منتظر بودند.": (
        "A seventy-year-old man and a female student waited in the bank queue."
    ),
}


def template_row(**values: Any) -> dict[str, Any]:
    """A gated template with every column of the schema, empty unless given."""
    empty = {pa.string(): "", pa.int64(): 0, pa.float64(): 0.0, pa.bool_(): True}
    row = {f.name: [] if pa.types.is_list(f.type) else empty[f.type] for f in TEMPLATE}
    return row | values


def disambiguation_answer(body: dict[str, Any]) -> str:
    """A rule-breaking first answer (English), then a good one: the retry is a conversation with the model."""
    users = [m for m in body["messages"] if m["role"] == "user"]
    return "The old man could not." if len(users) == 1 else GOOD


def translation_answer(body: dict[str, Any]) -> str:
    """The English of the longest known Persian text in the request, else (a back-translation) the Persian of the
    longest known English: independent of how the prompt lays out its parts."""
    asked = next(m["content"] for m in body["messages"] if m["role"] == "user")
    persian = [fa for fa in ENGLISH if fa in asked]
    if persian:
        return ENGLISH[max(persian, key=len)]
    return {en: fa for fa, en in ENGLISH.items()}[max((en for en in ENGLISH.values() if en in asked), key=len)]


@pytest.mark.parametrize("model", STAGE_MODELS)
def test_disambiguate_stage_sends_only_what_the_model_accepts(
    strict: FakeLLMServer, tmp_path: Path, model: str
) -> None:
    strict.answer = disambiguation_answer
    templates = pd.DataFrame(
        [
            template_row(
                template_id="AGE-01-T1",
                stereotype_id="AGE-01",
                category="Age",
                ambiguous_fa="یک {stereo} و یک {nonstereo} در صف {lex} منتظر بودند.",
                question_negative_fa="کدام‌یک نتوانست نوبت بگیرد؟",
                question_nonnegative_fa="کدام‌یک زود نوبت گرفت؟",
                stereo_entities=["مرد هفتاد ساله"],
                nonstereo_entities=["دختر دانشجو"],
                lexical_variants=["بانک"],
            )
        ]
    )
    stereotypes = pd.DataFrame({"stereotype_id": ["AGE-01"], "statement_fa": ["پیرها با فناوری مشکل دارند."]})
    overrides = pd.DataFrame(columns=["template_id", "assignment", "text"])
    client = LLMClient(config_for(strict, tmp_path, model))
    output = disambiguate(templates, stereotypes, overrides, Prompts.load(), client, DisambiguateParams())
    assert output["templates"].iloc[0][COLUMNS["biased"]] == GOOD
    users = [sum(m["role"] == "user" for m in body["messages"]) for body in strict.bodies]
    assert sorted(users) == [1, 2]  # the first request and its retry, a conversation with the model
    for body in strict.bodies:  # the stage's instructions are a system prompt: o1-mini gets them in the user turn
        first = body["messages"][0]
        if model == "o1-mini":
            assert first["role"] == "user" and first["content"].startswith("[System message]\n")
        else:
            assert first["role"] == "system"
    sent_only_what_is_accepted(strict, model)
    assert output.report["llm"]["model"] == model and output.report["llm"]["requests_sent"] == len(strict.bodies)


@pytest.mark.parametrize("model", STAGE_MODELS)
def test_translate_stage_sends_only_what_the_model_accepts(strict: FakeLLMServer, tmp_path: Path, model: str) -> None:
    strict.answer = translation_answer
    examples = pd.DataFrame(
        {
            "context": ["یک مرد هفتاد ساله و یک دختر دانشجو در صف بانک منتظر بودند."],
            "question": ["کدام‌یک نتوانست نوبت بگیرد؟"],
            "stereo_entity": ["مرد هفتاد ساله"],
            "nonstereo_entity": ["دختر دانشجو"],
            "lexical_variant": ["بانک"],
            "answer_info": [{"ans0": ["مرد هفتاد ساله", "سالمندان"], "ans1": ["دختر دانشجو", "جوانان"]}],
            "answer_roles": [{"ans0": "stereotyped", "ans1": "non-stereotyped", "ans2": "unknown"}],
        }
    )
    client = LLMClient(config_for(strict, tmp_path, model))
    glossary = Glossary(pd.DataFrame(columns=GLOSSARY_COLUMNS))
    table, attempts = translate_segments(
        segments(examples, glossary), TranslatePrompts.load(), client, TranslateParams(), glossary
    )
    assert dict(zip(table["text_fa"], table["text_en"], strict=True)) == ENGLISH
    assert not table["flagged"].any() and set(attempts["attempt"]) == {1}
    sent_only_what_is_accepted(strict, model)
    assert len(strict.bodies) == 2 * len(ENGLISH)  # each segment there and back


# --- what the cache key holds --------------------------------------------------------------------

SAMPLE_REQUEST = LLMRequest(
    messages=(("user", "یک {stereo} و یک {nonstereo}"), ("assistant", "پاسخ"), ("user", "دوباره")),
    prompt_hash="a" * 64,
    stage="disambiguate",
    context="x",
)


@pytest.mark.parametrize(
    ("provider", "model", "key"),
    [  # computed by the client before the model rules (commit 5ce7a7e): a rule must not move them
        ("openai", "sample-stand-in", "71d42e2eba46b7bf67d0f94feca7672afde9444cd474f969ed89428819d17da8"),
        ("openai", "gpt-4o", "d7cc6afaab2cdb779d32c1ccf59b07b4f85754cef95a486837ec98716f3bc1ab"),
        ("anthropic", "claude-sonnet-4-5", "ed041ff2dceb35ef383becc2c4d22954e49bdc1937d88dec1c8b1564641db03d"),
    ],
)
def test_keys_of_non_reasoning_models_are_unchanged(provider: str, model: str, key: str) -> None:
    config = LLMConfig(provider=provider, model=model)
    assert request_key(config, SAMPLE_REQUEST) == key
    system = LLMRequest(
        messages=(("user", "q"),), system="Answer in Persian.", prompt_hash="b" * 64, stage="t", context="y"
    )
    if model == "sample-stand-in":
        assert request_key(config, system) == "0a8d58df3fcd44b059d46658659ecabb357e98af6b7f768c4be9d0d723973ff4"
        assert config.cache_identity() == {
            "provider": "openai",
            "model": "sample-stand-in",
            "sampling": {"max_tokens": 1024, "temperature": 0.0},
        }


def test_the_bundled_transcript_is_keyed_as_the_client_keys_it() -> None:
    """Every recorded request is what the client would build today, so the sample replays by key."""
    lines = gzip.decompress(TRANSCRIPT.read_bytes()).decode("utf-8").splitlines()[1:]
    assert lines
    for line in lines:
        record = json.loads(line)
        stored = record["request"]
        parameters = stored["parameters"]
        config = LLMConfig(
            provider=stored["provider"],
            model=stored["model"],
            temperature=parameters.get("temperature"),
            max_tokens=parameters["max_tokens"],
        )
        request = LLMRequest(
            messages=tuple((role, content) for role, content in stored["messages"]),
            system=stored["system"],
            prompt_hash=stored["prompt_hash"],
            stage="replay",
            context="transcript",
        )
        assert request_payload(config, request) == stored
        assert request_key(config, request) == record["key"]
    with ResponseStore.from_transcript(TRANSCRIPT) as store:
        assert len(store) == len(lines)


def test_a_real_model_is_keyed_by_what_it_is_sent(strict: FakeLLMServer, tmp_path: Path) -> None:
    o1_mini = config_for(strict, tmp_path, "o1-mini")
    system = req(1, system="Answer in Persian.")
    LLMClient(o1_mini).complete_many([system])
    body = strict.bodies[-1]
    with ResponseStore(o1_mini.store_path) as store:
        [stored] = [store.get(request_key(o1_mini, system))]
    assert stored is not None
    assert stored.request["parameters"] == {"max_tokens": REASONING_MAX_TOKENS}  # no temperature: none was sent
    assert stored.request["system_placement"] == "first_user_message"
    assert {k for k in body if k not in ("model", "messages")} == {"max_completion_tokens"}
    assert body["max_completion_tokens"] == stored.request["parameters"]["max_tokens"]

    key = request_key(o1_mini, req(1))
    renamed = config_for(strict, tmp_path, "o1-mini", model_rule={"token_limit": "max_tokens"})
    assert request_key(renamed, req(1)) == key  # a rename changes no answer
    assert "system_placement" not in request_payload(o1_mini, req(1))  # no system prompt, nothing placed
    changed = [
        request_key(config_for(strict, tmp_path, "o1"), req(1)),
        request_key(config_for(strict, tmp_path, "o1-mini", max_tokens=4000), req(1)),
        request_key(config_for(strict, tmp_path, "o3-mini", model_rule={"reasoning_effort": "high"}), req(1)),
        request_key(config_for(strict, tmp_path, "o3-mini"), req(1)),
        request_key(config_for(strict, tmp_path, "o1-mini", model_rule={"system_message": True}), system),
    ]
    assert key not in changed and len(set(changed)) == len(changed)
    assert request_key(o1_mini, system) not in changed
    assert o1_mini.cache_identity() == {
        "provider": "openai",
        "model": "o1-mini",
        "sampling": {"max_tokens": REASONING_MAX_TOKENS},
        "system_placement": "first_user_message",
    }


# --- configuration ------------------------------------------------------------------------------


def test_model_rule_from_the_configuration(sample_copy: Path) -> None:
    config = sample_copy / "configs" / "sample.toml"
    text = config.read_text(encoding="utf-8")
    text = text.replace('model = "sample-stand-in"\n', 'model = "my-o1"\nmodel_rule = { temperature = false }\n')
    config.write_text(text, encoding="utf-8")
    build = load_config(config)
    assert build.llm.rule.temperature is False and build.llm.rule.token_limit == "max_tokens"
    assert build.llm.temperature is None
    assert build.parameters()["llm"]["model_rule"] == {"temperature": False}
    assert build.parameters()["llm"]["rule"]["token_limit"] == "max_tokens"

    config.write_text(text.replace("temperature = false", "temprature = false"), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert str(info.value).startswith(f"{config}: [llm] llm.model_rule has unknown key(s) ['temprature']")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"model_rule": {"temperature": "no"}}, "llm.model_rule.temperature must be a bool, not 'no'"),
        ({"model_rule": {"system_message": 0}}, "llm.model_rule.system_message must be a bool, not 0"),
        ({"model_rule": {"token_limit": "max_output_tokens"}}, "llm.model_rule.token_limit must be one of"),
        ({"model_rule": {"reasoning_effort": "extreme"}}, "llm.model_rule.reasoning_effort must be one of"),
        ({"model_rule": ["max_tokens"]}, "llm.model_rule must be a table of"),
        ({"model": "o1-mini", "temperature": 0.0}, "llm.temperature cannot be set for model 'o1-mini'"),
        ({"provider": "anthropic", "model_rule": {"temperature": False}}, "applies to provider 'openai' only"),
    ],
)
def test_a_bad_model_rule_is_refused_by_name_and_type(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        LLMConfig.from_mapping({"provider": "openai", "model": "m"} | section, env={})


def test_the_model_from_the_environment_brings_its_rule() -> None:
    section = {"provider": "openai", "model": "sample-stand-in", "mode": "replay"}
    config = LLMConfig.from_mapping(section, env={"PBBQ_LLM_MODEL": "o1-mini", "PBBQ_LLM_MODE": "auto"})
    assert (config.model, config.temperature, config.max_tokens, config.timeout) == ("o1-mini", None, 25_000, 600.0)
    assert LLMConfig.from_mapping(section, env={}).max_tokens == 1024
    assert (
        LLMConfig.from_mapping(section | {"max_tokens": 300, "timeout": 30}, env={"PBBQ_LLM_MODEL": "o3"}).max_tokens
        == 300
    )


# --- the real builds of docs/llm.md, end to end -----------------------------------------------------------


@pytest.fixture(scope="module")
def stand_in() -> Any:
    from pbbq.flows.config import load_config as load
    from pbbq.tasks.core.inputs import load_inputs
    from tests.fakes.stand_in_model import StandInModel

    build = load()
    tables = load_inputs(build.inputs)
    return StandInModel(tables["templates"], tables["disambiguation_overrides"])


def test_the_readme_o1_mini_build_sends_only_accepted_parameters(
    prefect_server: None,
    stand_in: Any,
    sample_copy: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``PBBQ_LLM_MODE=auto PBBQ_LLM_MODEL=o1-mini pbbq build --config configs/sample.toml`` against the strict
    fake, answered by the stand-in model; then the same build told to send ``max_tokens``: refused, not retried,
    and the user reads one line that says what to change."""
    from pbbq.flows.cli import main

    config = sample_copy / "configs" / "sample.toml"
    with FakeLLMServer(strict=True, expected_key=KEY, answer=stand_in) as server:
        for name, value in {
            "PBBQ_LLM_MODE": "auto",
            "PBBQ_LLM_MODEL": "o1-mini",
            "PBBQ_LLM_BASE_URL": server.openai_base_url,
        }.items():
            monkeypatch.setenv(name, value)
        assert main(["build", "--config", str(config), "--outputs", str(tmp_path / "live")]) == 0
        run = Path(capsys.readouterr().out.strip().splitlines()[-1])
        assert server.requests_total > 1000
        sent_only_what_is_accepted(server, "o1-mini")
        usage = json.loads((run / "04_disambiguate" / "report.json").read_text(encoding="utf-8"))["llm"]
        assert usage["model"] == "o1-mini" and usage["requests_sent"] > 0
        assert usage["cost_usd"] is not None  # the sample's price table knows o1-mini
        manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["parameters"]["llm"]["rule"]["token_limit"] == "max_completion_tokens"

        server.reset()
        text = config.read_text(encoding="utf-8")
        config.write_text(
            text.replace("[llm]\n", '[llm]\nmodel_rule = { token_limit = "max_tokens" }\n'), encoding="utf-8"
        )
        assert main(["build", "--config", str(config), "--outputs", str(tmp_path / "refused")]) == 1
        [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("pbbq: error:")]
        assert "HTTP 400 (invalid_request_error, unsupported_parameter; parameter 'max_tokens')" in line
        assert 'set [llm] model_rule = { token_limit = "max_completion_tokens" }' in line
        assert KEY not in line
        assert 1 <= server.requests_total <= 8  # the requests in flight when the first refusal came, none again
        assert {refusal["param"] for refusal in server.refusals} == {"max_tokens"}
        sent = [json.dumps(body, sort_keys=True) for body in server.bodies]
        assert len(set(sent)) == len(sent)


def test_the_readme_builds_name_the_environment_they_need() -> None:
    """Each real-build command of docs/llm.md, read as the shell would, gives the configuration it describes, and
    exports the key variable that configuration reads."""
    section = (Path(__file__).resolve().parents[1] / "docs" / "llm.md").read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in section.split("```sh\n")[1:]]
    sample = tomllib.loads((Path(__file__).resolve().parents[1] / "configs" / "sample.toml").read_text("utf-8"))["llm"]
    sample = {k: v for k, v in sample.items() if k != "transcript"}
    configs = {}
    for block in blocks:
        words = shlex.split(block.replace("\\\n", " "))
        env = dict(word.split("=", 1) for word in words if re.fullmatch(r"[A-Z_]+=.*", word))
        assert words[-4:-1] == ["pbbq", "build", "--config"]
        config = LLMConfig.from_mapping(sample, env=env)
        assert words[words.index("export") + 1].split("=")[0] == config.api_key_env
        configs[config.model] = config
    o1_mini, local, claude = configs["o1-mini"], configs["qwen2.5:14b"], configs["claude-sonnet-4-5"]
    assert (o1_mini.mode, o1_mini.rule.token_limit, o1_mini.temperature, o1_mini.rule.system_message) == (
        "auto",
        "max_completion_tokens",
        None,
        False,
    )
    assert (local.base_url, local.rule.token_limit, local.temperature) == (
        "http://localhost:11434/v1",
        "max_tokens",
        0.0,
    )
    assert (claude.provider, claude.api_key_env, claude.temperature) == ("anthropic", "ANTHROPIC_API_KEY", None)
    assert o1_mini.prices["o1-mini"] == (1.10, 4.40)
