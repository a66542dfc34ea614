"""The README's deployment sequence, for real: a Prefect server on 127.0.0.1, `pbbq serve`, and
`prefect deployment run build-pbbq/build-pbbq --watch` building the sample."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pbbq.flows.server import stop
from pbbq.tasks.core.artifacts import REPO_ROOT

pytestmark = pytest.mark.deployment
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return 0, ""


def _wait_for(url: str, seconds: float, process: subprocess.Popen) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, body = _get(url)
        if status == 200:
            return body
        assert process.poll() is None, f"{process.args} exited with {process.returncode}"
        time.sleep(1)
    raise TimeoutError(url)


@pytest.fixture
def environment(tmp_path: Path) -> Iterator[dict[str, str]]:
    port = _free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PBBQ_OUTPUTS": str(tmp_path / "outputs"),
    }
    server = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=(tmp_path / "server.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for(f"{env['PREFECT_API_URL']}/health", 120, server)
        yield env
    finally:
        stop(server, timeout=30)


def test_deployment_run_builds_the_sample(environment: dict[str, str], tmp_path: Path) -> None:
    api = environment["PREFECT_API_URL"]
    serve = subprocess.Popen(
        [str(BIN / "pbbq"), "serve"],
        env=environment,
        cwd=tmp_path,
        stdout=(tmp_path / "serve.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deployment = json.loads(_wait_for(f"{api}/deployments/name/build-pbbq/build-pbbq", 120, serve))
        assert [s["schedule"]["cron"] for s in deployment["schedules"]] == ["0 3 * * 1"]
        run = subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "build-pbbq/build-pbbq", "--watch"],
            env=environment,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stdout + run.stderr + (tmp_path / "serve.log").read_text()
    finally:
        stop(serve, timeout=30)
    manifests = list((tmp_path / "outputs").glob("*/manifest.json"))
    assert len(manifests) == 1
    manifest = json.loads(manifests[0].read_text(encoding="utf-8"))
    assert manifest["status"] == "completed"
    assert any(stage["folder"] == "05_instantiate" for stage in manifest["stages"])
