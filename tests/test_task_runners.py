"""The scale-out path (docs/scale.md): the build on Dask gives the same dataset and manifest as on Prefect's thread
pool, and the runner setting is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pbbq.flows.build_pbbq import build_pbbq
from pbbq.flows.task_runners import task_runner
from pbbq.tasks.core.artifacts import REPO_ROOT


def _stages(run: Path) -> list[dict]:
    """The manifest's stages without what differs between any two builds: the cache flag, and the release's
    copy of the manifest (it has the time it was written) and the release files that name it (compared by
    their data below)."""
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    return [
        {
            **{k: v for k, v in stage.items() if k not in ("cached", "artifacts", "inputs")},
            "inputs": {k: v for k, v in stage["inputs"].items() if k != "manifest_path"},
            "artifacts": [a for a in stage["artifacts"] if not a["path"].startswith("10_publish/")],
        }
        for stage in manifest["stages"]
    ]


def test_a_dask_build_on_worker_processes_gives_the_thread_builds_dataset_and_manifest(
    urdu_build: Path, tmp_path: Path
) -> None:
    """The sample translated into two targets (English and Urdu): built on a local Dask cluster of two worker
    processes (each stage's LLM client reopened in its worker, the translate branches side by side) and on threads,
    each with a fresh cache, it gives the same manifest and the same dataset."""
    pytest.importorskip("prefect_dask")
    config = str(REPO_ROOT / "configs" / "sample-ur.toml")
    threads = urdu_build  # the same configuration on threads, run id and a fresh cache (tests/conftest.py)
    flow = build_pbbq.with_options(task_runner=task_runner("dask", workers=2))
    dask = Path(flow(config=config, run_id="built", outputs=str(tmp_path / "dask")))
    assert _stages(dask) == _stages(threads)
    assert [s["folder"] for s in json.loads((dask / "manifest.json").read_text())["stages"]][6:8] == [
        "07_translate",
        "07_translate_ur",
    ]
    for name in ("fa", "fa-names", "en", "ur"):
        release = f"10_publish/hub/data/{name}/test-00000-of-00001.parquet"
        assert (dask / release).read_bytes() == (threads / release).read_bytes()


def test_the_task_runner_setting_is_checked() -> None:
    with pytest.raises(ValueError, match="not one of threads, dask"):
        task_runner("ray")
    assert type(task_runner()).__name__ == "StageThreads"  # Prefect's thread pool, left at once when stopped
    with pytest.raises(ValueError, match="--dask-workers needs --task-runner dask"):
        task_runner("threads", workers=2)
    with pytest.raises(ValueError, match="--dask-workers 0 must be at least 1"):
        task_runner("dask", workers=0)
    with pytest.raises(ValueError, match="leave it out with --dask-address"):
        task_runner("dask", "tcp://127.0.0.1:8786", 2)


def test_dask_workers_make_a_local_cluster_of_worker_processes() -> None:
    pytest.importorskip("prefect_dask")
    runner = task_runner("dask", workers=3)
    assert runner.cluster_kwargs == {"n_workers": 3, "threads_per_worker": 1, "processes": True}
