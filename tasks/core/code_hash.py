"""The hash of a stage's code: the source of its module and of every project module it imports, directly or through
others (:func:`module_closure`), with the data files beside them (:func:`data_files`) (docs/architecture.md §5)."""

from __future__ import annotations

import ast
import functools
import glob
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..text.languages import active as active_languages
from .artifacts import REPO_ROOT, ArtifactStore

PROJECT_PACKAGE = "pbbq"
"""The package whose modules are the project's own code (the rest is libraries, pinned by version); its
subpackages are the repository's top folders (``pbbq.tasks`` is ``tasks/``, see ``pbbq/__init__.py``)."""


def _module_file(name: str, root: Path) -> Path | None:
    """The source file of a project module ``name`` under ``root`` (None for a library); found once per build
    (:func:`code_hashes_kept`): every stage's closure asks for the shared modules and their imported names."""
    kept = _KEPT_CODE.get()
    if kept is None:
        return _find_module_file(name, root)
    if (name, root) not in kept.files:
        kept.files[name, root] = _find_module_file(name, root)
    return kept.files[name, root]


def _find_module_file(name: str, root: Path) -> Path | None:
    package, *path = name.split(".")
    if package != PROJECT_PACKAGE:
        return None
    base = root.joinpath(*path) if path else root / PROJECT_PACKAGE
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    loaded = getattr(sys.modules.get(name), "__file__", None)  # found on a package's added folder (a language's)
    return Path(loaded) if loaded else None


_FINDS_MODULES = "<iter_modules>"
"""What :func:`_imports_of` adds for a source that finds modules at run time (``pkgutil.iter_modules``)."""


def _imports(path: Path, name: str) -> frozenset[str]:
    """The modules a source file imports (``from a import b`` counts ``a`` and ``a.b``, which may be a module); a
    package that finds its modules at run time (pkgutil.iter_modules: the languages) uses them all, those of the
    folders added to its search path too (a build's own languages are hashed apart, :func:`stage_code_hash`)."""
    package = name.rsplit(".", 1)[0] if path.name != "__init__.py" else name
    found = _kept_imports(path.read_text(encoding="utf-8"), package)
    if _FINDS_MODULES not in found:
        return found
    found = found - {_FINDS_MODULES}
    if path.name != "__init__.py":
        return found
    folders = [str(path.parent), *getattr(sys.modules.get(name), "__path__", [])[1:]]  # its own, then those added
    modules = (module for folder in folders for module in Path(folder).glob("*.py"))
    return found | {f"{name}.{module.stem}" for module in modules if module.name != "__init__.py"}


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """The statements of a parsed source, nested ones too (an import may sit in a function), not their expressions:
    all :func:`_imports_of` needs of a source that does not name ``iter_modules``, at a fraction of ``ast.walk``."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, block, None)
            if isinstance(children, list):
                pending += children


@functools.lru_cache(maxsize=1024)
def _imports_of(source: str, package: str) -> frozenset[str]:
    """:func:`_imports` of a source text, parsed once per process (every stage's key walks the shared modules)."""
    found: set[str] = set()
    tree = ast.parse(source)
    for node in ast.walk(tree) if "iter_modules" in source else _statements(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Attribute) and node.attr == "iter_modules":
            found.add(_FINDS_MODULES)
    return frozenset(found)


def _kept_imports(source: str, package: str) -> frozenset[str]:
    """:func:`_imports_of`, kept in the build's content store (:func:`code_hashes_kept`) by the source's sha256 and
    its package, so a build parses only the sources no build before it parsed: parsing them was a third of a
    no-change rebuild's cache keys."""
    kept = _KEPT_CODE.get()
    if kept is None or kept.store is None:
        return _imports_of(source, package)
    key = json.dumps(["imports of a source", hashlib.sha256(source.encode("utf-8")).hexdigest(), package])
    if key not in kept.imports:
        digest = kept.store.memo(key, lambda: json.dumps(sorted(_imports_of(source, package))).encode("utf-8"))
        kept.imports[key] = frozenset(json.loads(kept.store.read(digest)))
    return kept.imports[key]


def data_files(path: Path) -> list[Path]:
    """The data a module reads beside it, named as the module is: ``fa.toml`` beside ``fa.py``, or the files of a
    ``fa/`` folder that is not a package."""
    folder = path.with_suffix("")
    files = [file for file in path.parent.glob(f"{glob.escape(path.stem)}.*") if file.suffix not in (".py", ".pyc")]
    if folder.is_dir() and not (folder / "__init__.py").exists():
        files += [file for file in folder.rglob("*") if file.is_file() and "__pycache__" not in file.parts]
    return sorted(files)


def _kept_data_files(path: Path) -> list[Path]:
    """:func:`data_files`, found once per build (:func:`code_hashes_kept`): every stage's hash reads the modules
    they share."""
    kept = _KEPT_CODE.get()
    if kept is None:
        return data_files(path)
    if path not in kept.data:
        kept.data[path] = data_files(path)
    return kept.data[path]


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


@dataclass
class _BuildCode:
    """What a build keeps of its code while it runs (:func:`code_hashes_kept`)."""

    store: ArtifactStore | None
    hashes: dict[tuple[str, Path], str] = field(default_factory=dict)
    """:func:`stage_code_hash` by module and root."""
    files: dict[tuple[str, Path], Path | None] = field(default_factory=dict)
    """:func:`_module_file` by module name and root."""
    imports: dict[str, frozenset[str]] = field(default_factory=dict)
    """:func:`_kept_imports` by its key."""
    data: dict[Path, list[Path]] = field(default_factory=dict)
    """:func:`data_files` by module file."""


_KEPT_CODE: ContextVar[_BuildCode | None] = ContextVar("kept_code_hashes", default=None)
"""What the build that runs in this context keeps of its code (:func:`code_hashes_kept`)."""


@contextmanager
def code_hashes_kept(store: ArtifactStore | None = None) -> Iterator[None]:
    """Within it (a build), each module's :func:`stage_code_hash` and source file are found once and kept for every
    stage that asks again: the code does not change while a build runs, and every stage's key walks the shared
    modules; with ``store``, the imports of each source are kept there for the builds after it
    (:func:`_kept_imports`). Prefect's thread runner copies the context into the threads that compute the stages'
    keys."""
    token = _KEPT_CODE.set(_BuildCode(store))
    try:
        yield
    finally:
        _KEPT_CODE.reset(token)


def stage_code_hash(fn: Callable[..., Any], root: Path = REPO_ROOT) -> str:
    """sha256 of the source of the module that defines ``fn`` and of every project module it imports, each with
    its :func:`data_files` (a language's word lists), and of the files of the languages the build adds (data its
    stages read, :attr:`pbbq.tasks.text.languages.Languages.fingerprint`); kept for the build inside
    :func:`code_hashes_kept`."""
    kept = _KEPT_CODE.get()
    if kept is not None and (fn.__module__, root) in kept.hashes:
        return kept.hashes[fn.__module__, root]
    digest = hashlib.sha256()
    for name, path in module_closure(fn.__module__, root).items():
        digest.update(name.encode() + b"\0" + path.read_bytes())
        for data in _kept_data_files(path):
            digest.update(data.relative_to(path.parent).as_posix().encode() + b"\0" + data.read_bytes())
    added = active_languages().fingerprint
    if added:
        digest.update(b"languages\0" + added.encode())
    if kept is not None:
        kept.hashes[fn.__module__, root] = digest.hexdigest()
    return digest.hexdigest()
