"""The scale-out path (docs/scale.md): the build on Dask gives the same dataset and manifest as on Prefect's thread
pool, and the runner setting is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pbbq.flows.build_pbbq import build_pbbq, task_runner


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


def test_a_dask_build_gives_the_thread_builds_dataset_and_manifest(
    two_builds: tuple[Path, Path], tmp_path: Path
) -> None:
    pytest.importorskip("prefect_dask")
    threads, _ = two_builds
    flow = build_pbbq.with_options(task_runner=task_runner("dask"))
    dask = Path(flow(run_id=threads.name, outputs=str(tmp_path / "outputs")))  # a fresh cache: every stage runs
    assert _stages(dask) == _stages(threads)
    for name in ("fa", "fa-names", "en"):
        release = f"10_publish/hub/data/{name}/test-00000-of-00001.parquet"
        assert (dask / release).read_bytes() == (threads / release).read_bytes()


def test_the_task_runner_setting_is_checked() -> None:
    with pytest.raises(ValueError, match="not one of threads, dask"):
        task_runner("ray")
    assert type(task_runner()).__name__ == "ThreadPoolTaskRunner"
