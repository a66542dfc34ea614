"""A rebuild with nothing changed loads only what it uses: the LLM SDKs (a replay sends nothing), the statistics
and learning libraries of the stages it takes from the cache, and the evaluation's models stay unimported
(docs/scale.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pbbq.tasks.core.artifacts import REPO_ROOT

UNUSED = ("openai", "anthropic", "torch", "transformers", "sklearn", "scipy", "statsmodels", "matplotlib", "datasets")
"""Libraries no step of a no-change rebuild calls: the SDKs, the survey's, gate's and names' statistics, the
evaluation's and the homogenization's models, the audit's charts, the Hub's loader."""


def test_a_no_change_rebuild_imports_no_sdk_nor_a_cached_stage_s_libraries(
    two_builds: tuple[Path, Path], tmp_path: Path
) -> None:
    from prefect.settings import PREFECT_API_URL

    outputs = tmp_path / "outputs"
    for kept in (".cache", ".crawl"):  # the cache and the crawl's post store of the two builds, not their runs
        shutil.copytree(two_builds[0].parent / kept, outputs / kept)
    script = (
        "import sys\n"
        "from pbbq.flows.cli import main\n"
        f"code = main(['build', '--sample', '--outputs', {str(outputs)!r}, '--run-id', 'third'])\n"
        f"print(sorted(m for m in {UNUSED!r} if m in sys.modules))\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((outputs / "third" / "manifest.json").read_text(encoding="utf-8"))
    assert [s["folder"] for s in manifest["stages"] if not s["cached"]] == ["10_publish"]
    assert result.stdout.strip().splitlines()[-1] == "[]"
