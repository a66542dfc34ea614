"""Shared fixtures: one Prefect test server per session, and a copy of the bundled sample to break.

``make test`` runs the suite on four pytest-xdist workers (``-n 4 --dist loadgroup``): on two cores, since a
worker spends about half its time waiting (for a Prefect server, a subprocess, a fake server's retry back-off), four
keep both cores busy (measured: 11.5 min against 21 min for two). Each worker is a session of its own, with its own
Prefect test server (its own port and database), its own temporary folders and its own ``PREFECT_HOME`` (set below,
before anything imports Prefect), so that the temporary servers ``pbbq build`` starts in two workers never share a
database. The tests of the sample's two builds (``two_builds``) are one work unit:
one worker builds the sample once and runs them all, against the server that recorded the builds' flow runs and
artifacts (tests/test_diff.py reads them back); so are the tests of each other build a module or the session shares
(:data:`SHARED_BUILDS`). Each worker sends the slow
tests (those that build, with a Prefect server) first, so that no long test starts last. Without xdist (``-n 0``,
mutation testing) none of this applies.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pytest

from pbbq.tasks.core.artifacts import REPO_ROOT
from tests.fakes.llm_servers import FakeLLMServer, echo_answer
from tests.helpers import FAKE_API_KEY, NAMES_EN, NAMES_FA, llm_config

if TYPE_CHECKING:
    from pbbq.tasks.llm import LLMConfig

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

# --- pytest-xdist ----------------------------------------------------------------------------------------------

WORKER = os.environ.get("PYTEST_XDIST_WORKER")
"""This process's xdist worker (gw0, gw1, ...); None outside a distributed run and in its controller."""
UNITS = "PBBQ_TEST_XDIST_UNITS"
"""The folder (an environment variable the controller sets for its workers) where each worker writes the work unit
of every test it collected that must share a worker with others. xdist's own channel for its groups, a suffix on
each test id, is lost on pytest 9.2 (pytest-dev/pytest-xdist#1386), so the controller's scheduler reads it here."""
SAMPLE_BUILDS = "two_builds"
"""The fixture, and the work unit of every test that uses it."""
SHARED_BUILDS = ("urdu_build", "sample_build", "builds_without", "adapt_run")
"""The other builds several tests read, each made once by a session- or module-scoped fixture: ``urdu_build``
(below), ``sample_build`` (tests/test_integrity.py), ``builds_without`` (tests/test_every_path.py, whose
``adapt_run`` is one of them) and ``adapt_run`` (tests/test_adapt_build.py)."""


def _temporary_folder(prefix: str) -> str:
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


if WORKER:
    if "PREFECT_HOME" not in os.environ:
        os.environ["PREFECT_HOME"] = _temporary_folder(f"pbbq-prefect-{WORKER}-")
    # the workers share the cores: torch's (OpenMP's) and BLAS's thread pools take a share each, not every core
    # (pools that each take every core spin against each other: a fifth more CPU time for the torch tests)
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _workers)))


def _slow(item: pytest.Item) -> bool:
    """Builds with a Prefect server (a minute or more each) or starts one of its own."""
    return "prefect_server" in getattr(item, "fixturenames", ()) or item.get_closest_marker("deployment") is not None


def _shared_build(item: pytest.Item) -> str | None:
    """The work unit of a test that reads a build made once for several tests (:data:`SHARED_BUILDS`, the first
    the test uses), named by where the fixture is declared. Its tests go to one worker, which builds once: spread
    over the workers, each worker that got one of them built it again (a minute or more each)."""
    if SAMPLE_BUILDS in getattr(item, "fixturenames", ()):
        return SAMPLE_BUILDS
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})  # pytest's, for its items
    for name in SHARED_BUILDS:
        if name in getattr(item, "fixturenames", ()) and definitions.get(name):
            return f"{definitions[name][-1].baseid}::{name}"
    return None


def pytest_configure(config: pytest.Config) -> None:
    distributed = config.pluginmanager.hasplugin("xdist") and config.getoption("dist", "no") != "no"
    if not WORKER and distributed and config.getoption("tx", None):
        os.environ[UNITS] = _temporary_folder("pbbq-xdist-units-")  # the workers inherit it


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: the sample builds' tests first, then the other slow ones, then the rest, each in collection
    order (the scheduler hands the tests out in this order; its collection order is the workers')."""
    if WORKER and os.environ.get(UNITS):
        items.sort(key=lambda item: (SAMPLE_BUILDS not in getattr(item, "fixturenames", ()), not _slow(item)))


@pytest.hookimpl(tryfirst=True)  # before xdist sends the collection to the controller, which then schedules it
def pytest_collection_finish(session: pytest.Session) -> None:
    folder = os.environ.get(UNITS)
    if WORKER and folder:
        units = {item.nodeid: unit for item in session.items if (unit := _shared_build(item))}
        path = Path(folder) / f"{WORKER}.json"
        path.with_suffix(".tmp").write_text(json.dumps(units), encoding="utf-8")
        path.with_suffix(".tmp").replace(path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` with the units the workers wrote: the tests of one unit go to one worker."""
    folder = os.environ.get(UNITS)
    if config.getoption("dist") != "loadgroup" or not folder:
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FixtureGroupScheduling(LoadGroupScheduling):
        units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:  # first called once every worker has collected (and written its file)
                self.units = {}
                for path in sorted(Path(folder).glob("*.json")):
                    self.units.update(json.loads(path.read_text(encoding="utf-8")))
            return self.units.get(nodeid) or super()._split_scope(nodeid)

    return FixtureGroupScheduling(config, log)


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


@pytest.fixture(scope="session")
def urdu_build(prefect_server: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample translated into English and Urdu (``configs/sample-ur.toml``), built once with a fresh cache as
    run ``built``: read only (tests/test_targets.py reads its tables, tests/test_task_runners.py compares a Dask build
    with it)."""
    from pbbq.flows.build_pbbq import build_pbbq

    config = REPO_ROOT / "configs" / "sample-ur.toml"
    return Path(build_pbbq(config=str(config), run_id="built", outputs=str(tmp_path_factory.mktemp("outputs"))))


@pytest.fixture
def fresh_cue_caches() -> Iterator[None]:
    """entity_gender, entity_age_band and the head lemmas behind role, number and status are cached: clear them so
    each test reads the cue table afresh (mutation testing runs each mutant in a process whose caches an earlier test
    run already filled)."""
    from pbbq.tasks.text import cues
    from pbbq.tasks.text.languages import Language

    Language.entity_gender.cache_clear()
    cues.entity_age_band.cache_clear()
    cues._head_lemmas.cache_clear()
    yield


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    """A fake OpenAI and Anthropic server on 127.0.0.1 (tests/fakes/llm_servers.py) that takes any key."""
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def llm_api_keys(monkeypatch: pytest.MonkeyPatch) -> str:
    """Both providers' API key variables set to ``FAKE_API_KEY`` for the test; returns the key."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_API_KEY)
    return FAKE_API_KEY


@pytest.fixture
def llm(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[FakeLLMServer, LLMConfig]]:
    """A fake OpenAI server that takes only ``FAKE_API_KEY`` (set as ``OPENAI_API_KEY`` for the test) and a client
    configuration for it, its response store in ``tmp_path``. A test module gives the server's answer and the
    configuration's other settings with ``pytestmark = pytest.mark.llm(answer=..., max_retries=..., ...)``."""
    mark = request.node.get_closest_marker("llm")
    settings = dict(mark.kwargs) if mark else {}
    answer = settings.pop("answer", echo_answer)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeLLMServer(answer=answer, expected_key=FAKE_API_KEY) as fake:
        yield fake, llm_config(fake, tmp_path / "store.sqlite", **settings)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hugging Face's hub and datasets offline for the test (nothing downloads; a missing file fails)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="module")
def fa_table() -> pd.DataFrame:
    """The shipped Persian name table, loaded once per module."""
    from pbbq.tasks.names.tables import load_name_table

    return load_name_table(NAMES_FA)


@pytest.fixture(scope="module")
def en_table() -> pd.DataFrame:
    """The shipped English (BBQ) name table, loaded once per module."""
    from pbbq.tasks.names.tables import load_name_table

    return load_name_table(NAMES_EN)
