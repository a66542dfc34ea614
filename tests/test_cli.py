"""The command line answers at once: ``pbbq --help`` and argument errors load no heavy library."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pbbq.tasks.core.artifacts import REPO_ROOT

HEAVY = ("pandas", "pyarrow", "prefect", "torch", "openai", "anthropic", "lm_eval", "numpy")


def test_help_and_argument_errors_import_no_heavy_library() -> None:
    script = (
        "import sys\n"
        "from pbbq.flows.cli import main\n"
        "for argv in (['--help'], ['build'], ['names', '--help'], ['evaluate', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"
    assert "usage: pbbq" in result.stdout and "one of the arguments --sample --config is required" in result.stderr


def test_a_bad_input_found_in_the_flow_is_one_line_without_a_traceback(
    prefect_server: None, sample_copy: Path, tmp_path: Path
) -> None:
    """An input error raised inside the build flow (not while the configuration loads) reaches the terminal as
    Prefect's one log line and pbbq's one error line; the traceback is only in the run's error.log."""
    from prefect.settings import PREFECT_API_URL

    ratings = sample_copy / "annotations" / "ratings.csv"
    ratings.write_text(ratings.read_text(encoding="utf-8") + "AGE-01-T1,1,A1,stereo,9\n", encoding="utf-8")
    config = sample_copy / "configs" / "sample.toml"
    command = [
        sys.executable,
        "-m",
        "pbbq.flows.cli",
        "build",
        "--config",
        str(config),
        "--outputs",
        str(tmp_path / "o"),
    ]
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"pbbq: error: {ratings}, row 1298: relevance '9' is outside the scale 1–3 (traceback: ")
    log = Path(last.rsplit("(traceback: ", 1)[1].rstrip(")"))
    assert "Traceback" in log.read_text(encoding="utf-8")
