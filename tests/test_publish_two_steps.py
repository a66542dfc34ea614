"""Publish in two steps: the release's data part as a cached stage (``10_data``) and the per-run publish that
places its files by reference, with the same release as publishing in one call."""

from pathlib import Path

import pandas as pd

from pbbq.flows.pipeline import ADAPT_PIPELINE, PIPELINE
from pbbq.tasks.publish import RELEASE_DATA, STAGE, PublishParams, publish_release, publish_stage, release_data_stage
from pbbq.tasks.statistics import table1
from tests.release_support import make_configs, run_inputs


def _files(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def test_two_steps_give_the_release_of_one_call_with_its_data_by_reference(tmp_path: Path) -> None:
    examples = pd.concat(make_configs().values(), ignore_index=True)
    inputs = {**run_inputs(tmp_path, table1(examples)), "params": PublishParams(synthetic=True)}
    whole = publish_stage(tmp_path / "one" / "10_publish", examples, configs=("fa", "fa-names", "en"), **inputs)

    data = release_data_stage(examples, ("fa", "fa-names", "en"))
    run = tmp_path / "run"
    for path, content in data.files.items():  # where the runner places a cached stage's files
        (run / RELEASE_DATA.folder / path).parent.mkdir(parents=True, exist_ok=True)
        (run / RELEASE_DATA.folder / path).write_bytes(content)
    split = publish_release(run / "10_publish", data.report, data.tables["release_files"], **inputs)

    assert _files(run / "10_publish" / "hub") == _files(tmp_path / "one" / "10_publish" / "hub")
    pd.testing.assert_frame_equal(split.tables["release_files"], whole.tables["release_files"])
    assert {k: v for k, v in split.report.items() if k not in ("folder", "link")} == {
        k: v for k, v in whole.report.items() if k not in ("folder", "link")
    }
    assert split.report["synthetic"] and data.report["counts"] == {"in": len(examples), "out": len(examples)}
    for path in data.files:  # linked, not written again
        assert (run / "10_publish" / "hub" / path).samefile(run / RELEASE_DATA.folder / path)
    assert set(data.tables["release_files"]["path"]) == set(data.files)


def test_publish_reads_no_examples_and_its_data_stage_is_cached() -> None:
    for pipeline in (PIPELINE, ADAPT_PIPELINE):
        stages = {stage.folder: stage for stage in pipeline}
        assert stages[RELEASE_DATA.folder].cached and not stages[STAGE.folder].cached
        assert "examples" not in stages[STAGE.folder].inputs
        folders = list(stages)
        assert folders.index(RELEASE_DATA.folder) == folders.index(STAGE.folder) - 1
        assert folders == sorted(folders)  # a run's folders sort in pipeline order
