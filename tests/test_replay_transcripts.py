"""A build's LLM answers come only from the transcript it names (docs/architecture.md §6), whatever other
transcripts earlier builds of the same outputs folder imported; a damaged transcript stops the build before stage
01; a response store inside a run folder is refused."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from pbbq.flows.build_pbbq import build_pbbq
from pbbq.flows.cli import main
from pbbq.flows.config import ConfigError, load_config
from pbbq.tasks.core.artifacts import REPO_ROOT

SAMPLE_TRANSCRIPT = REPO_ROOT / "prompts" / "transcripts" / "sample.jsonl.gz"
DATASET = ("07_translate/examples.parquet", "10_publish/hub/data/en/test-00000-of-00001.parquet")


def _with_one_back_translation_changed(source: Path, target: Path) -> None:
    """The transcript with the first back-translation that reads back its Persian answered by an unrelated
    sentence instead (its chrF falls under the threshold, so its segment is flagged)."""
    lines = gzip.decompress(source.read_bytes()).decode("utf-8").splitlines()
    for number, line in enumerate(lines[1:], 1):
        record = json.loads(line)
        if record["request"]["messages"][0][1].startswith("<english_text>") and len(record["response"]) > 40:
            record["response"] = "این جمله هیچ ربطی به متن ندارد."
            lines[number] = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
            break
    target.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0))


def _config(sample_copy: Path, name: str, transcript: Path, *changes: tuple[str, str]) -> Path:
    """A copy of the sample's configuration that names ``transcript``, with each (old, new) text replaced."""
    config = sample_copy / "configs" / name
    text = (sample_copy / "configs" / "sample.toml").read_text(encoding="utf-8")
    named = ('transcript = "../prompts/transcripts/sample.jsonl.gz"', f'transcript = "{transcript}"')
    for old, new in (named, *changes):
        assert old in text
        text = text.replace(old, new)
    config.write_text(text, encoding="utf-8")
    return config


@pytest.mark.usefixtures("prefect_server")
def test_a_rebuild_replays_its_own_transcript_after_another(sample_copy: Path, tmp_path: Path) -> None:
    """In one outputs folder: the sample (transcript A), a copy whose transcript B2 changes one back-translation
    answer, then A again with translate forced to recompute: the third build's dataset is the first's."""
    outputs = tmp_path / "outputs"
    changed = sample_copy / "b2.jsonl.gz"
    _with_one_back_translation_changed(SAMPLE_TRANSCRIPT, changed)
    first = Path(build_pbbq(run_id="a", outputs=str(outputs)))
    second = Path(build_pbbq(config=str(_config(sample_copy, "b2.toml", changed)), run_id="b2", outputs=str(outputs)))
    again = _config(sample_copy, "a.toml", SAMPLE_TRANSCRIPT, ("min_chrf = 40.0 ", "min_chrf = 40.00001 "))
    third = Path(build_pbbq(config=str(again), run_id="a-again", outputs=str(outputs)))
    stages = json.loads((third / "manifest.json").read_text(encoding="utf-8"))["stages"]
    assert not next(stage for stage in stages if stage["folder"] == "07_translate")["cached"]
    for name in DATASET:
        assert (first / name).read_bytes() != (second / name).read_bytes(), name
        assert (third / name).read_bytes() == (first / name).read_bytes(), name


@pytest.mark.usefixtures("prefect_server")
def test_a_damaged_transcript_stops_the_build_before_stage_01(
    sample_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = sample_copy / "damaged.jsonl"
    lines = gzip.decompress(SAMPLE_TRANSCRIPT.read_bytes()).decode("utf-8").splitlines()
    lines[3] = lines[3][:-1]  # line 4 loses its closing brace
    damaged.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = _config(sample_copy, "damaged.toml", damaged)
    outputs = tmp_path / "outputs"
    assert main(["build", "--config", str(config), "--outputs", str(outputs), "--run-id", "damaged"]) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"pbbq: error: {damaged}:4: not valid JSON"), error
    assert not (outputs / "damaged" / "01_crawl").exists()


def test_a_store_inside_a_run_folder_is_refused(sample_copy: Path, tmp_path: Path) -> None:
    run = tmp_path / "outputs" / "done"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}", encoding="utf-8")
    store = run / "llm" / "s.sqlite"
    config = _config(sample_copy, "store.toml", SAMPLE_TRANSCRIPT, ("[llm]\n", f'[llm]\nstore_path = "{store}"\n'))
    with pytest.raises(ConfigError, match=rf"\[llm\] store_path = {store} lies inside the run folder {run};"):
        load_config(config)
    shutil.rmtree(run)
    assert load_config(config).llm.store_path == store
