"""A build stopped from outside, and the failures a build reports before or beside its stages (docs/runs.md, "When
a build stops"): SIGTERM or SIGINT deep in a stage ends the process within seconds, the run ``incomplete`` with
nothing it does not list, and the next build gives the same bytes; a bad input is one line with no run folder; a
full disk names its file and never leaves a run ``running``; code a build runs that calls ``sys.exit`` is an error
that names where."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from pbbq.flows.cli import main
from pbbq.flows.server import stop
from pbbq.tasks.core.artifacts import REPO_ROOT, StageOutput, sha256_file
from pbbq.tasks.core.run_folder import RunFolder
from tests.fakes.llm_servers import FakeLLMServer
from tests.helpers import FAKE_API_KEY

ENDS_WITHIN = 20
"""Seconds a stopped build may take to end: ``STOP_GRACE`` (5 s) and room for a loaded machine (it never ended)."""
EXIT = {signal.SIGTERM: -signal.SIGTERM, signal.SIGINT: 130}
"""How ``pbbq build`` ends on each: killed by SIGTERM (Prefect sends it again once the flow has reported its end),
exit code 130 on SIGINT."""
ENDLESS = """\
import importlib, sys
from pathlib import Path

module_name, function, marker = sys.argv[1:4]
module = importlib.import_module(module_name)
original = getattr(module, function)


def endless(*args, **kwargs):
    original(*args, **kwargs)
    Path(marker).touch()
    while True:  # a stage deep in work: pure Python in its worker thread, checking nothing
        sum(range(10_000))


setattr(module, function, endless)
from pbbq.flows.cli import main

sys.exit(main(sys.argv[4:]))
"""
"""The sample's build with one function a stage calls made endless once it has run once (a stage instantiating a
huge product; publish half-way through writing the release)."""


def _command(outputs: Path, *extra: str) -> list[str]:
    return [*extra, "build", "--sample", "--run-id", "run", "--outputs", str(outputs)]


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text(encoding="utf-8"))


def _parquet(run: Path) -> dict[str, str]:
    return {p.relative_to(run).as_posix(): sha256_file(p) for p in sorted(run.rglob("*.parquet"))}


def _stable(manifest: dict) -> dict:
    """What two builds of the same inputs share in their manifests (times, ids and the manifest's own hash left out)."""
    return {
        **{key: manifest[key] for key in ("inputs", "parameters", "code_version", "warnings")},
        "stages": [
            (stage["folder"], [a for a in stage["artifacts"] if not a["path"].endswith("report.json")])
            for stage in manifest["stages"]
        ],
    }


def _listed(manifest: dict) -> set[str]:
    """Every file the manifest lists, itself included."""
    stages = {artifact["path"] for stage in manifest["stages"] for artifact in stage["artifacts"]}
    return {"manifest.json", *stages, *(file["path"] for file in manifest["files"])}


def _on_disk(run: Path) -> set[str]:
    return {path.relative_to(run).as_posix() for path in run.rglob("*") if not path.is_dir() or path.is_symlink()}


@pytest.fixture(scope="module")
def environment(prefect_server: None) -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}


@pytest.fixture(scope="module")
def reference(environment: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample built once, never stopped."""
    outputs = tmp_path_factory.mktemp("reference")
    command = [sys.executable, "-m", "pbbq.flows.cli", *_command(outputs)]
    built = subprocess.run(command, env=environment, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    return outputs / "run"


@pytest.mark.parametrize(
    ("stop", "module", "function", "stage"),
    [
        (signal.SIGTERM, "pbbq.tasks.instantiate", "template_examples", "05_instantiate"),
        (signal.SIGTERM, "pbbq.tasks.publish.release", "link_or_copy", "10_publish"),
        (signal.SIGINT, "pbbq.tasks.instantiate", "template_examples", "05_instantiate"),
    ],
)
def test_a_build_stopped_deep_in_a_stage_ends_within_seconds_incomplete_and_rebuilds_the_same_bytes(
    stop: signal.Signals,
    module: str,
    function: str,
    stage: str,
    environment: dict[str, str],
    reference: Path,
    tmp_path: Path,
) -> None:
    outputs, marker = tmp_path / "outputs", tmp_path / "in-the-stage"
    command = [sys.executable, "-c", ENDLESS, module, function, str(marker), *_command(outputs)]
    build = subprocess.Popen(command, env=environment, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert build.poll() is None and time.monotonic() < deadline, build.communicate()[1][-2000:]
            time.sleep(0.2)
        time.sleep(1)  # deep in the endless loop
        sent = time.monotonic()
        build.send_signal(stop)
        _, stderr = build.communicate(timeout=ENDS_WITHIN)
        ended = time.monotonic() - sent
    finally:
        if build.poll() is None:
            build.kill()
            build.wait()
    assert build.returncode == EXIT[stop] and ended < ENDS_WITHIN, stderr[-2000:]
    run = outputs / "run"
    manifest = _manifest(run)
    assert manifest["status"] == "incomplete"
    assert manifest["error"] == f"cancelled by {stop.name} before it finished"
    assert stage not in [s["folder"] for s in manifest["stages"]]
    assert _on_disk(run) == _listed(manifest)  # no half-written stage, temporary file or staging folder

    rebuilt = subprocess.run(
        [sys.executable, "-m", "pbbq.flows.cli", *_command(outputs)],
        env=environment,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    assert _manifest(run)["status"] == "completed"
    assert _parquet(run) == _parquet(reference)
    assert _stable(_manifest(run)) == _stable(_manifest(reference))


def _broken_ratings(sample_copy: Path) -> Path:
    ratings = sample_copy / "annotations" / "ratings.csv"
    ratings.write_text(ratings.read_text(encoding="utf-8") + "AGE-01-T1,1,A1,stereo,9\n", encoding="utf-8")
    return ratings


def test_a_bad_input_is_one_line_before_any_flow_run_and_leaves_no_run_folder(
    sample_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ratings = _broken_ratings(sample_copy)
    outputs = tmp_path / "outputs"
    config = sample_copy / "configs" / "sample.toml"
    assert main(["build", "--config", str(config), "--outputs", str(outputs), "--run-id", "run"]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"pbbq: error: {ratings}, row 1298: relevance '9' is outside the scale 1–3\n"
    assert captured.out == ""
    assert not (outputs / "run").exists()


def test_the_flow_refuses_a_bad_input_before_it_makes_a_run_folder(
    prefect_server: None, sample_copy: Path, tmp_path: Path
) -> None:
    """The same input error where no command checked it first (a deployment's flow run)."""
    from pbbq.flows.build_pbbq import build_pbbq
    from pbbq.tasks.core.inputs import InputError

    _broken_ratings(sample_copy)
    config = sample_copy / "configs" / "sample.toml"
    with pytest.raises(InputError, match="row 1298: relevance '9' is outside the scale 1–3"):
        build_pbbq(config=str(config), run_id="run", outputs=str(tmp_path / "outputs"))
    assert not (tmp_path / "outputs" / "run").exists()


@pytest.fixture
def full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RunFolder, OSError]:
    """A run whose stage's file could not be written: the disk has room for the run's manifest only."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("reads a file's name from /proc")
    run = RunFolder.create(tmp_path, "run", {})
    output = StageOutput({}, {}, {}, files={"chart.png": b"\x89PNG" * 1000})
    with monkeypatch.context() as full:
        full.setattr(os, "fsync", _fsync_manifest_only(os.fsync))
        with pytest.raises(OSError) as raised, run.recording():
            run.write_stage("08_diversity", output, inputs={}, cached=False)
    return run, raised.value


def test_a_full_disk_leaves_the_run_failed_never_running(full_disk: tuple[RunFolder, OSError]) -> None:
    run, _ = full_disk
    manifest = _manifest(run.path)
    assert manifest["status"] == "failed"  # its traceback could not be written: the manifest says failed all the same
    assert manifest["error"].startswith("OSError: [Errno 28] No space left on device")
    assert _on_disk(run.path) == {"manifest.json"}  # no temporary file left


def test_a_full_disk_names_the_file_it_could_not_write(
    full_disk: tuple[RunFolder, OSError], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run, error = full_disk
    written = run.path / "08_diversity" / "chart.png"
    assert error.errno == errno.ENOSPC and error.filename == str(written)

    def build(_: object) -> int:
        raise error

    monkeypatch.setattr("pbbq.flows.cli._build", build)
    assert main(["build", "--sample"]) == 1
    assert capsys.readouterr().err == f"pbbq: error: {written}: No space left on device\n"


def _fsync_manifest_only(real: Callable[[int], None]) -> Callable[[int], None]:
    """``os.fsync`` on a disk with room for a run's manifest only: any other file's raises ENOSPC, naming no file."""

    def fsync(handle: int) -> None:
        if not Path(os.readlink(f"/proc/self/fd/{handle}")).name.startswith(".manifest.json."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(handle)

    return fsync


def test_code_a_build_runs_that_calls_sys_exit_is_one_error_line_naming_it(sample_copy: Path, tmp_path: Path) -> None:
    """A configuration's language module that calls ``sys.exit(0)`` when it loads: never exit 0 with no output."""
    folder = sample_copy / "configs" / "mine"
    folder.mkdir()
    quits = "import sys\n\nsys.exit(0)\nLANGUAGE = None  # a language module, run when the build loads it\n"
    (folder / "quits.py").write_text(quits, encoding="utf-8")
    config = sample_copy / "configs" / "mine.toml"
    config.write_text('inherit = "sample.toml"\n\n[languages]\nmodules = ["mine"]\n', encoding="utf-8")
    command = [sys.executable, "-m", "pbbq.flows.cli", "build", "--config", str(config), "--outputs", str(tmp_path)]
    ended = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert ended.returncode == 1
    lines = ended.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pbbq: error: "), ended.stderr
    assert "quits.py" in lines[0]


def _api(method: str, url: str, body: dict | None = None) -> dict:
    """A call to Prefect's API; a 503 (the server's database busy while the suite loads the machine) is tried
    again for up to a minute, as Prefect's own client does."""
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None)
    request.add_header("Content-Type", "application/json")
    for _ in range(30):
        try:
            return _answer(request)
        except urllib.error.HTTPError as error:
            if error.code != 503:
                raise
            time.sleep(2)
    return _answer(request)


def _answer(request: urllib.request.Request) -> dict:
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"{}")


def _until(check: Callable[[], object], seconds: float, what: str) -> object:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise TimeoutError(what)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.deployment
def test_prefect_cancelling_a_served_flow_run_ends_it_within_seconds_incomplete(
    environment: dict[str, str], sample_copy: Path, tmp_path: Path
) -> None:
    """``prefect flow-run cancel`` against the build ``pbbq serve`` serves, while a stage waits on a model that does
    not answer: the runner's SIGTERM ends the flow run's process within seconds, its run ``incomplete``, the flow
    run Cancelled."""
    config = sample_copy / "configs" / "sample.toml"
    text = config.read_text(encoding="utf-8").replace('transcript = "../prompts/transcripts/sample.jsonl.gz"\n', "")
    config.write_text(text.replace("[llm]\n", f'[llm]\nstore_path = "{tmp_path / "store.sqlite"}"\n'), "utf-8")
    api, outputs = environment["PREFECT_API_URL"], tmp_path / "outputs"
    with FakeLLMServer(latency=600) as model:  # every answer ten minutes away
        env = {
            **environment,
            "OPENAI_API_KEY": FAKE_API_KEY,
            "PBBQ_LLM_MODE": "live",
            "PBBQ_LLM_BASE_URL": model.openai_base_url,
            "PBBQ_OUTPUTS": str(outputs),
        }
        log = (tmp_path / "serve.log").open("w")
        serve = subprocess.Popen([sys.executable, "-m", "pbbq.flows.cli", "serve"], env=env, stdout=log, stderr=log)
        try:
            deployment = _until(lambda: _deployment(api), 180, "the served deployment")
            flow_run = _api(
                "POST", f"{api}/deployments/{deployment}/create_flow_run", {"parameters": {"config": str(config)}}
            )
            _until(lambda: model.requests_total, 300, "the first request to the model")
            running = _manifest(next(outputs.glob("*/manifest.json")).parent)
            assert running["status"] == "running"
            cancel = [Path(sys.executable).parent / "prefect", "flow-run", "cancel", flow_run["id"]]
            sent = time.monotonic()
            subprocess.run(cancel, env=env, check=True, capture_output=True, timeout=120)
            _until(lambda: _gone(running["process"]["pid"]), ENDS_WITHIN + 30, "the flow run's process to end")
            ended = time.monotonic() - sent
            state = _until(
                lambda: (_api("GET", f"{api}/flow_runs/{flow_run['id']}")["state"] or {}).get("type") == "CANCELLED",
                60,
                "the flow run Cancelled",
            )
        finally:
            stop(serve, timeout=30)
            log.close()
    run = next(outputs.glob("*/manifest.json")).parent
    manifest = _manifest(run)
    assert manifest["status"] == "incomplete" and manifest["error"] == "cancelled by SIGTERM before it finished"
    assert "04_disambiguate" not in [stage["folder"] for stage in manifest["stages"]]
    assert _on_disk(run) == _listed(manifest)
    assert state and ended < ENDS_WITHIN + 30, (tmp_path / "serve.log").read_text()


def _deployment(api: str) -> str | None:
    try:
        return _api("GET", f"{api}/deployments/name/build-pbbq/build-pbbq")["id"]
    except urllib.error.HTTPError:
        return None


SITE_HOOK = """\
import os

if os.environ.get("PBBQ_TEST_ENDLESS"):
    import importlib
    from pathlib import Path

    module_name, function, marker = os.environ["PBBQ_TEST_ENDLESS"].split("|")
    module = importlib.import_module(module_name)
    original = getattr(module, function)

    def endless(*args, **kwargs):
        original(*args, **kwargs)
        Path(marker).touch()
        while True:  # a stage deep in work, in a Dask worker's process
            sum(range(10_000))

    setattr(module, function, endless)
"""
"""``sitecustomize`` for every process of a build (Dask's worker processes start afresh, with no patch of the
flow's): :data:`ENDLESS`'s endless function, named by the environment."""


def test_a_dask_build_stopped_deep_in_a_stage_ends_its_worker_processes_too(
    environment: dict[str, str], tmp_path: Path
) -> None:
    """On a local cluster of worker processes (``--dask-workers``), a stage endless in a worker: SIGTERM ends the
    flow's process within seconds, the run ``incomplete``, and every process of the cluster (the workers, kept from
    their nannies' exit by the endless stage, then killed by them, and multiprocessing's resource tracker)."""
    pytest.importorskip("prefect_dask")
    import psutil

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITE_HOOK, encoding="utf-8")
    outputs, marker = tmp_path / "outputs", tmp_path / "in-the-stage"
    hooked = {
        **environment,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), environment.get("PYTHONPATH", "")]),
        "PBBQ_TEST_ENDLESS": f"pbbq.tasks.instantiate|template_examples|{marker}",
    }
    command = [
        sys.executable,
        "-m",
        "pbbq.flows.cli",
        *_command(outputs),
        "--task-runner",
        "dask",
        "--dask-workers",
        "2",
    ]
    build = subprocess.Popen(command, env=hooked, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    workers: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert build.poll() is None and time.monotonic() < deadline, build.communicate()[1][-2000:]
            time.sleep(0.2)
        workers = psutil.Process(build.pid).children(recursive=True)
        assert workers  # the cluster's worker processes
        time.sleep(1)  # deep in the endless loop
        sent = time.monotonic()
        build.send_signal(signal.SIGTERM)
        _, stderr = build.communicate(timeout=ENDS_WITHIN)
        ended = time.monotonic() - sent
        _, alive = psutil.wait_procs(workers, timeout=ENDS_WITHIN)
    finally:
        for process in psutil.Process(build.pid).children(recursive=True) if build.poll() is None else []:
            process.kill()
        if build.poll() is None:
            build.kill()
            build.wait()
        for process in workers:
            if process.is_running():
                process.kill()
    assert ended < ENDS_WITHIN, stderr[-2000:]
    assert alive == [], [process.cmdline() for process in alive]
    manifest = _manifest(outputs / "run")
    assert manifest["status"] == "incomplete", manifest.get("error")
    assert "05_instantiate" not in [s["folder"] for s in manifest["stages"]]
