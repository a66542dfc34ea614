"""Publish in two steps: the release's data part as a cached stage (``10_data``) and the per-run publish that
places its files by reference."""

from pathlib import Path

import pandas as pd

from pbbq.flows.pipeline import ADAPT_PIPELINE, PIPELINE
from pbbq.tasks.publish import RELEASE_DATA, STAGE, PublishParams, publish, release_data
from pbbq.tasks.statistics import table1
from tests.release_support import make_configs, run_inputs


def test_publish_takes_the_data_part_of_its_run_by_reference(tmp_path: Path) -> None:
    examples = pd.concat(make_configs().values(), ignore_index=True)
    inputs = {**run_inputs(tmp_path, table1(examples)), "params": PublishParams(synthetic=True)}
    data = release_data(examples, ("fa", "fa-names", "en"))
    run = tmp_path / "run"
    for path, content in data.files.items():  # where the runner places a cached stage's files
        (run / RELEASE_DATA.folder / path).parent.mkdir(parents=True, exist_ok=True)
        (run / RELEASE_DATA.folder / path).write_bytes(content)
    split = publish(run / "10_publish", data.report, data.tables["release_files"], **inputs)

    assert set(data.tables["release_files"]["path"]) <= set(split.tables["release_files"]["path"])
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
