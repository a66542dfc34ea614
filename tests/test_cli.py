"""The command line answers at once: ``pbbq --help`` and argument errors load no heavy library."""

from __future__ import annotations

import subprocess
import sys

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
