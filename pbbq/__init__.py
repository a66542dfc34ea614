"""The PBBQ builder's one namespace: ``pbbq.flows`` and ``pbbq.tasks`` are the repository's ``flows/`` and ``tasks/``
folders, so that installing the builder adds no top-level ``tasks`` or ``flows`` (docs/architecture.md §2).

An install maps the two folders into this package (pyproject's ``package-dir``). Run from a source tree that no
install maps (a mutation testing copy, ``python -m`` in a fresh checkout), the package finds them beside itself.
"""

from pathlib import Path

_SOURCE_TREE = Path(__file__).resolve().parent.parent
if (_SOURCE_TREE / "tasks" / "__init__.py").is_file() and (_SOURCE_TREE / "pyproject.toml").is_file():
    __path__.append(str(_SOURCE_TREE))
