"""Issue 38: docs/architecture.md §2 draws the layers pyproject's ``[tool.importlinter]`` pins, the flows' and the
tasks', top to bottom, with the same ``:`` (may import each other) and ``|`` (may not) between siblings."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pinned() -> list[str]:
    """The layers of the flows' and the tasks' contracts, in order."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    by_container = {
        tuple(c.get("containers", ())): c["layers"] for c in contracts["contracts"] if c["type"] == "layers"
    }
    return [*by_container[("pbbq.flows",)], *by_container[("pbbq.tasks",)]]


def _drawn() -> list[str]:
    """The layers of §2's drawing: its blocks between the ``│`` lines, without their notes and the side labels."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawing = text.split("The layers, pinned by import-linter", 1)[1].split("```")[1]
    drawing = re.sub(r"\([^)]*\)", "", drawing)
    blocks = [" ".join(block.split()) for block in re.split(r"^\s*│\s*$", drawing, flags=re.MULTILINE)]
    return [re.sub(r"^(flows|tasks) ", "", block) for block in blocks if block]


def test_the_drawn_layers_are_the_pinned_ones() -> None:
    assert _drawn() == _pinned()
