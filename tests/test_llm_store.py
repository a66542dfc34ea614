"""Where a client's answers come from (docs/architecture.md §6): a build replays only the transcript it names,
whatever else its store holds; stand-in answers are never read by another mode; a store that is not one says so."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pbbq.tasks.llm import (
    RECORDED,
    STAND_IN,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMRequest,
    ReplayMissError,
    ResponseStore,
    StoredResponse,
    open_llm,
    request_key,
    transcript_header,
    transcript_source,
)
from tests.fakes.llm_servers import FakeLLMServer
from tests.helpers import llm_config

pytestmark = pytest.mark.usefixtures("llm_api_keys")


def req(i: int) -> LLMRequest:
    return LLMRequest(messages=(("user", f"question {i}"),), prompt_hash="a" * 64, stage="disambiguate", context=f"{i}")


def config(server: FakeLLMServer, store: Path, mode: str) -> LLMConfig:
    return llm_config(server, store, mode=mode, max_retries=0)


@pytest.fixture
def transcripts(server: FakeLLMServer, tmp_path: Path) -> tuple[Path, Path]:
    """Transcript A of requests 0-2 (the fake echoes them) and B, A with request 1 answered otherwise."""
    recorder = LLMClient(config(server, tmp_path / "recorder.sqlite", "live"))
    recorder.complete_many([req(i) for i in range(3)])
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    recorder.store.export_jsonl(first, {"note": "A"})
    lines = first.read_text(encoding="utf-8").splitlines()
    changed = [json.loads(line) for line in lines]
    changed[0]["note"] = "B"
    for record in changed[1:]:
        if record["response"] == "echo: question 1":
            record["response"] = "another answer"
    second.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in changed) + "\n", encoding="utf-8")
    return first, second


def replay(server: FakeLLMServer, store: Path, transcript: Path | None) -> list[str]:
    client = open_llm(config(server, store, "replay"), transcript)
    try:
        return [answer.text for answer in client.complete_many([req(i) for i in range(3)])]
    finally:
        client.store.close()


def test_a_store_replays_the_named_transcript_after_another(
    server: FakeLLMServer, tmp_path: Path, transcripts: tuple[Path, Path]
) -> None:
    """A, then B with one answer changed, then A again in one store: the third replay is A's, not B's."""
    first, second = transcripts
    store = tmp_path / "shared.sqlite"
    assert replay(server, store, first)[1] == "echo: question 1"
    assert replay(server, store, second)[1] == "another answer"
    assert replay(server, store, first)[1] == "echo: question 1"


def test_an_empty_or_foreign_transcript_is_a_replay_miss(
    server: FakeLLMServer, tmp_path: Path, transcripts: tuple[Path, Path]
) -> None:
    """The store already holds every answer (transcript A and the model's own), yet a replay of a transcript with
    no answers, or with answers to other requests, misses and names the way out."""
    first, _ = transcripts
    store = tmp_path / "shared.sqlite"
    LLMClient(config(server, store, "live")).complete_many([req(i) for i in range(3)])
    replay(server, store, first)
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"records":0,"transcript":"pbbq","version":1}\n', encoding="utf-8")
    recorder = LLMClient(config(server, tmp_path / "other.sqlite", "live"))
    recorder.complete_many([req(7)])
    foreign = tmp_path / "foreign.jsonl"
    recorder.store.export_jsonl(foreign, {"note": "another build"})
    for transcript in (empty, foreign):
        with pytest.raises(ReplayMissError, match=f"missing from the transcript {transcript}.*--stand-in"):
            replay(server, store, transcript)


def test_auto_takes_the_transcript_first_then_the_model(
    server: FakeLLMServer, tmp_path: Path, transcripts: tuple[Path, Path]
) -> None:
    _, second = transcripts
    store = tmp_path / "shared.sqlite"
    LLMClient(config(server, store, "live")).complete_many([req(1)])
    before = server.requests_total
    auto = open_llm(config(server, store, "auto"), second)
    answers = auto.complete_many([req(1), req(5)])
    assert [a.text for a in answers] == ["another answer", "echo: question 5"]
    assert server.requests_total == before + 1


def test_stand_in_answers_offline_and_no_other_mode_reads_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    store = tmp_path / "store.sqlite"
    section = {"provider": "openai", "model": "m", "store_path": store}
    stand_in = LLMClient(LLMConfig.from_mapping(section | {"mode": "stand-in"}, env={}))
    request = LLMRequest(
        messages=(("user", "<initial_text>\nx\n</initial_text>"),),
        prompt_hash="b" * 64,
        stage="disambiguate",
        context="",
    )
    answer = stand_in.complete(request)
    assert "{stereo}" in answer.text and "{nonstereo}" in answer.text
    assert stand_in.store.get(answer.request_id, ("stand-in",)) is not None
    for mode in ("replay", "auto"):
        with pytest.raises(LLMError):
            LLMClient(LLMConfig.from_mapping(section | {"mode": mode}, env={})).complete(request)


def test_the_cache_identity_names_where_answers_come_from(
    server: FakeLLMServer, tmp_path: Path, transcripts: tuple[Path, Path]
) -> None:
    """A stage cached on one transcript is not reused with another, nor with the stand-in's answers."""
    first, second = transcripts
    store = tmp_path / "shared.sqlite"
    identities = [
        open_llm(config(server, store, "replay"), first).cache_identity(),
        open_llm(config(server, store, "replay"), second).cache_identity(),
        open_llm(config(server, store, "stand-in"), first).cache_identity(),
        open_llm(config(server, store, "auto"), first).cache_identity(),
    ]
    assert len({json.dumps(identity, sort_keys=True) for identity in identities}) == 4


def test_a_corrupt_store_names_its_file(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    path.write_bytes(b"not a database at all, but long enough to be read as a header" * 20)
    with pytest.raises(LLMError, match=f"^{path}: not a response store"):
        ResponseStore(path)


def test_a_store_of_the_earlier_layout_keeps_its_answers_as_the_models(server: FakeLLMServer, tmp_path: Path) -> None:
    """A store written before answers had a source: its rows are the model's own (a replay with no transcript
    reads them), and no transcript's."""

    path = tmp_path / "old.sqlite"
    LLMClient(config(server, path, "live")).complete_many([req(1)])
    with sqlite3.connect(path) as db:  # back to the earlier layout: one table keyed by request only
        db.execute(
            "CREATE TABLE responses AS SELECT key, provider, model, request, response, tokens_in, tokens_out, "
            "created_at FROM answers"
        )
        db.execute("DROP TABLE answers")
    old = LLMClient(config(server, path, "replay"))
    assert old.complete(req(1)).text == "echo: question 1"
    assert len(old.store) == 1


def test_a_replay_of_a_stand_in_transcript_stays_stand_in(tmp_path: Path, monkeypatch) -> None:
    """Stand-in answers replayed from a stand-in build's transcript are still placeholders: the replaying build's
    own transcript says so (publish and the card read it), whereas a replay of a model's transcript does not."""
    monkeypatch.delenv("OPENAI_API_KEY")
    section = {"provider": "openai", "model": "m"}
    request = LLMRequest(
        messages=(("user", "<initial_text>\nx\n</initial_text>"),),
        prompt_hash="b" * 64,
        stage="disambiguate",
        context="",
    )
    stand_in = LLMClient(LLMConfig.from_mapping(section | {"mode": "stand-in", "store_path": tmp_path / "a.sqlite"}))
    stand_in.complete(request)
    first = tmp_path / "stand_in.jsonl"
    stand_in.export([request_key(stand_in.config, request)], first, "a stand-in build")
    replay_config = LLMConfig.from_mapping(section | {"mode": "replay", "store_path": tmp_path / "b.sqlite"}, env={})
    replayed = open_llm(replay_config, first)
    assert replayed.complete(request).text == stand_in.complete(request).text
    second = tmp_path / "replayed.jsonl"
    replayed.export([request_key(replay_config, request)], second, "a replay")
    assert replayed.stand_in and transcript_header(second)["stand_in"] is True
    model = tmp_path / "model.jsonl"
    model.write_text(first.read_text(encoding="utf-8").replace('"stand_in":true,', ""), encoding="utf-8")
    assert not open_llm(replay_config, model).stand_in


def _record(key: str, text: str) -> StoredResponse:
    return StoredResponse(key, "openai", "fake-model", {"k": key}, text, 1, 2, "2025-01-01T00:00:00+00:00")


def test_get_many_takes_each_key_from_its_first_source_as_get_does(tmp_path: Path) -> None:
    """Over SQLite's old limit of 999 bound values: every key the store holds comes back, from the first source of
    ``sources`` that has it; a key held only by a source not asked for, or by none, is absent."""
    store = ResponseStore(tmp_path / "store.sqlite")
    keys = [f"{i:064x}" for i in range(1500)]
    for i, key in enumerate(keys):
        if i % 3 != 2:
            store.put(_record(key, f"model {i}"), RECORDED)
        if i % 3 != 0:
            store.put(_record(key, f"transcript {i}"), "t" * 64)
    store.put(_record("f" * 64, "stand-in only"), STAND_IN)
    sources = ("t" * 64, RECORDED)
    found = store.get_many([*keys, "f" * 64, "0" * 63], sources)
    assert found == {key: store.get(key, sources) for key in keys}
    assert found[keys[0]].text == "model 0" and found[keys[1]].text == "transcript 1"
    assert store.get_many(keys[:3], (RECORDED,))[keys[1]].text == "model 1"


def test_a_batch_is_looked_up_in_one_query(server: FakeLLMServer, tmp_path: Path) -> None:
    """A replayed batch of 50 requests reads the store once, not once per request."""
    LLMClient(config(server, tmp_path / "store.sqlite", "live")).complete_many([req(i) for i in range(50)])
    client = LLMClient(config(server, tmp_path / "store.sqlite", "replay"))
    statements: list[str] = []
    client.store._db.set_trace_callback(statements.append)
    answers = client.complete_many([req(i) for i in range(50)])
    assert [a.text for a in answers] == [f"echo: question {i}" for i in range(50)]
    assert len([s for s in statements if s.lstrip().upper().startswith("SELECT")]) == 1


def test_a_transcript_record_is_made_canonical_once(
    transcripts: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing a transcript makes each request's canonical JSON once: the text its key is checked against is the
    text stored (a paper-scale transcript holds 41,000 requests); the stored requests read back as written."""
    import pbbq.tasks.llm.store as store_module

    made: list[object] = []
    canonical = store_module.canonical_json
    monkeypatch.setattr(store_module, "canonical_json", lambda value: made.append(value) or canonical(value))
    first, _ = transcripts
    records = [json.loads(line) for line in first.read_text(encoding="utf-8").splitlines()[1:]]
    with ResponseStore(tmp_path / "fresh.sqlite") as fresh:
        assert fresh.import_jsonl(first) == 3
        assert made == [record["request"] for record in records]
        stored = fresh.get_many([record["key"] for record in records], (transcript_source(first),))
    assert {key: answer.request for key, answer in stored.items()} == {r["key"]: r["request"] for r in records}
