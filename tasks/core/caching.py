"""How a stage decides it need not run again (docs/architecture.md §5): a Prefect cache policy on the stage's inputs
and its code.

Prefect's own ``INPUTS + TASK_SOURCE`` hashes DataFrames by pickling their columns, which is not stable for
Arrow-backed strings, and it hashes only the task function's own lines, not the helpers it calls. This policy
hashes each table by its parquet bytes and each parameter set by its fields, and the code by the source of the
stage's module and of every project module it imports, directly or through others (:func:`module_closure`), with
the data files beside them (:func:`data_files`), so editing any rule a stage uses, in whatever module or word list
it lives, invalidates exactly the stages that use it.
"""

from __future__ import annotations

import ast
import dataclasses
import glob
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from prefect import task
from prefect.cache_policies import NO_CACHE, CachePolicy
from prefect.context import TaskRunContext

from .artifacts import REPO_ROOT, parquet_bytes, sha256_file

PROJECT_PACKAGE = "pbbq"
"""The package whose modules are the project's own code (the rest is libraries, pinned by version); its
subpackages are the repository's top folders (``pbbq.tasks`` is ``tasks/``, see ``pbbq/__init__.py``)."""


def input_digest(value: Any) -> Any:
    """A JSON-able, content-derived stand-in for a task input."""
    if isinstance(value, pd.DataFrame):
        table = pa.Table.from_pandas(value, preserve_index=False)
        return {"table": hashlib.sha256(parquet_bytes(table.replace_schema_metadata(None))).hexdigest()}
    if hasattr(value, "cache_identity"):
        return {type(value).__name__: input_digest(value.cache_identity())}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {type(value).__name__: input_digest(dataclasses.asdict(value))}
    if isinstance(value, dict):
        return {str(k): input_digest(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [input_digest(v) for v in value]
    if isinstance(value, Path):
        return {"file": str(value), "sha256": sha256_file(value) if value.is_file() else None}
    return value


def _module_file(name: str, root: Path) -> Path | None:
    """The source file of a project module ``name`` under ``root`` (None for a library)."""
    package, *path = name.split(".")
    if package != PROJECT_PACKAGE:
        return None
    base = root.joinpath(*path) if path else root / PROJECT_PACKAGE
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path, name: str) -> set[str]:
    """The modules a source file imports (``from a import b`` counts ``a`` and ``a.b``, which may be a module)."""
    found: set[str] = set()
    package = name.rsplit(".", 1)[0] if path.name != "__init__.py" else name
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
        elif path.name == "__init__.py" and isinstance(node, ast.Attribute) and node.attr == "iter_modules":
            # a package that finds its modules at run time (pkgutil.iter_modules: the languages) uses them all
            found |= {f"{name}.{module.stem}" for module in path.parent.glob("*.py") if module.name != "__init__.py"}
    return found


def data_files(path: Path) -> list[Path]:
    """The data a module reads beside it, named as the module is: ``fa.toml`` beside ``fa.py``, or the files of a
    ``fa/`` folder that is not a package."""
    folder = path.with_suffix("")
    files = [file for file in path.parent.glob(f"{glob.escape(path.stem)}.*") if file.suffix not in (".py", ".pyc")]
    if folder.is_dir() and not (folder / "__init__.py").exists():
        files += [file for file in folder.rglob("*") if file.is_file() and "__pycache__" not in file.parts]
    return sorted(files)


def module_closure(name: str, root: Path = REPO_ROOT) -> dict[str, Path]:
    """Every project module that module ``name`` imports, directly or indirectly, with itself: name → file."""
    closure: dict[str, Path] = {}
    pending = [name]
    while pending:
        current = pending.pop()
        path = _module_file(current, root)
        if path is None or current in closure:
            continue
        closure[current] = path
        pending += sorted(_imports(path, current))
    return dict(sorted(closure.items()))


def stage_code_hash(fn: Callable[..., Any], root: Path = REPO_ROOT) -> str:
    """sha256 of the source of the module that defines ``fn`` and of every project module it imports, each with
    its :func:`data_files` (a language's word lists)."""
    digest = hashlib.sha256()
    for name, path in module_closure(fn.__module__, root).items():
        digest.update(name.encode() + b"\0" + path.read_bytes())
        for data in data_files(path):
            digest.update(data.relative_to(path.parent).as_posix().encode() + b"\0" + data.read_bytes())
    return digest.hexdigest()


@dataclass
class StageInputsAndCode(CachePolicy):
    """Cache key = sha256(stage code, content of every input). ``known``: inputs whose content hash the caller
    already has (a table another stage wrote, by the sha256 of its parquet file in the run), so that a rebuild
    does not serialize the large tables again only to key them."""

    known: Mapping[str, Any] = field(default_factory=dict)

    def compute_key(
        self,
        task_ctx: TaskRunContext,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        digests = {
            name: {"sha256": self.known[name]} if name in self.known else input_digest(value)
            for name, value in (inputs or {}).items()
        }
        payload = {"code": stage_code_hash(task_ctx.task.fn), "inputs": digests}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def stage_task(fn: Callable[..., Any], cached: bool = True, known: Mapping[str, Any] | None = None) -> Any:
    """The thin Prefect task around a stage function: cached on inputs + code (``known``: the content hashes of
    inputs already hashed, see :class:`StageInputsAndCode`) with its result persisted, or, for a stage with side
    effects (publish), run every time (Prefect's ``NO_CACHE``)."""
    if not cached:
        return task(fn, name=fn.__name__, cache_policy=NO_CACHE, persist_result=False)
    policy = StageInputsAndCode(known=dict(known or {}))
    return task(fn, name=fn.__name__, cache_policy=policy, persist_result=True)
