"""The README's curator path, as written: its set-up's activation, then its rebuild-and-audit commands, in order,
in one shell, on the sample (docs/development.md, Testing). Its scoring commands are checked against the command
line here and run by tests/test_evaluate_flow.py (a tiny model's evaluation takes minutes on two shared cores).

The commands are read from the README itself, so that the README and this test cannot drift apart. The outputs
folder is a copy of the suite's two sample builds (``two_builds``), so the README's build takes every stage from
the cache; ``pbbq`` starts its own temporary Prefect server, as it does for a curator. ``pbbq browse`` serves
until stopped: the script runs it in the background on a free port, waits for its page and stops it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
from pathlib import Path

from pbbq.flows.pipeline import PIPELINE
from pbbq.tasks.core.artifacts import REPO_ROOT

README = REPO_ROOT / "README.md"
SECTIONS = ("Set-up", "A rebuild and its audit")
"""The README sections whose ``sh`` blocks make the curator path (Set-up's only for its activation)."""
SCORING = "Scoring models"
SERVES = "pbbq browse"
"""The one command of the path that runs until stopped."""


def section_blocks(text: str, title: str) -> list[str]:
    """The ``sh`` code blocks of the README section ``## title``, in order."""
    parts = re.split(r"(?m)^## ", text)
    section = next((part for part in parts if part.startswith(title + "\n")), None)
    assert section is not None, f"README has no section '## {title}'"
    return re.findall(r"(?ms)^```sh\n(.*?)^```", section)


def curator_commands(text: str, sections: tuple[str, ...] = SECTIONS) -> list[str]:
    """The path's command lines, comments stripped: Set-up's activation, then every command of the other
    sections."""
    lines: list[str] = []
    for title in sections:
        for block in section_blocks(text, title):
            for line in block.splitlines():
                command = re.sub(r"\s+#.*$", "", line).strip()
                if command and not command.startswith("#") and (title != "Set-up" or command.startswith("source")):
                    lines.append(command)
    return lines


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def shell_script(commands: list[str], port: int) -> str:
    """The commands as one bash script that stops at the first failure; the serving command in the background on
    ``port``, stopped once its page answers."""
    wait = (
        "python -c 'import sys, time, urllib.request\n"
        "for _ in range(600):\n"
        "    try:\n"
        f'        urllib.request.urlopen("http://127.0.0.1:{port}/", timeout=2); sys.exit(0)\n'
        "    except OSError:\n"
        "        time.sleep(0.2)\n"
        "sys.exit(1)'"
    )
    lines = ["set -euo pipefail"]
    for command in commands:
        if command.startswith(SERVES):
            lines += [f"{command} --port {port} & served=$!", wait, 'kill "$served"', 'echo "browse answered"']
        else:
            lines.append(command)
    return "\n".join(lines) + "\n"


def test_the_path_reads_the_commands_a_curator_types() -> None:
    commands = curator_commands(README.read_text(encoding="utf-8"))
    assert commands[0] == "source .venv/bin/activate"
    verbs = [command.split()[1] for command in commands if command.startswith("pbbq ")]
    assert verbs == ["audit", "verify", "trace", "diff", "browse"]
    assert commands[1].startswith("RUN=$(pbbq build --sample)")


def test_the_scoring_commands_are_ones_the_command_line_takes() -> None:
    from pbbq.flows.cli import _parser

    make_model, evaluate = curator_commands(README.read_text(encoding="utf-8"), (SCORING,))
    assert shlex.split(make_model)[:3] == ["python", "-m", "tests.fakes.tiny_lm"]
    assert (REPO_ROOT / "tests" / "fakes" / "tiny_lm.py").is_file()
    model_dir = shlex.split(make_model)[3]
    args = _parser().parse_args(shlex.split(evaluate.replace('"$RUN"', "outputs/RUN"))[1:])
    assert args.command == "evaluate" and args.release == "outputs/RUN"
    assert [f"pretrained={model_dir}," in model for model in args.models] == [True]


def test_the_readme_curator_path_runs_as_written(two_builds: tuple[Path, Path], tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    shutil.copytree(two_builds[0].parent, outputs, symlinks=True)
    before = {path.name for path in outputs.iterdir()}
    port = _free_port()
    script = shell_script(curator_commands(README.read_text(encoding="utf-8")), port)
    unset = ("PREFECT_API_URL", "PREFECT_UI_URL", "VIRTUAL_ENV")  # a curator's shell: pbbq starts its own server
    env = {name: value for name, value in os.environ.items() if name not in unset}
    env |= {"PBBQ_OUTPUTS": str(outputs), "PREFECT_HOME": str(tmp_path / "prefect-home"), "HF_HUB_OFFLINE": "1"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    result = subprocess.run(
        ["bash", "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert result.returncode == 0, f"{script}\n--- stderr ---\n{result.stderr[-4000:]}"
    [run] = [outputs / name for name in {path.name for path in outputs.iterdir()} - before]
    assert (run / "audit.html").is_file()
    assert "browse answered" in result.stdout
    # the build's output: one line per stage, no Prefect task-run lines, no link to the temporary server
    stage_lines = [line for line in result.stderr.splitlines() if re.search(r"\b\d\d_[a-z_]+ +\d+ in →", line)]
    assert len(stage_lines) == len(PIPELINE.stages)
    assert "Task run" not in result.stderr and "View at" not in result.stderr
    [names] = [line for line in stage_lines if "06_names" in line]
    # examples naming a weak name proxy are dropped from fa-names; those no name table covers are not drops
    assert "828 out, 408 dropped, 3060 not covered" in names
