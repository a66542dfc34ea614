"""A temporary Prefect server that dies with the command that started it.

Without ``PREFECT_API_URL`` Prefect starts a temporary server in a subprocess and stops it at exit; a build that
is killed (SIGKILL, the OOM killer) never reaches its exit, and the server stays behind, listening. ``pbbq build``,
``pbbq serve`` and ``pbbq evaluate`` start the same server themselves (the same uvicorn command and application
Prefect uses), with Linux's parent-death signal set in the child, so the kernel stops it when the command dies
however it dies.
With ``PREFECT_API_URL`` set, the command uses that server and starts none.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PR_SET_PDEATHSIG = 1
"""prctl(2): the signal the child gets when the thread that started it ends."""
DRAIN_SECONDS = 10.0
"""At most this long to send what Prefect still holds before the server stops."""


def _die_with_parent(parent: int) -> None:
    """Run in the server's process before it execs: SIGTERM when the command dies (and at once if it already
    has)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def startup_timeout() -> float:
    """Seconds a temporary Prefect server may take to start (``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``,
    which ``pbbq`` sets to 120 unless the user did)."""
    return float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _command(port: int) -> list[str]:
    import prefect

    return [
        sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent), "--factory",
        "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port), "--log-level", "error",
        "--lifespan", "on",
    ]  # fmt: skip


def _drain_to(server: subprocess.Popen[bytes]) -> None:
    """Send the logs and events Prefect still holds while the server is there to take them (else Prefect retries
    them against a stopped server at exit, for minutes)."""
    if server.poll() is not None:
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=DRAIN_SECONDS)


@contextmanager
def temporary_server(timeout: float) -> Iterator[str | None]:
    """Run the body against a temporary server that cannot outlive this process; yields its API URL (None when
    ``PREFECT_API_URL`` names a server already)."""
    if os.environ.get("PREFECT_API_URL") or not sys.platform.startswith("linux"):
        yield None  # a configured server, or no parent-death signal: Prefect's own temporary server
        return
    from prefect.settings import PREFECT_API_URL, temporary_settings

    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1"}
    parent = os.getpid()
    server = subprocess.Popen(_command(port), env=env, preexec_fn=lambda: _die_with_parent(parent))
    try:
        _wait_until_healthy(server, url, timeout)
        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield url
    finally:
        _drain_to(server)
        stop(server, timeout=10)


def _wait_until_healthy(server: subprocess.Popen[bytes], url: str, timeout: float) -> None:
    """Poll the server's health endpoint every 0.1 s until it answers, with one HTTP client (a client of its own
    for each poll built an SSL context, ~40 ms of the CPU the starting server needs)."""
    import httpx

    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2) as health:
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the temporary Prefect server exited with code {server.returncode}")
            try:
                if health.get(f"{url}/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the temporary Prefect server did not answer within {timeout:.0f} s "
                    "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)"
                )
            time.sleep(0.1)


def stop(process: subprocess.Popen[Any], timeout: float) -> None:
    """Ask a process to end (SIGTERM); kill it if it has not within ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
