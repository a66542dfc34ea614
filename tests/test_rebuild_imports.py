"""A rebuild with nothing changed loads only what it uses: the LLM SDKs (a replay sends nothing), the statistics
and learning libraries of the stages it takes from the cache, and the evaluation's models stay unimported
(docs/scale.md)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pbbq.tasks.core.artifacts import REPO_ROOT

UNUSED = (
    *("openai", "anthropic", "torch", "transformers", "sklearn", "scipy", "statsmodels", "matplotlib", "datasets"),
    "sacrebleu",
)
"""Libraries no step of a no-change rebuild calls: the SDKs, the survey's, gate's and names' statistics, the
evaluation's and the homogenization's models, the audit's charts, the Hub's loader; the crawl's page parser and
retries, and translate's and diversity's scores."""


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


def _imports_outside_the_lock(path: Path) -> list[str]:
    """``file:line`` of each import of a third-party module made inside a function and not inside
    ``with one_import_at_a_time():``."""
    found: list[str] = []

    def visit(node: ast.AST, in_function: bool, locked: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom) and in_function and not locked:
                relative = isinstance(child, ast.ImportFrom) and child.level > 0
                module = child.module if isinstance(child, ast.ImportFrom) else child.names[0].name
                if not relative and (module or "").split(".")[0] not in sys.stdlib_module_names:
                    found.append(f"{path.relative_to(REPO_ROOT)}:{child.lineno}")
            holds = isinstance(child, ast.With) and any(
                isinstance(item.context_expr, ast.Call)
                and getattr(item.context_expr.func, "id", "") == "one_import_at_a_time"
                for item in child.items
            )
            visit(
                child,
                in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda),
                locked or holds,
            )

    visit(ast.parse(path.read_text(encoding="utf-8")), in_function=False, locked=False)
    return found


def test_every_import_made_inside_a_function_of_the_stages_and_the_audit_holds_the_import_lock() -> None:
    """Two task threads importing scipy at once failed a deployment run (``cannot import name 'minkowski' from
    partially initialized module``): tasks/core/imports.py."""
    files = [p for root in ("tasks", "flows/audit") for p in sorted((REPO_ROOT / root).rglob("*.py"))]
    assert len(files) > 40
    assert [where for path in files for where in _imports_outside_the_lock(path)] == []


def test_a_lazy_import_waits_while_another_thread_imports() -> None:
    """While one thread holds the lock, the survey's margin (which imports scipy) waits; it runs once released."""
    script = (
        "import sys, threading, time\n"
        "from pbbq.tasks import imports\n"
        "from pbbq.tasks.survey_filter import cochran_margin\n"
        "assert 'scipy.stats' not in sys.modules\n"
        "margins = []\n"
        "with imports.one_import_at_a_time():\n"
        "    worker = threading.Thread(target=lambda: margins.append(cochran_margin(1000, 90_000_000)))\n"
        "    worker.start()\n"
        "    time.sleep(0.5)\n"
        "    print('while held:', margins, 'scipy.stats' in sys.modules)\n"
        "worker.join()\n"
        "print('after:', [round(m, 3) for m in margins])\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["while held: [] False", "after: [0.031]"]
