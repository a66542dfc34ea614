"""``pbbq evaluate`` as a user meets it: bad arguments as one ``pbbq: error:`` line before anything starts, a key in
a model spec kept nowhere, a quick ``--limit`` run that computes every table and ε_c, and the scores printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.cli import main
from tests.bbq_records import write_run
from tests.fakes.completions_server import FakeCompletionsServer

FAKE_KEY = "sk-test-SECRET-evaluate"  # fake, shaped unlike a real key (yet sk-, as redaction looks for)
NAMED = ("Ethnicity", "Socio-economic Status")


pytestmark = pytest.mark.usefixtures("offline", "llm_api_keys")


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build's run folder whose ``fa-names`` covers only some categories, as the sample's does (Age, first in
    ``fa``, has no name variant): the first rows of ``fa`` and of ``fa-names`` share no example."""
    return write_run(tmp_path_factory.mktemp("builds") / "build-1", named=NAMED)


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pbbq: error: "), err
    return lines[0]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("hf:", "--model hf=hf:: the hf backend needs pretrained=FOLDER"),
        ("tiny=hf:pretrained=/no/such/model,dtype=float32", "pretrained=/no/such/model: no such folder"),
        ("hf:pretrained=./relative/missing", "pretrained=./relative/missing: no such folder"),
        (f"gpt=openai-chat-completions;model=gpt-4o,api_key={FAKE_KEY}", "expected [NAME=]BACKEND:ARGS"),
    ],
)
def test_a_bad_model_is_one_line_before_anything_starts(
    model: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", "--release", "r", "--model", model, "--outputs", str(tmp_path / "out")]) == 1
    line = one_error_line(capsys)
    assert expected in line and FAKE_KEY not in line
    assert not (tmp_path / "out").exists()  # no run was started


def test_outputs_at_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    for outputs in (tmp_path / "file", tmp_path / "file" / "below"):
        assert (
            main(
                ["evaluate", "--release", "r", "--model", "openai-chat-completions:model=m", "--outputs", str(outputs)]
            )
            == 1
        )
        assert (
            one_error_line(capsys) == f"pbbq: error: --outputs {outputs}: {tmp_path / 'file'} is a file, not a folder"
        )


def test_evaluate_without_its_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # what find_spec and import see when it is not installed
    assert main(["evaluate", "--release", "r", "--model", "local-completions:model=m", "--outputs", str(tmp_path)]) == 1
    line = one_error_line(capsys)
    assert "needs datasets, not installed" in line and "make evaluate" in line


def test_a_limited_run_draws_every_stratum_computes_epsilon_and_prints_the_scores(
    prefect_server: None, run_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeCompletionsServer() as server:
        model = f"vllm=local-completions:model=fake,base_url={server.completions_url},tokenizer_backend=remote"
        command = ["evaluate", "--release", str(run_folder), "--model", model, "--outputs", str(tmp_path)]
        assert main([*command, "--limit", "24", "--bootstrap", "200", "--eval-id", "quick"]) == 0
    run = tmp_path / "quick"
    samples = pd.read_parquet(run / "01_samples" / "samples.parquet")
    assert samples.groupby("config").size().to_dict() == {"en": 24, "fa": 24, "fa-names": 24}
    strata = samples.groupby("config")[["category", "context_condition", "question_polarity"]].nunique()
    assert strata.to_dict("index") == {
        "en": {"category": 3, "context_condition": 2, "question_polarity": 2},
        "fa": {"category": 3, "context_condition": 2, "question_polarity": 2},
        "fa-names": {"category": 2, "context_condition": 2, "question_polarity": 2},
    }
    report = json.loads((run / "01_samples" / "report.json").read_text(encoding="utf-8"))
    assert report["selection"]["fa-names"] == {"rows": 24, "of": 72, "strata": 8, "strata_covered": 8, "paired": 24}

    epsilon = pd.read_parquet(run / "02_metrics" / "error_retention.parquet")
    assert sorted(epsilon["context_condition"]) == ["ambig", "disambig"] and (epsilon["n_seeds"] == 3).all()
    assert (epsilon["n_pairs"] == 12).all()
    table4 = pd.read_parquet(run / "02_metrics" / "table4.parquet")
    assert set(table4[table4["config"] == "fa"]["category"]) == {"Age", "Ethnicity", "Socio-economic Status", "Average"}
    table3 = pd.read_parquet(run / "02_metrics" / "table3.parquet")
    # every template drawn, so the bootstrap has templates to resample (the first 24 rows hold two, of one category)
    assert table3.set_index("config")["n_templates"].to_dict() == {"en": 4, "fa": 4, "fa-names": 2}

    out = capsys.readouterr().out
    first, _, scores = out.partition("\n")
    assert first == str(run)
    for row in table3.to_dict("records"):  # every model and config with its accuracy and its interval
        cell = f"{row['acc_amb']:.4f} [{row['acc_amb_low']:.4f}, {row['acc_amb_high']:.4f}]"
        assert f"| {row['model']} | {row['config']} | {row['n_examples']} | {cell} |" in scores
    assert (
        "ε_c" in scores
        and "| vllm | fa-names against fa | ambig |" in scores
        and "| vllm | fa-names against fa | disambig |" in scores
    )


def test_a_key_in_a_model_spec_is_kept_nowhere(prefect_server: None, run_folder: Path, tmp_path: Path) -> None:
    """``pbbq evaluate`` in a process of its own (its stderr as a terminal gets it), on the test server."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    outputs = tmp_path / "outputs"
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    with FakeCompletionsServer() as server:
        model = f"gpt=openai-chat-completions:model=gpt-4o-mini,base_url={server.chat_url},api_key={FAKE_KEY}"
        command = [sys.executable, "-m", "pbbq.flows.cli", "evaluate", "--release", str(run_folder), "--model", model]
        command += ["--config", "fa", "--limit", "6", "--outputs", str(outputs), "--bootstrap", "20", "--eval-id", "k"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        assert server.requests["/v1/chat/completions"] == 6  # it ran, with the key from the environment
    assert FAKE_KEY not in done.stdout and FAKE_KEY not in done.stderr
    assert "api_key dropped from its spec" in done.stderr and "OPENAI_API_KEY" in done.stderr
    for path in outputs.rglob("*"):  # the run, its manifest, the unit and request caches
        assert not path.is_file() or FAKE_KEY.encode() not in path.read_bytes(), path
    redacted = model.replace(FAKE_KEY, "[REDACTED]")
    manifest = json.loads((outputs / "k" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["parameters"]["models"] == [redacted]
    with get_client(sync_client=True) as client:
        runs = [run for run in client.read_flow_runs() if run.parameters.get("eval_id") == "k"]
    assert len(runs) == 1 and FAKE_KEY not in json.dumps(runs[0].parameters)
    assert runs[0].parameters["models"] == [redacted]
