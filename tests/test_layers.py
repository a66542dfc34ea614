"""The layers of the code (docs/architecture.md §2), as pyproject's ``[tool.importlinter]`` pins them: the real tree
keeps every contract, and a copy in which a stage imports a flow breaks the layers."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports run in ``tree``: it reads that tree's pyproject.toml and its pbbq package from the folder."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=tree, capture_output=True, text=True, encoding="utf-8", check=False
    )


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as import-linter reads it: pbbq/ with its links to flows/ and tasks/, and pyproject.toml."""
    tree = tmp_path_factory.mktemp("layers")
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("flows", "tasks"):
        shutil.copytree(REPO / folder, tree / folder, ignore=ignore)
    shutil.copytree(REPO / "pbbq", tree / "pbbq", symlinks=True, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", tree)
    return tree


def test_the_tree_keeps_its_layers() -> None:
    result = _lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_copy_reads_its_own_package(copy: Path) -> None:
    """The copy, unchanged, passes: a failure below comes from the edit, not from the copy."""
    assert (copy / "pbbq" / "tasks").is_symlink()
    result = _lint(copy)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_stage_importing_a_flow_breaks_the_layers(copy: Path) -> None:
    stage = copy / "tasks" / "instantiate.py"
    source = stage.read_text(encoding="utf-8")
    stage.write_text(source + "\nfrom ..flows.config import load_config  # noqa: E402\n", encoding="utf-8")
    try:
        result = _lint(copy)
    finally:
        stage.write_text(source, encoding="utf-8")
    assert result.returncode != 0
    assert "tasks never import flows BROKEN" in result.stdout
    assert "pbbq.tasks.instantiate -> pbbq.flows.config" in result.stdout
