"""What ``pbbq build`` prints and how the project installs: one line per stage (Prefect's task-run lines only with
``--verbose``), no link to a temporary server that is gone when the command exits, the names stage's examples no
name table covers counted as not covered (they stay in fa, so they are not drops), and a package build setuptools
has nothing to warn about."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pbbq.flows.pipeline import PIPELINE
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.run_folder import StageRecord

FLOW = """
import sys
from pbbq.flows import cli
from pbbq.flows.server import startup_timeout, temporary_server

cli._prefect_defaults()
cli._quiet_prefect(tracebacks=False, task_runs=sys.argv[1] == "verbose")
from prefect import flow, get_run_logger, task

@task
def stage() -> int:
    return 1

@flow(name="output-test")
def build() -> int:
    get_run_logger().info("one line per stage")
    return stage.submit().result()

with temporary_server(startup_timeout()):
    build()
"""


def _flow_output(verbose: bool, env: dict[str, str]) -> str:
    mode = "verbose" if verbose else "quiet"
    result = subprocess.run(
        [sys.executable, "-c", FLOW, mode], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stderr


def test_the_terminal_gets_no_task_run_lines_and_no_link_to_a_temporary_server() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_UI_URL")}
    quiet = _flow_output(verbose=False, env=env)
    assert "one line per stage" in quiet
    assert "Task run" not in quiet
    assert "View at" not in quiet  # the temporary server stops when the command exits


def test_verbose_shows_the_task_run_lines_and_a_configured_server_keeps_its_link(prefect_server: None) -> None:
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if k != "PREFECT_UI_URL"} | {"PREFECT_API_URL": PREFECT_API_URL.value()}
    verbose = _flow_output(verbose=True, env=env)
    assert "Task run 'stage-" in verbose and "Finished in state Completed()" in verbose
    assert "View at http://" in verbose  # a server that outlives the command: its link stays


def test_the_build_takes_verbose() -> None:
    from pbbq.flows.cli import _parser

    assert _parser().parse_args(["build", "--sample", "--verbose"]).verbose
    assert not _parser().parse_args(["build", "--sample"]).verbose


def test_the_names_stage_counts_examples_no_table_covers_as_not_covered() -> None:
    names = next(stage for stage in PIPELINE if stage.folder == "06_names")
    assert names.drops == ("weak_proxy",)  # its `unmapped` table is kept, but it holds no drops
    report = {"counts": {"in": 3744, "out": 468}, "not_covered": {"total": 3060}, "dropped": {"total": 528}}
    line = StageRecord("names", "06_names", False, {}, [], report).summary()
    assert line == "06_names         3744 in → 468 out, 528 dropped, 3060 not covered (recomputed)"
    report = {"counts": {"in": 48, "out": 39}, "dropped": {"total": 9}}
    assert StageRecord("survey_filter", "02_survey", True, {}, [], report).summary().endswith("9 dropped (cached)")


def test_the_package_builds_without_a_setuptools_warning(tmp_path: Path) -> None:
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    for folder in ("pbbq", "flows", "tasks"):  # pbbq's links to flows/ and tasks/ copied as links, as git has them
        shutil.copytree(
            REPO_ROOT / folder, tmp_path / folder, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
        )
    script = "from setuptools import build_meta; print(build_meta.build_wheel('dist'))"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, check=True, timeout=300
    )
    warnings = re.findall(r"\w*Warning: .*", result.stdout + result.stderr)  # SetuptoolsWarning and the like
    assert warnings == []
    wheel = tmp_path / "dist" / result.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    # every subpackage and both data files: the card's template and synth's phrase book
    assert {"pbbq/tasks/publish/templates/dataset_card.md", "pbbq/tasks/synth/phrases.toml"} <= names
    packages = [
        init.relative_to(REPO_ROOT)
        for folder in ("flows", "tasks")
        for init in (REPO_ROOT / folder).rglob("__init__.py")
    ]
    assert {f"pbbq/{init.as_posix()}" for init in packages} <= names


@pytest.mark.parametrize("target", ["evaluate", "browse"])
def test_make_names_a_target_for_each_extra_a_command_needs(target: str) -> None:
    """``make -n -B``: what the target would run on a fresh clone (its installs), run nothing."""
    result = subprocess.run(["make", "-n", "-B", target], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    extra = {"evaluate": "eval", "browse": "browse"}[target]
    assert f'-e ".[{extra}]"' in result.stdout
