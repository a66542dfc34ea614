"""Every path as a new user meets it (issue 36): each optional input left out builds, what a configuration lacks is
said at once, ``targets = []`` builds the source language only, and the tools that read a run (``pbbq trace``,
``audit.html``, the card, ``pbbq evaluate``) speak the path the run is on: an adaptation run says nothing of Persian,
crawled posts or ``fa``. "Changes" compares a run with the previous run of its configuration (its config hash).

One adaptation build without its optional input serves every test that reads an adaptation run; the builds after it
go into the same outputs folder, so the stages they share come from the cache."""

from __future__ import annotations

import csv
import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.audit.audit import FIRST_ROWS, trace
from pbbq.flows.audit.report import config_colours, write_audit_html
from pbbq.flows.audit.runs import config_hash, manifest, previous_completed
from pbbq.flows.cli import SAMPLES, main
from pbbq.flows.config import ConfigError, input_files, load_config
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.evaluation.metrics import error_retention
from tests.fakes.completions_server import FakeCompletionsServer
from tests.test_evaluate_metrics import frame, hand_table

PBBQ_WORDS = re.compile(r"\bfa\b|Persian|persian|crawled posts")
"""What an adaptation run's audit, card and evaluation must not say."""
OPTIONAL = [
    (path, source.config_key)
    for path, config in SAMPLES.items()
    for source in input_files(load_config(config).pipeline)
    if source.optional
]
"""Each bundled path's optional inputs (every one a configuration may leave out)."""
ASKS_THE_MODEL = {("pbbq", "disambiguation_overrides")}
"""Inputs whose absence asks the model for what they held (PBBQ's human-written continuations): their builds answer
with the stand-in (``--stand-in``), as a user trying the change offline would; the others replay the transcript."""


def _sample_config(folder: Path, path: str, leave_out: str = "", **replace: str) -> Path:
    """The bundled sample of ``path`` as a configuration file in ``folder`` (its paths made absolute), without the
    ``[inputs]`` line of ``leave_out``, each ``replace`` key's line (``targets = …``) replaced."""
    lines = []
    for line in SAMPLES[path].read_text(encoding="utf-8").splitlines():
        key = line.split("=", 1)[0].strip()
        if leave_out and key == leave_out:
            continue
        lines.append(f"{key} = {replace[key]}" if key in replace else line.replace('"../', f'"{REPO_ROOT}/'))
    config = folder / f"{path}-{leave_out or 'all'}-{len(replace)}.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config


def _build(config: Path, outputs: Path, run_id: str, *options: str) -> Path:
    assert main(["build", "--config", str(config), "--outputs", str(outputs), "--run-id", run_id, *options]) == 0
    return outputs / run_id


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("every-path")


@pytest.fixture(scope="module")
def builds_without(prefect_server: None, outputs: Path) -> dict[tuple[str, str], Path]:
    """Per (path, optional input): the sample of that path built without it (built once, when a test asks)."""
    return {}


def _without(builds: dict[tuple[str, str], Path], outputs: Path, path: str, key: str) -> Path:
    if (path, key) not in builds:
        options = ["--stand-in"] if (path, key) in ASKS_THE_MODEL else []
        builds[path, key] = _build(_sample_config(outputs, path, key), outputs, f"{path}-without-{key}", *options)
    return builds[path, key]


@pytest.fixture(scope="module")
def adapt_run(builds_without: dict[tuple[str, str], Path], outputs: Path) -> Path:
    """The adaptation sample built without its optional input: the adaptation run the tools read below."""
    path, key = next((path, key) for path, key in OPTIONAL if path == "adapt")
    return _without(builds_without, outputs, path, key)


# --- configuration -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "key"), OPTIONAL, ids=[f"{path}-{key}" for path, key in OPTIONAL])
def test_each_optional_input_left_out_builds(
    builds_without: dict[tuple[str, str], Path], outputs: Path, path: str, key: str
) -> None:
    run = _without(builds_without, outputs, path, key)
    info = manifest(run)
    assert info["status"] == "completed" and key not in info["inputs"]
    assert any((run / "10_publish" / "hub" / "data").iterdir())


def test_what_a_configuration_lacks_is_one_error_with_every_problem(tmp_path: Path) -> None:
    config = tmp_path / "bare.toml"
    config.write_text('[input]\npath = "adapt"\n[inputs]\n', encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_config(config)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{config}: [inputs] is missing adapt_sheet, ratings, ")
    assert "the [llm] section is missing" in message


def test_no_targets_builds_the_source_language_only(adapt_run: Path, outputs: Path) -> None:
    """``targets = []`` on either path: the source's configs alone; the inputs only translation reads may stay."""
    english = _sample_config(outputs, "adapt", targets="[]")
    build = load_config(english)
    assert list(build.pipeline.configs) == ["en", "en-names"]
    assert "bbq_glossary" in english.read_text(encoding="utf-8") and "bbq_glossary" not in build.input_paths()
    run = _build(english, outputs, "english-only")
    assert "bbq_glossary" not in manifest(run)["inputs"]  # named, not read
    assert sorted(p.name for p in (run / "10_publish" / "hub" / "data").iterdir()) == ["en", "en-names"]
    assert not any(folder.name.startswith("07_translate") for folder in run.iterdir())


def test_no_targets_on_pbbqs_path_builds_fa_and_fa_names(tmp_path: Path) -> None:
    config = _sample_config(tmp_path, "pbbq")
    text = config.read_text(encoding="utf-8").replace("[translate]\n", "[translate]\ntargets = []\n", 1)
    config.write_text(text, encoding="utf-8")  # the sample's own [translate] keys stay: they configure no stage
    build = load_config(config)
    assert list(build.pipeline.configs) == ["fa", "fa-names"]
    assert "unknown_phrases" in build.inputs  # PBBQ's instantiate reads its 'unknown' options from it


# --- the tools on an adaptation run --------------------------------------------------------------------------------


def _sheet() -> dict[str, tuple[int, dict[str, str]]]:
    path = REPO_ROOT / "annotations" / "bbq" / "adapt-sheet-pakistan-sample.csv"
    with path.open(encoding="utf-8") as handle:
        return {row["template_id"]: (number, row) for number, row in enumerate(csv.DictReader(handle), 2)}


def test_trace_follows_an_adaptation_example_to_its_bbq_template_class_sheet_row_and_kappa(adapt_run: Path) -> None:
    sheet = _sheet()
    urdu = pd.read_parquet(adapt_run / "07_translate" / "examples.parquet").iloc[0]
    traced = trace(adapt_run, urdu.example_id)
    number, row = sheet[urdu.template_id]
    assert traced["class"] == row["class"] and traced["template"]["template_id"] == urdu.template_id
    assert traced["sheet"] == {"file": "annotations/bbq/adapt-sheet-pakistan-sample.csv", "file_is": "unchanged",
                               "row": number}  # fmt: skip
    assert traced["gate"]["kappa"] >= 0.2 and traced["gate"]["kept"]
    assert traced["original"]["lang"] == "en" and traced["original"]["example_id"] == urdu.source_example_id
    assert traced["llm"] and "stereotype" not in traced and "crawl" not in traced
    if row["class"] != "NA":
        assert traced["bbq_template"]["ambiguous"] == row["bbq_ambiguous"]
    english = pd.read_parquet(adapt_run / "05_instantiate" / "examples.parquet")
    added = english[english["template_id"].map(lambda t: sheet[t][1]["class"] == "NA")].iloc[0]
    assert trace(adapt_run, added.example_id)["bbq_template"] is None  # a newly added row adapts no BBQ template
    assert main(["trace", added.example_id, "--run", str(adapt_run)]) == 0


def test_the_audit_speaks_the_adaptation_path(adapt_run: Path) -> None:
    page = write_audit_html(adapt_run).read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    assert not PBBQ_WORDS.search(text), PBBQ_WORDS.search(text)
    assert "BBQ adaptation run" in text and "Funnel: from the reviewed BBQ templates to published rows" in text
    table1 = page[page.index("<h3>Table 1") :]
    assert "Race_ethnicity" in table1[: table1.index("</svg>")]  # its bars are drawn, not only listed
    removed = [row for _, row in _sheet().values() if row["class"] == "SR"]
    shown = [row["template_id"] for row in removed if html.escape(row["reason"][:60]) in page]
    assert len(shown) == min(len(removed), FIRST_ROWS)  # the first rows of SR, each with the experts' written reason


def test_one_colour_per_config() -> None:
    adapted = config_colours(["en", "en-names", "ur", "tr"])
    assert len(set(adapted.values())) == 4
    assert config_colours(["fa", "fa-names", "en"]) == {"fa": "#2a6f97", "fa-names": "#e09f3e", "en": "#6a994e"}
    many = config_colours([f"c{k}" for k in range(30)])
    assert len(set(many.values())) == 30


def test_the_card_names_the_real_source_and_the_languages_present(adapt_run: Path) -> None:
    card = (adapt_run / "10_publish" / "hub" / "README.md").read_text(encoding="utf-8")
    assert not PBBQ_WORDS.search(card), PBBQ_WORDS.search(card)
    header = card.split("\n---\n", 1)[0]
    assert "- english" in header and re.search(r"language:\n- en\n- ur\n", header)
    assert "| `ur` | Urdu | Instance-level translation of `en` (who translated: step 4). |" in card
    assert "| `lang` | `string` | `en` (English) or `ur` (Urdu). |" in card


def test_changes_compare_with_the_previous_run_of_the_same_configuration(adapt_run: Path, outputs: Path) -> None:
    """A run of another configuration (no targets) finished between two runs of one: each is compared with its own."""
    english = outputs / "english-only"
    if not english.is_dir():
        _build(_sample_config(outputs, "adapt", targets="[]"), outputs, "english-only")
    again = _build(_sample_config(outputs, "adapt", "bbq_proper_names"), outputs, "adapt-again")
    assert config_hash(manifest(again)) == config_hash(manifest(adapt_run)) != config_hash(manifest(english))
    assert previous_completed(again) == adapt_run
    assert previous_completed(english) is None
    page = write_audit_html(english).read_text(encoding="utf-8")
    assert "No earlier completed run of this configuration (config hash" in page
    page = write_audit_html(again).read_text(encoding="utf-8")
    assert f"Changes from run {adapt_run.name} to run {again.name}" in page
    assert not PBBQ_WORDS.search(html.unescape(re.sub(r"<[^>]+>", " ", page)))


# --- evaluation ----------------------------------------------------------------------------------------------------


def test_epsilon_pairs_any_config_with_its_names_variant() -> None:
    rows = []
    for config in ("en", "fa"):
        explicit = [
            dict(r, config=config, example_id=f"{config}{i}") for i, r in enumerate(hand_table().to_dict("records"))
        ]
        rows += explicit + [
            dict(r, config=f"{config}-names", variant="names-1", example_id=f"{r['example_id']}-n",
                 source_example_id=r["example_id"])
            for r in explicit
        ]  # fmt: skip
    table = error_retention(frame(rows))
    assert sorted(set(table["config"])) == ["en-names", "fa-names"]
    assert (table["epsilon"].dropna() == 1.0).all()  # the names rows answer as their sources do


def test_evaluate_on_an_adaptation_release_says_nothing_of_fa(
    adapt_run: Path, outputs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    capsys.readouterr()
    with FakeCompletionsServer() as server:
        model = f"vllm=local-completions:model=fake,base_url={server.completions_url},tokenizer_backend=remote"
        command = ["evaluate", "--release", str(adapt_run), "--model", model, "--outputs", str(outputs)]
        assert main([*command, "--limit", "16", "--bootstrap", "50", "--eval-id", "adapt-eval"]) == 0
    said = capsys.readouterr().out
    run = outputs / "adapt-eval"
    epsilon = pd.read_parquet(run / "02_metrics" / "error_retention.parquet")
    assert set(epsilon["config"]) == {"en-names"} and len(epsilon)
    written = said + (run / "02_metrics" / "tables.md").read_text(encoding="utf-8")
    written += json.dumps(json.loads((run / "02_metrics" / "report.json").read_text(encoding="utf-8"))["warnings"])
    assert not PBBQ_WORDS.search(written), PBBQ_WORDS.search(written)
