"""The sample build with its LLM stages live against a local fake OpenAI server (issue 3: done-when).

The fake answers as the scripted stand-in model that recorded the sample's transcript, so a live build, a
replay of what it recorded, a build through 30 % injected faults and the bundled replay build must all give
the same dataset, and the API key must appear nowhere.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from pbbq.flows.build_pbbq import build_pbbq
from pbbq.flows.config import load_config
from pbbq.tasks.artifacts import sha256_file
from pbbq.tasks.inputs import load_inputs

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

    monkeypatch.delenv("PBBQ_LLM_MODE")
    monkeypatch.delenv("PBBQ_LLM_BASE_URL")
    bundled = Path(build_pbbq(run_id="bundled", outputs=str(tmp_path / "c")))
    assert _hashes(bundled) == _hashes(live)  # the committed transcript is the stand-in model's, up to date

    monkeypatch.setenv("PBBQ_LLM_MODE", "live")
    monkeypatch.setenv("PBBQ_LLM_BASE_URL", server.openai_base_url)
    text = config.read_text(encoding="utf-8").replace("store.sqlite", "faulty-store.sqlite")
    config.write_text(text, encoding="utf-8")
    server.fail_rate(("429", "500", "malformed"), 0.3, seed=7)
    faulty = Path(build_pbbq(config=str(config), run_id="faulty", outputs=str(tmp_path / "d")))
    assert sum(server.faults_served.values()) > 0.25 * (server.requests_total - sent)
    assert set(server.faults_served) == {"429", "500", "malformed"}
    assert _hashes(faulty) == _hashes(live)

    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sqlite" for p in written)
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in caplog.text
