"""A build killed (SIGKILL) half-way through a stage: the run reads ``incomplete``, the next build marks it and
its Prefect flow run, a rebuild with the same id replaces it and gives the same bytes as a build never killed,
no temporary server outlives its command (build, serve), and a killed run's leftovers that are links are unlinked,
never followed (docs/architecture.md §5)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from pbbq.flows.audit.audit import audit_text
from pbbq.tasks.core.artifacts import REPO_ROOT, sha256_file
from pbbq.tasks.core.run_folder import KILL_HOOK, mark_incomplete, run_status

KILL_POINTS = ("01_crawl", "05_instantiate", "10_publish")
"""The first stage, one in the middle, and publish (the release written, the manifest not yet)."""


def _build(outputs: Path, run_id: str, api_url: str, kill_in: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PREFECT_API_URL": api_url}
    env.pop(KILL_HOOK, None)
    if kill_in:
        env[KILL_HOOK] = kill_in
    command = [
        sys.executable,
        "-m",
        "pbbq.flows.cli",
        "build",
        "--sample",
        "--run-id",
        run_id,
        "--outputs",
        str(outputs),
    ]
    return subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text(encoding="utf-8"))


def _parquet(run: Path) -> dict[str, str]:
    return {p.relative_to(run).as_posix(): sha256_file(p) for p in sorted(run.rglob("*.parquet"))}


def _stable(manifest: dict) -> dict:
    """The manifest without what differs between two builds of the same inputs by design: times, the run id,
    the process, and what holds the manifest's own hash (publish's report and inputs, the release's copy)."""
    return {
        **{k: manifest[k] for k in ("inputs", "parameters", "code_version", "warnings")},
        "stages": [
            (
                stage["folder"],
                {k: v for k, v in stage["inputs"].items() if k != "manifest_path"},
                [a for a in stage["artifacts"] if not a["path"].endswith("report.json")],
            )
            for stage in manifest["stages"]
        ],
    }


@pytest.fixture(scope="module")
def api_url(prefect_server: None) -> str:
    from prefect.settings import PREFECT_API_URL

    return str(PREFECT_API_URL.value())


@pytest.fixture
def outputs(two_builds: tuple[Path, Path], tmp_path: Path) -> Path:
    """An outputs folder with the reference build's result cache, so stages before the kill come from it."""
    shutil.copytree(two_builds[0].parent / ".cache", tmp_path / "outputs" / ".cache")
    return tmp_path / "outputs"


@pytest.mark.parametrize("stage", KILL_POINTS)
def test_a_killed_build_is_incomplete_and_rebuilding_it_gives_the_same_bytes(
    stage: str, two_builds: tuple[Path, Path], outputs: Path, api_url: str
) -> None:
    reference = two_builds[0]
    killed = _build(outputs, "run", api_url, kill_in=stage)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    run = outputs / "run"
    assert run_status(_manifest(run)) == "incomplete"
    assert "run run (incomplete)" in audit_text(run)
    finished = [s["folder"] for s in _manifest(run)["stages"]]
    assert stage not in finished and all(folder < stage for folder in finished)

    rebuilt = _build(outputs, "run", api_url)
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    manifest = _manifest(run)
    assert manifest["status"] == "completed"
    assert _parquet(run) == _parquet(reference)
    assert _stable(manifest) == _stable(_manifest(reference))
    cached = {s["folder"]: s["cached"] for s in manifest["stages"]}
    assert all(cached[folder] for folder in finished)  # the stages that finished before the kill are reused
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".hub-")]


def test_the_next_build_marks_a_killed_run_and_its_crashed_flow_run(outputs: Path, api_url: str) -> None:
    from prefect.client.orchestration import get_client

    assert _build(outputs, "killed", api_url, kill_in="04_disambiguate").returncode == -signal.SIGKILL
    killed = outputs / "killed"
    (killed / "04_disambiguate" / ".templates.parquet.x.tmp").write_bytes(b"half")  # as a kill mid-write leaves
    flow_run_id = _manifest(killed)["process"]["flow_run_id"]
    assert _manifest(killed)["status"] == "running"

    assert _build(outputs, "next", api_url).returncode == 0
    manifest = _manifest(killed)
    assert manifest["status"] == "incomplete" and "killed" in manifest["error"]
    assert not list(killed.rglob("*.tmp"))
    with get_client(sync_client=True) as client:
        assert client.read_flow_run(flow_run_id).state.type.value == "CRASHED"


def test_a_completed_run_id_is_never_replaced(outputs: Path, api_url: str) -> None:
    assert _build(outputs, "done", api_url).returncode == 0
    again = _build(outputs, "done", api_url)
    assert again.returncode == 1
    assert "exists already (completed); choose another --run-id" in again.stderr
    assert "Flow run" not in again.stderr  # refused before a flow run starts: one line, no Prefect ERROR


def test_the_temporary_server_dies_with_a_killed_command(tmp_path: Path) -> None:
    """What ``pbbq build`` does without PREFECT_API_URL, then SIGKILL: the server must not stay behind."""
    script = (
        "import os, signal, sys\n"
        "from pbbq.flows.server import temporary_server\n"
        "with temporary_server(120) as url:\n"
        "    print(url, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    command = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert command.returncode == -signal.SIGKILL, command.stderr[-2000:]
    url = command.stdout.strip()
    assert url.startswith("http://127.0.0.1:")
    assert _gone(f"{url}/health"), f"the temporary server at {url} outlived its command"


def _gone(health: str, seconds: float = 20) -> bool:
    """Whether nothing answers at ``health`` any more, within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            httpx.get(health, timeout=1)
        except httpx.TransportError:
            return True
        time.sleep(0.2)
    return False


def _uvicorn_child(pid: int) -> tuple[int, int] | None:
    """The pid and port of the Prefect server (uvicorn) that process ``pid`` started, if any yet."""
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in map(int, children.read_text().split()):
            argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
            if "uvicorn" in argv and "--port" in argv:
                return child, int(argv[argv.index("--port") + 1])
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_pbbq_serve_killed_leaves_no_server_behind(tmp_path: Path) -> None:
    """``pbbq serve`` without PREFECT_API_URL, then SIGKILL: its temporary server must go with it."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    serve = subprocess.Popen(
        [sys.executable, "-m", "pbbq.flows.cli", "serve"],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = None
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and serve.poll() is None:
            server = server or _uvicorn_child(serve.pid)
            with contextlib.suppress(httpx.TransportError):
                if server and httpx.get(f"http://127.0.0.1:{server[1]}/api/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.2)
        assert server is not None and serve.poll() is None, "pbbq serve started no server"
        serve.kill()
        serve.wait()
        assert _gone(f"http://127.0.0.1:{server[1]}/api/health"), (
            f"the temporary server of pbbq serve (port {server[1]}) outlived its command"
        )
    finally:
        serve.kill()
        serve.wait()
        if server is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(server[0], signal.SIGKILL)


def test_leftovers_that_are_links_are_unlinked_not_followed(tmp_path: Path) -> None:
    """A killed run's temporary names that are symbolic links (to a folder too) go; what they point to stays."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "data").mkdir(parents=True)
    (elsewhere / "data" / "keep.parquet").write_bytes(b"keep")
    run = tmp_path / "outputs" / "killed"
    (run / "04_disambiguate").mkdir(parents=True)
    (run / "04_disambiguate" / ".templates.parquet.x.tmp").symlink_to(elsewhere, target_is_directory=True)
    (run / "10_publish").mkdir()
    (run / "10_publish" / ".hub-0123").symlink_to(elsewhere / "data", target_is_directory=True)
    (run / "10_publish" / ".report.json.y.tmp").symlink_to(elsewhere / "data" / "keep.parquet")
    ended = subprocess.Popen(["true"])
    ended.wait()  # its process id is gone: the run reads incomplete
    process = {"host": socket.gethostname(), "pid": ended.pid}
    (run / "manifest.json").write_text(json.dumps({"status": "running", "process": process}), encoding="utf-8")
    assert mark_incomplete(run)
    assert sorted(p.name for p in run.rglob("*")) == ["manifest.json"]  # nothing it does not list, no empty folder
    assert (elsewhere / "data" / "keep.parquet").read_bytes() == b"keep"
