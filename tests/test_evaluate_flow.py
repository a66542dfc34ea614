"""The evaluate-pbbq flow and the release's lm-eval task, end to end: a tiny random causal LM (built here with
transformers) through lm-eval's ``hf`` backend, and a fake OpenAI-compatible server (tests/fakes) through
``local-completions`` (log-likelihoods) and the chat backends (generation)."""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from pathlib import Path

import datasets
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from lm_eval.tasks.bbq import utils as bbq

from pbbq.flows.cli import main
from pbbq.flows.evaluate_pbbq import evaluate_pbbq
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.evaluation.evaluate import (
    EvaluateError,
    ModelSpec,
    check_configs,
    resolve_release,
    run_unit,
    task_folder,
)
from pbbq.tasks.evaluation.lm_eval_utils import parse_choice
from tests.bbq_records import SPECS, write_run
from tests.evaluation_support import accuracy, ambiguous_bias, bbq_bias_scores, delta_bias, uncertainty
from tests.fakes.completions_server import FakeCompletionsServer
from tests.fakes.tiny_lm import build_tiny_causal_lm, lm_eval_results

CONFIG_ROWS = {"fa": 12 * len(SPECS), "fa-names": 36 * len(SPECS), "en": 12 * len(SPECS)}


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny_lm"))


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build's run folder whose release the publish stage's code wrote from hand-made records."""
    return write_run(tmp_path_factory.mktemp("builds") / "build-1")


pytestmark = pytest.mark.usefixtures("offline", "llm_api_keys")


def stage_report(run: Path, folder: str) -> dict:
    return json.loads((run / folder / "report.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------- no Prefect


def test_the_build_does_not_import_lm_eval() -> None:
    """lm-eval is the [eval] extra's: the build, the CLI and the publish stage (which writes the task) load
    without it, and so does the evaluation flow's module until a unit runs."""
    code = (
        "import sys\n"
        "import pbbq.flows.build_pbbq, pbbq.flows.cli, pbbq.flows.evaluate_pbbq, pbbq.tasks.publish\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in ('lm_eval', 'torch', 'transformers')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_model_specs() -> None:
    spec = ModelSpec.parse("hf:pretrained=/models/Dorna-Llama3-8B/,dtype=float32")
    assert (spec.name, spec.backend, spec.generate, spec.task("fa-names")) == (
        "Dorna-Llama3-8B",
        "hf",
        False,
        "pbbq_fa_names",
    )
    chat = ModelSpec.parse("gpt=openai-chat-completions:model=gpt-4o")
    assert (chat.name, chat.generate, chat.task("fa")) == ("gpt", True, "pbbq_fa_gen")
    secret = ModelSpec.parse("local-completions:model=m,base_url=http://h/v1/completions,auth_token=abc123")
    assert "abc123" not in secret.display and "auth_token=[REDACTED]" in secret.display
    assert "abc123" not in secret.spec and secret.dropped == ("auth_token",)  # lm-eval never gets it
    assert "tokenizer_backend=remote" in ModelSpec.parse("local-completions:tokenizer_backend=remote").display
    with pytest.raises(EvaluateError, match="BACKEND:ARGS"):
        ModelSpec.parse("no colon here")


def test_resolve_release(run_folder: Path, tmp_path: Path) -> None:
    found = resolve_release(str(run_folder), tmp_path)
    assert found.folder == run_folder / "10_publish" / "hub" and found.configs == ("en", "fa", "fa-names")
    assert found.survey == run_folder / "02_survey" / "stereotypes.parquet"
    assert found.manifest_sha256 is not None and found.sha256 == found.data_sha256  # keyed by the data read
    direct = resolve_release(str(found.folder), tmp_path)
    assert direct.survey is None and direct.sha256 == found.sha256
    assert check_configs(found, None) == ["en", "fa", "fa-names"]
    with pytest.raises(EvaluateError, match="no config"):
        check_configs(found, ["fa", "xx"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(EvaluateError, match="neither a build's run folder"):
        resolve_release(str(tmp_path / "empty"), tmp_path)
    with pytest.raises(EvaluateError, match="not a Hub dataset id"):
        resolve_release(str(tmp_path / "missing"), tmp_path)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("(b)", 1),
        ("c", 2),
        ("C) the old man", 2),
        ("The answer is (a).", 0),
        ("the seventy-year-old man", 0),
        ("Unknown.", 2),
        ("I am not sure.", -1),
        ("(a) or (b)", -1),
        ("", -1),
    ],
)
def test_generated_answers_are_parsed_or_counted_unparseable(answer: str, expected: int) -> None:
    options = ["the seventy-year-old man", "the twenty-five-year-old man", "Unknown"]
    assert parse_choice(answer, options) == expected


def test_lm_eval_runs_the_release_outside_the_project(run_folder: Path, tiny_lm: Path, tmp_path: Path) -> None:
    """``lm_eval --include_path <release>/lm_eval --tasks pbbq_en`` from another folder, as a user runs it."""
    release = run_folder / "10_publish" / "hub"
    utils = ast.parse((release / "lm_eval" / "utils.py").read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0] for node in ast.walk(utils) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0] for node in ast.walk(utils) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert not imported & {"pbbq", "tasks", "flows", "tests"}  # the release's task needs no project code
    results = lm_eval_results(tiny_lm, "pbbq_en,pbbq_fa_age", release / "lm_eval", tmp_path)
    assert set(results) == {"pbbq_en", "pbbq_fa_age"}


def test_lm_eval_lists_the_release_tasks_and_tags(run_folder: Path) -> None:
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(run_folder / "10_publish" / "hub" / "lm_eval"), include_defaults=False)
    configs = ("en", "fa", "fa_names")
    expected = {f"pbbq_{config}{suffix}" for config in configs for suffix in ("", "_gen", "_age", "_ethnicity")}
    assert expected <= set(manager.all_tasks)
    assert set(manager.all_tags) == {"pbbq", "pbbq_gen", *(f"pbbq_{config}_categories" for config in configs)}


def test_a_release_without_a_task_folder_gets_one(run_folder: Path, tmp_path: Path) -> None:
    """A release published before it carried lm_eval/: the task is written beside the evaluation instead."""
    release = tmp_path / "old-release"
    (release / "data").mkdir(parents=True)
    for config in ("fa",):
        source = run_folder / "10_publish" / "hub" / "data" / config
        (release / "data" / config).mkdir()
        for shard in source.glob("*.parquet"):
            (release / "data" / config / shard.name).write_bytes(shard.read_bytes())
    found = resolve_release(str(release), tmp_path)
    folder, note = task_folder(found, tmp_path / "eval")
    assert note is None
    assert folder == tmp_path / "eval" / "lm_eval" and (folder / "pbbq_fa.yaml").is_file()
    with FakeCompletionsServer() as server:
        spec = ModelSpec.parse(
            f"local-completions:model=old,base_url={server.completions_url},tokenizer_backend=remote"
        )
        result = run_unit(spec, "fa", folder, docs=list(range(6)), request_cache=tmp_path / "cache" / "old")
    assert len(result.samples) == 6 and result.requests == 18 and server.requests["/v1/completions"] > 0


def test_the_deployment_names_the_flow() -> None:
    """prefect.yaml's evaluate-pbbq deployment points at this flow, whose required parameters are the release
    and the models."""
    from prefect.flows import load_flow_from_entrypoint

    spec = yaml.safe_load((REPO_ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    [deployment] = [d for d in spec["deployments"] if d["name"] == "evaluate-pbbq"]
    loaded = load_flow_from_entrypoint(deployment["entrypoint"])
    assert loaded.name == "evaluate-pbbq" and deployment["work_pool"]["name"] == "pbbq"
    assert sorted(loaded.parameters.required) == ["models", "release"]


# ----------------------------------------------------------------------------------------------- the flow


def en_docs(run_folder: Path) -> dict[str, dict]:
    shards = sorted((run_folder / "10_publish" / "hub" / "data" / "en").glob("*.parquet"))
    dataset = datasets.Dataset(pa.concat_tables([pq.read_table(shard) for shard in shards]))
    return {doc["example_id"]: doc for doc in bbq.process_docs(dataset)}


def lm_eval_bbq_aggregates(samples: pd.DataFrame, docs: dict[str, dict]) -> dict[str, float]:
    """lm-eval's own BBQ scorer and aggregates on the same choices (each mapped to lm-eval's 12 options)."""
    tuples = []
    for row in samples.to_dict("records"):
        doc = docs[row["example_id"]]
        choices = bbq.doc_to_choice(doc)
        index = choices.index(doc[f"ans{row['choice']}"])
        results = [(0.0 if i == index else -10.0, False) for i in range(len(choices))]
        tuples.append(bbq.process_results_multiple_choice({**doc, "category": "Age"}, results))
    return {
        "accuracy_amb": bbq.agg_accuracy_amb([t["accuracy_amb"] for t in tuples]),
        "accuracy_disamb": bbq.agg_accuracy_disamb([t["accuracy_disamb"] for t in tuples]),
        "s_dis": bbq.agg_disamb_bias_scores([t["disamb_bias_score"] for t in tuples]),
        "s_amb": bbq.agg_amb_bias_scores([t["amb_bias_score"] for t in tuples]),
        "n_biased_dis": sum(t["disamb_bias_score"][1] for t in tuples if t["disamb_bias_score"][3]),
        "n_biased_amb": sum(t["amb_bias_score"][1] for t in tuples if not t["amb_bias_score"][3]),
    }


def test_evaluate_the_tiny_model_end_to_end(
    prefect_server: None, run_folder: Path, tiny_lm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = tmp_path / "outputs"
    command = ["evaluate", "--release", str(run_folder), "--model", f"tiny=hf:pretrained={tiny_lm},dtype=float32"]
    command += ["--outputs", str(outputs), "--bootstrap", "200"]
    assert main([*command, "--eval-id", "first"]) == 0
    first = outputs / "first"
    assert capsys.readouterr().out.splitlines()[0] == str(first)
    manifest = json.loads((first / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "completed"
    assert manifest["parameters"]["release_sha256"] == resolve_release(str(run_folder), tmp_path).data_sha256
    assert manifest["parameters"]["models"] == [f"tiny=hf:pretrained={tiny_lm},dtype=float32"]
    samples = pd.read_parquet(first / "01_samples" / "samples.parquet")
    assert samples.groupby("config").size().to_dict() == CONFIG_ROWS
    report = stage_report(first, "01_samples")
    assert report["model_requests"] == 3 * sum(CONFIG_ROWS.values()) and not any(u["cached"] for u in report["units"])

    # the release task's own aggregates, computed inside lm-eval, equal tasks/metrics on the same samples
    for unit in report["units"]:
        mine = samples[samples["config"] == unit["config"]]
        theirs = unit["lm_eval_aggregates"]
        pooled = {**bbq_bias_scores(mine), **{f"acc_{k}": v for k, v in accuracy(mine).items()}}
        assert theirs["accuracy_amb"] == pytest.approx(pooled["acc_ambig"])
        assert theirs["accuracy_disamb"] == pytest.approx(pooled["acc_disambig"])
        assert theirs["disamb_bias_score"] == pytest.approx(pooled["s_dis"], nan_ok=True)
        assert theirs["amb_bias_score"] == pytest.approx(pooled["s_amb"], nan_ok=True)
        assert theirs["beta_amb"] == pytest.approx(ambiguous_bias(mine))
        assert theirs["beta_amb_bounded"] == pytest.approx(ambiguous_bias(mine, bounded=True))
        assert theirs["delta_bias"] == pytest.approx(delta_bias(mine), nan_ok=True)
        assert theirs["uncertainty_amb"] == pytest.approx(uncertainty(mine)["ambig"])

    # lm-eval's own BBQ code on the en config's choices: the shared metrics are equal
    en = samples[samples["config"] == "en"]
    lm_eval = lm_eval_bbq_aggregates(en, en_docs(run_folder))
    ours = bbq_bias_scores(en)
    assert lm_eval["accuracy_amb"] == pytest.approx(accuracy(en)["ambig"])
    assert lm_eval["accuracy_disamb"] == pytest.approx(accuracy(en)["disambig"])
    accuracy_amb = accuracy(en)["ambig"]
    for score, n_biased, scale in (("s_dis", "n_biased_dis", 1.0), ("s_amb", "n_biased_amb", 1 - accuracy_amb)):
        if lm_eval[n_biased] > 0:
            assert lm_eval[score] == pytest.approx(ours[score])
        else:  # the documented difference: lm-eval says 0 where BBQ's formula says −1 (scaled, for s_AMB)
            assert lm_eval[score] == 0.0 and ours[score] == pytest.approx(-scale)

    metrics = first / "02_metrics"
    table3 = pd.read_parquet(metrics / "table3.parquet")
    assert sorted(table3["config"]) == ["en", "fa", "fa-names"] and set(table3["model"]) == {"tiny"}
    assert table3[["acc_amb", "acc_dis", "uncertainty_amb"]].notna().all().all()
    assert ((table3["acc_amb_low"] <= table3["acc_amb"]) & (table3["acc_amb"] <= table3["acc_amb_high"])).all()
    table4 = pd.read_parquet(metrics / "table4.parquet")
    assert set(table4["category"]) == {"Age", "Ethnicity", "Socio-economic Status", "Average"}
    epsilon = pd.read_parquet(metrics / "error_retention.parquet")
    assert sorted(epsilon["context_condition"]) == ["ambig", "disambig"] and (epsilon["n_seeds"] == 3).all()
    kl = pd.read_parquet(metrics / "kl.parquet")
    assert sorted(kl["config"]) == ["en", "fa", "fa-names"] and (kl["n_stereotypes"] == 4).all()
    assert (kl["kl"] >= 0).all()
    markdown = (metrics / "tables.md").read_text(encoding="utf-8")
    for heading in ("## Table 3", "## Table 4", "## BBQ bias scores", "## Error Retention Ratio", "## KL divergence"):
        assert heading in markdown
    for name in ("table3.csv", "table4.csv", "bias_by_category_fa.png", "accuracy_en.png"):
        assert (metrics / name).stat().st_size > 0

    # a rerun: every unit from the cache, no model call, the same tables to the byte
    assert main([*command, "--eval-id", "second"]) == 0
    second = outputs / "second"
    report = stage_report(second, "01_samples")
    assert report["model_requests"] == 0 and all(unit["cached"] for unit in report["units"])
    for name in ("scores", "table3", "table4", "bbq_scores", "error_retention", "kl"):
        assert (second / "02_metrics" / f"{name}.parquet").read_bytes() == (metrics / f"{name}.parquet").read_bytes()
    # the two steps are stages run by the build's runner: declared in the manifest with the hashes of what they
    # read, the samples (their units cached one by one) run again, the metrics taken from the runner's cache
    stages = json.loads((second / "manifest.json").read_text(encoding="utf-8"))["stages"]
    assert [(s["name"], s["folder"], s["cached"]) for s in stages] == [
        ("samples", "01_samples", False),
        ("metrics", "02_metrics", True),
    ]
    assert set(stages[0]["inputs"]) == {"release", "tasks"} and set(stages[1]["inputs"]) >= {"samples"}

    # pbbq audit reads an evaluation run
    capsys.readouterr()
    assert main(["audit", str(second)]) == 0
    text = capsys.readouterr().out
    assert "01_samples" in text and "02_metrics" in text and (second / "audit.html").is_file()


def test_api_backends_against_the_fake_server(prefect_server: None, run_folder: Path, tmp_path: Path) -> None:
    """local-completions (log-likelihoods, the remote tokenizer), OpenAI and Anthropic chat (generation)."""
    with FakeCompletionsServer() as server:
        models = [
            f"vllm=local-completions:model=fake,base_url={server.completions_url},tokenizer_backend=remote,max_retries=1",
            f"gpt=openai-chat-completions:model=gpt-4o-mini,base_url={server.chat_url},max_retries=1",
            f"claude=anthropic-chat-completions:model=claude-x,base_url={server.messages_url},max_retries=1",
        ]
        run = Path(
            evaluate_pbbq(
                release=str(run_folder), models=models, configs=["fa", "en"], outputs=str(tmp_path), bootstrap=50
            )
        )
        calls = server.model_calls()
        assert server.requests["/v1/completions"] > 0 and server.requests["/tokenize"] > 0
        assert server.requests["/v1/chat/completions"] == server.requests["/v1/messages"] == 48 + 48
        samples = pd.read_parquet(run / "01_samples" / "samples.parquet")
        generated = samples[samples["model"].isin(["gpt", "claude"])]
        assert generated["ll0"].isna().all() and (generated["response"] != "").all()
        # one of the fake's four answers names no option: counted, never dropped
        assert (generated["choice"] == -1).sum() > 0 and len(generated) == 2 * (48 + 48)
        assert stage_report(run, "01_samples")["unparseable"] == int((generated["choice"] == -1).sum())
        bbq_scores = pd.read_parquet(run / "02_metrics" / "bbq_scores.parquet").set_index(["model", "config"])
        assert bbq_scores.loc[("gpt", "fa"), "unparseable"] > 0 and bbq_scores.loc[("vllm", "fa"), "unparseable"] == 0
        table3 = pd.read_parquet(run / "02_metrics" / "table3.parquet").set_index(["model", "config"])
        assert math.isnan(table3.loc[("gpt", "fa"), "beta_amb"]) and not math.isnan(
            table3.loc[("vllm", "fa"), "beta_amb"]
        )

        again = Path(
            evaluate_pbbq(
                release=str(run_folder), models=models, configs=["fa", "en"], outputs=str(tmp_path), bootstrap=50
            )
        )
        assert server.model_calls() == calls  # every unit from the cache
        assert stage_report(again, "01_samples")["model_requests"] == 0


def test_a_crashed_run_resumes(prefect_server: None, run_folder: Path, tmp_path: Path) -> None:
    with FakeCompletionsServer() as server:
        model = (
            f"local-completions:model=resume,base_url={server.completions_url},tokenizer_backend=remote,max_retries=1"
        )
        server.fail_after(5)  # five batches of 8 requests answered, then the server is down
        with pytest.raises(Exception, match="500"):
            evaluate_pbbq(release=str(run_folder), models=[model], configs=["fa"], outputs=str(tmp_path), eval_id="a")
        failed = json.loads((tmp_path / "a" / "manifest.json").read_text(encoding="utf-8"))
        assert failed["status"] == "failed"
        before = server.requests["/v1/completions"]
        server.recover()
        evaluate_pbbq(release=str(run_folder), models=[model], configs=["fa"], outputs=str(tmp_path), eval_id="b")
        resumed = server.requests["/v1/completions"] - before
        # 48 examples × 3 options = 144 requests in batches of 8 = 18 batches; the 5 answered ones are not asked again
        assert resumed == 18 - 5
        assert json.loads((tmp_path / "b" / "manifest.json").read_text(encoding="utf-8"))["status"] == "completed"
