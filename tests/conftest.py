"""Shared fixtures: one Prefect test server per session, and a copy of the bundled sample to break."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pbbq.tasks.artifacts import REPO_ROOT

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[None]:
    """A temporary Prefect server for the tests that run flows (about 15 s to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture
def sample_copy(tmp_path: Path) -> Path:
    """A writable copy of the bundled sample's inputs and configuration, laid out as in the repository."""
    for folder in ("survey", "annotations", "configs", "prompts", "crawl"):
        if (REPO_ROOT / folder).exists():
            shutil.copytree(REPO_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.fixture(scope="session")
def two_builds(prefect_server: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two builds of the sample into one outputs folder: the second one finds every stage cached."""
    from pbbq.flows.build_pbbq import build_pbbq

    outputs = tmp_path_factory.mktemp("outputs")
    first = Path(build_pbbq(run_id="first", outputs=str(outputs)))
    second = Path(build_pbbq(run_id="second", outputs=str(outputs)))
    return first, second
