"""The sample build with its LLM stages live against a local fake OpenAI server.

The fake answers as the scripted stand-in model that recorded the sample's transcript, so a live build, a
replay of what it recorded, a build through 30 % injected faults, the bundled replay build and a build through
the Batch API with an expired batch must all give the same dataset, and the API key must appear
nowhere.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from pbbq.flows.build_pbbq import build_pbbq
from pbbq.flows.config import load_config
from pbbq.tasks.core.artifacts import sha256_file
from pbbq.tasks.core.inputs import load_inputs
from pbbq.tasks.llm import read_transcript
from tests.fakes.llm_servers import FakeLLMServer
from tests.fakes.stand_in_model import StandInModel

KEY = "test.SECRET.key.9f8e7d6c5b4a"  # fake, shaped unlike a real key
DATASET = ("04_disambiguate/templates", "05_instantiate/examples", "06_names/examples", "07_translate/examples")


@pytest.fixture(scope="module")
def stand_in() -> StandInModel:
    build = load_config()
    tables = load_inputs(build.inputs)
    return StandInModel(tables["templates"], tables["disambiguation_overrides"])


@pytest.fixture
def live_config(
    sample_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, FakeLLMServer]]:
    """The sample's configuration without its transcript, its LLM pointed at a fake server with a key."""
    config = sample_copy / "configs" / "sample.toml"
    text = config.read_text(encoding="utf-8")
    text = text.replace('transcript = "../prompts/transcripts/sample.jsonl.gz"\n', "")
    text = text.replace(
        "[llm]\n", f'[llm]\nstore_path = "{tmp_path / "store.sqlite"}"\nmax_retries = 10\ntimeout = 10\n'
    )
    config.write_text(text, encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeLLMServer(expected_key=KEY) as server:
        monkeypatch.setenv("PBBQ_LLM_BASE_URL", server.openai_base_url)
        yield config, server


def _hashes(run: Path) -> dict[str, str]:
    return {name: sha256_file(run / f"{name}.parquet") for name in DATASET}


def _answers(transcript: Path | None) -> dict[str, tuple[str, str]]:
    """A transcript's answers: request key → (canonical request, response)."""
    assert transcript is not None
    records = [json.loads(line) for line in read_transcript(transcript).splitlines()[1:]]
    return {r["key"]: (json.dumps(r["request"], sort_keys=True), r["response"]) for r in records}


def _report(run: Path, folder: str) -> dict:
    return json.loads((run / folder / "report.json").read_text(encoding="utf-8"))


def test_live_then_replay_then_faults_give_the_bundled_dataset(
    prefect_server: None,
    stand_in: StandInModel,
    live_config: tuple[Path, FakeLLMServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    config, server = live_config
    server.answer = stand_in

    monkeypatch.setenv("PBBQ_LLM_MODE", "live")
    live = Path(build_pbbq(config=str(config), run_id="live", outputs=str(tmp_path / "a")))
    sent = server.requests_total
    header = json.loads((live / "transcript.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert sent == header["records"] > 4000  # each distinct request sent once, and each one in the transcript
    usage = _report(live, "07_translate")["llm"]
    assert usage["requests_sent"] > 0 and usage["tokens_in"] > 0 and "cost_usd" in usage
    assert _report(live, "04_disambiguate")["llm"]["requests_sent"] >= 57  # one per template, and the retries

    monkeypatch.setenv("PBBQ_LLM_MODE", "replay")
    replay = Path(build_pbbq(config=str(config), run_id="replay", outputs=str(tmp_path / "b")))
    assert server.requests_total == sent  # replay sends nothing
    assert _report(replay, "07_translate")["llm"]["cache_hits"] > 0
    assert _hashes(replay) == _hashes(live)

    # the committed transcript is the stand-in model's, up to date: it answers every request of the live build as
    # the live server did, so the bundled build (replaying it) is the replay above
    bundled = _answers(load_config().transcript)
    assert {key: bundled.get(key) for key in _answers(live / "transcript.jsonl")} == _answers(live / "transcript.jsonl")

    monkeypatch.setenv("PBBQ_LLM_MODE", "live")
    text = config.read_text(encoding="utf-8").replace("store.sqlite", "faulty-store.sqlite")
    config.write_text(text, encoding="utf-8")
    server.fail_rate(("429", "500", "malformed"), 0.3, seed=7)
    faulty = Path(build_pbbq(config=str(config), run_id="faulty", outputs=str(tmp_path / "d")))
    assert sum(server.faults_served.values()) > 0.25 * (server.requests_total - sent)
    assert set(server.faults_served) == {"429", "500", "malformed"}
    assert _hashes(faulty) == _hashes(live)

    # batch mode: the same requests through the Batch API, one batch expiring (its unanswered half
    # retried live), land under the same keys and give the same dataset
    server.reset()
    text = config.read_text(encoding="utf-8").replace("faulty-store.sqlite", "batch-store.sqlite")
    text = text.replace("[llm]\n", "[llm]\nbatch_poll_interval = 0.01\nbatch_poll_max_interval = 0.02\n")
    config.write_text(text, encoding="utf-8")
    monkeypatch.setenv("PBBQ_LLM_MODE", "batch")
    server.batch_plan("expired")
    batched = Path(build_pbbq(config=str(config), run_id="batched", outputs=str(tmp_path / "e")))
    live_calls = server.requests_by_path["/v1/chat/completions"]
    expired = next(iter(server.batches.values()))
    assert expired.fault == "expired" and len(server.batches) > 1
    assert 0 < live_calls == expired.size // 2  # only the expired batch's unanswered items went live
    assert len(server.batch_items) == sent  # every request went into a batch once
    assert _hashes(batched) == _hashes(live)

    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sqlite" for p in written)
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in caplog.text
