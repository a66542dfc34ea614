"""How a stage decides it need not run again (docs/architecture.md §5): a Prefect cache policy on the stage's inputs
and its code.

Prefect's own ``INPUTS + TASK_SOURCE`` hashes DataFrames by pickling their columns, which is not stable for
Arrow-backed strings, and it hashes only the task function's own lines, not the helpers it calls. This policy
hashes each table by its parquet bytes and each parameter set by its fields, and the code by the source of the
stage's module and of every project module it imports, directly or through others (:func:`module_closure`), with
the data files beside them (:func:`data_files`), so editing any rule a stage uses, in whatever module or word list
it lives, invalidates exactly the stages that use it.

What the cache keeps of a stage is a small record (:class:`StoredStage`): its files sit in a content-addressed
:class:`~.artifacts.ArtifactStore` and a run takes them by reference, their hashes and rows from the record; its
frames are read from the store only when a stage that runs asks for them (:class:`StoredInput`). So a rebuild
with nothing changed reads and writes no table of a cached stage. A stage whose work splits by template
(:class:`~.stage.Separable`) keeps each template's part there too, so a rebuild in which one template changed
computes that template's rows only (:func:`separated`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import glob
import hashlib
import json
import pickle
import sys
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from prefect import task
from prefect.cache_policies import NO_CACHE, CachePolicy
from prefect.context import TaskRunContext

from ..text.languages import active as active_languages
from .artifacts import REPO_ROOT, ArtifactStore, StageOutput, StoredFile, parquet_bytes, sha256_file, stage_files
from .collector import keep_long_lived
from .stage import Separable, Stage, finish

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


PICKLE = pickle.HIGHEST_PROTOCOL


class LazyTables(Mapping[str, pd.DataFrame]):
    """A stage's tables by name, each loaded from the artifact store (its pickled frame) the first time a stage that
    runs reads it; the tables of a stage this process computed are in memory from the start."""

    def __init__(
        self, frames: Mapping[str, str], store: ArtifactStore, loaded: Mapping[str, pd.DataFrame] | None = None
    ) -> None:
        self._frames, self._store, self._loaded = dict(frames), store, dict(loaded or {})
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> pd.DataFrame:
        with self._lock:
            if name not in self._loaded:
                self._loaded[name] = pickle.loads(self._store.read(self._frames[name]))
            return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._frames)

    def __len__(self) -> int:
        return len(self._frames)

    def __getstate__(self) -> dict[str, Any]:
        return {"frames": self._frames, "store": self._store}  # where the frames are, never the frames

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["frames"], state["store"])  # type: ignore[misc]


@dataclass
class StoredStage:
    """A stage's result as the cache keeps it (what Prefect persists for the stage's task): its folder's files by
    reference into the artifact store (name, sha256, rows), its report, and its tables as pickled frames, so that
    a stage taken from the cache costs a small record, and its frames are read only by a stage that runs."""

    files: tuple[StoredFile, ...]
    frames: dict[str, str]
    """Table name → sha256 of its pickled frame in the store (the frame exactly as the stage returned it)."""
    report: dict[str, Any]
    requests: str | None = None
    """sha256 of the JSON list of the LLM requests its output used (:attr:`.stage.Stage.request_ids`) in the store,
    so a run's transcript is made without its frames; None for a stage that sends none (or a record from before)."""
    sizes: dict[str, int] | None = None
    """Bytes of each frame and of the request list, by sha256: checked before the stage is taken from the cache (a
    record from before has none: their bytes are checked when read)."""
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    """This result's own id (the run that computed it made it): what a ``report.json`` made from it is kept by."""
    _tables: LazyTables | None = field(default=None, repr=False, compare=False)

    @classmethod
    def keep(cls, output: StageOutput, store: ArtifactStore, requests: Iterable[str] | None = None) -> StoredStage:
        """Put a finished stage's files and frames into ``store``, and the LLM requests it used (``requests``, None
        for a stage that sends none); its tables stay in memory for this run."""
        files = tuple(StoredFile(file.name, store.put(file.data()), file.rows) for file in stage_files(output))
        frames: dict[str, str] = {}
        sizes: dict[str, int] = {}
        for name, frame in output.tables.items():  # one pickled frame in memory at a time
            data = pickle.dumps(frame, PICKLE)
            frames[name] = store.put(data)
            sizes[frames[name]] = len(data)
        used = None
        if requests is not None:
            listed = json.dumps(sorted(set(requests))).encode("utf-8")
            used = store.put(listed)
            sizes[used] = len(listed)
        return cls(files, frames, output.report, used, sizes=sizes, _tables=LazyTables(frames, store, output.tables))

    def complete(self, store: ArtifactStore) -> bool:
        """Whether every file, frame and request list it names is in ``store`` (a store cleaned by hand may lack
        some)."""
        return all(store.has(digest) for digest in self._kept())

    def _kept(self) -> tuple[str, ...]:
        return (
            *(file.sha256 for file in self.files),
            *self.frames.values(),
            *([self.requests] if self.requests else []),
        )

    def damaged(self, store: ArtifactStore) -> list[str]:
        """What of it in ``store`` is not what it was kept as (:meth:`.artifacts.ArtifactStore.check`, each damaged
        file removed): its files hashed (a run copies them next), its frames and request list by their size (their
        bytes are checked when a stage that runs reads them). An empty list when everything is there and right,
        or missing only (:meth:`complete` says so)."""
        sizes = self.sizes or {}
        checks: list[tuple[str, int | None, bool]] = [(file.sha256, None, True) for file in self.files]
        checks += [(digest, sizes.get(digest), False) for digest in (*self.frames.values(), self.requests) if digest]
        found = (store.check(digest, size, read=read) for digest, size, read in checks if store.has(digest))
        return [problem for problem in found if problem is not None]

    def request_ids(self, store: ArtifactStore) -> list[str] | None:
        """The LLM requests its output used, as kept (None when it kept none)."""
        return None if self.requests is None else list(json.loads(store.read(self.requests)))

    def tables(self, store: ArtifactStore) -> LazyTables:
        """Its tables, each loaded from ``store`` when first read (those in memory already, as they are)."""
        if self._tables is None:
            self._tables = LazyTables(self.frames, store)
        return self._tables

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tables": None}  # the record, never the frames


@dataclass(frozen=True)
class StoredInput:
    """A stage's argument made of tables earlier stages wrote: each as (the sha256 of its file, that stage's tables,
    the table's name). The cache key takes the hashes alone, so a stage taken from the cache never loads a table;
    a stage that runs gets the frame (``stacked``: the tables stacked into one, as :class:`.stage.Tables` says)."""

    parts: tuple[tuple[str, Mapping[str, pd.DataFrame], str], ...]
    stacked: bool = False

    def cache_identity(self) -> list[str]:
        return [digest for digest, _, _ in self.parts]

    def load(self) -> pd.DataFrame:
        frames = [tables[name] for _, tables, name in self.parts]
        return pd.concat(frames, ignore_index=True) if self.stacked else frames[0]


@dataclass(eq=False)
class KeptInput:
    """A build input by the key that determines its table (its file's hash, its loader's code, the keys of the
    inputs its loader checks it against): the cache key takes the key alone, so a stage taken from the cache never
    needs the input read, and a stage that runs gets the table (:meth:`load`: read and checked once, then kept).
    An input a build has not loaded and checked before is loaded when the build starts (:meth:`loaded`), so bad
    input still stops the build before stage 01 (docs/architecture.md §5)."""

    key: str
    loader: Callable[..., Any]
    path: Path | None
    needs: tuple[KeptInput, ...] = ()
    _value: tuple[Any, ...] = field(default=(), repr=False)
    """(its table,) once loaded."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def cache_identity(self) -> dict[str, str]:
        return {"input": self.key}

    def load(self) -> Any:
        """The input's table: ``loader(path, *the needs' tables)``, called once."""
        with self._lock:
            if not self._value:
                self._value = (self.loader(self.path, *(need.load() for need in self.needs)),)
            return self._value[0]

    def loaded(self) -> bool:
        return bool(self._value)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_lock": None}  # to a Dask worker: the table if loaded, and how to load it

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock())


def loaded(value: Any) -> Any:
    """A stage's argument as the stage function takes it: the table of a :class:`StoredInput` or
    :class:`KeptInput`, anything else as it is."""
    return value.load() if isinstance(value, StoredInput | KeptInput) else value


@dataclass
class StageInputsAndCode(CachePolicy):
    """Cache key = sha256(the stage's code and the contract's, what it declares of its output, the content of
    every input). A :class:`StoredInput` is keyed by its tables' file hashes, so a rebuild does not serialize the
    large tables again only to key them."""

    code: tuple[Callable[..., Any], ...] = ()
    declared: Mapping[str, Any] = field(default_factory=dict)

    def compute_key(
        self,
        task_ctx: TaskRunContext,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        payload = {
            "code": [stage_code_hash(fn) for fn in self.code],
            "declared": self.declared,
            "inputs": {name: input_digest(value) for name, value in (inputs or {}).items()},
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _row_hashes(frame: pd.DataFrame, key: str) -> dict[str, str]:
    """Per value of ``key``: a sha256 of the Arrow schema of ``frame`` and of its rows of ``frame``, in their order
    (:func:`_feed`). The table is sorted by key once; each key's bytes are ranges of its columns' buffers, the same
    wherever its rows were."""
    if frame.empty:
        return {}
    keys = frame[key].astype(str).to_numpy()
    order = np.argsort(keys, kind="stable")
    table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None).take(order)
    table = table.combine_chunks()
    bounds = np.r_[np.flatnonzero(np.r_[True, keys[order][1:] != keys[order][:-1]]), len(keys)]
    digests = [hashlib.sha256(str(table.schema).encode("utf-8")) for _ in bounds[:-1]]
    for column in table.columns:
        _feed(digests, column.chunk(0) if column.num_chunks else pa.array([], column.type), bounds)
    return {str(keys[order[start]]): digest.hexdigest() for start, digest in zip(bounds[:-1], digests, strict=True)}


def _feed(digests: list[Any], array: pa.Array, bounds: np.ndarray) -> None:
    """Add to ``digests[i]`` the rows ``bounds[i]`` to ``bounds[i + 1]`` of ``array``: their count, validity and
    values (a string's or a list's length, then its bytes or items; a struct's fields in turn), each part's size
    given by those before it, so that different rows never give the same bytes. A type of another layout adds the
    Arrow IPC of its rows, taken into buffers of their own."""
    rows = np.diff(bounds)
    valid: np.ndarray = np.ones(len(array), dtype=np.uint8)
    if array.null_count:
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=np.uint8)
    kind = array.type
    for i, digest in enumerate(digests):
        digest.update(int(rows[i]).to_bytes(8, "little"))
        digest.update(valid[bounds[i] : bounds[i + 1]])
    if pa.types.is_null(kind):
        return
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind):
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int32 if pa.types.is_string(kind) else np.int64)
        offsets = offsets[array.offset : array.offset + len(array) + 1]
        data = array.buffers()[2]
        values = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
        lengths = np.diff(offsets).astype(np.int64)
        for i, digest in enumerate(digests):
            digest.update(lengths[bounds[i] : bounds[i + 1]])
            digest.update(values[offsets[bounds[i]] : offsets[bounds[i + 1]]])
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        offsets = array.offsets.to_numpy()
        lengths = np.diff(offsets).astype(np.int64)
        for i, digest in enumerate(digests):
            digest.update(lengths[bounds[i] : bounds[i + 1]])
        _feed(digests, array.values, offsets[bounds])
    elif pa.types.is_struct(kind):
        for field_index in range(kind.num_fields):
            _feed(digests, array.field(field_index), bounds)
    elif pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        filled = array.fill_null(False if pa.types.is_boolean(kind) else 0)
        values = np.ascontiguousarray(filled.to_numpy(zero_copy_only=False))
        for i, digest in enumerate(digests):
            digest.update(values[bounds[i] : bounds[i + 1]])
    else:
        for i, digest in enumerate(digests):
            sink = pa.BufferOutputStream()
            rows_of = pa.table({"rows": array.slice(bounds[i], rows[i]).take(np.arange(rows[i]))})
            with pa.ipc.new_stream(sink, rows_of.schema) as writer:
                writer.write_table(rows_of)
            digest.update(sink.getvalue())


def _in_key_order(pieces: list[tuple[pd.DataFrame, Collection[str] | None]], key: str) -> pd.DataFrame:
    """The rows of each frame whose key is among its wanted keys (None: every row), keys not overlapping across
    the frames, stacked in key order, each key's rows in their order: one copy into the stack and one take from it
    (a frame with no row wanted adds no rows, nor its columns' dtypes)."""
    keys = [frame[key].astype(str).to_numpy() for frame, _ in pieces]
    wanted = [
        np.ones(len(frame), dtype=bool) if values is None else pd.Series(of).isin(values).to_numpy()
        for (frame, values), of in zip(pieces, keys, strict=True)
    ]
    filled = [i for i, rows in enumerate(wanted) if rows.any()] or [0]
    stacked = pd.concat([pieces[i][0] for i in filled], ignore_index=True)
    rows = np.flatnonzero(np.concatenate([wanted[i] for i in filled]))
    order = rows[np.argsort(np.concatenate([keys[i] for i in filled])[rows], kind="stable")]
    return stacked.take(order).reset_index(drop=True)


def _by_content(value: Any) -> Any:
    """A part's argument as its key takes it: a build input's table itself (the name table checked against other
    templates is the same table: its :class:`KeptInput` key, which names the inputs it was checked against, would
    change with every template), anything else as the stage's cache key takes it."""
    if isinstance(value, KeptInput) and isinstance(value.load(), pd.DataFrame):
        return value.load()
    return value


def _kept_by_key(
    fn: Callable[..., Mapping[str, pd.DataFrame]],
    key: str,
    found: Mapping[str, Any],
    split: Mapping[str, pd.DataFrame],
    hashes: Mapping[str, Mapping[str, str]],
    others: str,
    store: ArtifactStore,
) -> tuple[dict[str, pd.DataFrame], Mapping[str, pd.DataFrame], list[str], list[str]]:
    """``fn``'s tables of every key of the ``split`` tables (their rows' :func:`_row_hashes` in ``hashes``): each
    key's taken from ``store`` when its rows, the other arguments (``others``: their digest), ``fn``'s code and this
    function's are those it was made from, the others computed in one call of ``fn`` on their rows and kept (that
    call's tables, one file). Returns every key's tables in key order (``fn``'s own when it computed every key),
    those it computed, the keys it computed and every key."""
    code = {"code": stage_code_hash(fn), "function": fn.__qualname__, "runner": stage_code_hash(separated)}
    common = json.dumps(code | {"others": others}, sort_keys=True, default=str)
    keys = sorted(set().union(*hashes.values()))
    part_keys = {value: json.dumps([common, value, [hashes[name].get(value) for name in split]]) for value in keys}
    kept = {value: store.recall(part_key) for value, part_key in part_keys.items()}
    missing = [value for value in keys if kept[value] is None]
    computed: Mapping[str, pd.DataFrame] = {}
    if missing or not keys:  # no key at all: ``fn`` gives the tables, empty
        subset = {
            name: frame[frame[key].astype(str).isin(missing)].reset_index(drop=True) for name, frame in split.items()
        }
        computed = fn(**{**found, **subset})
        batch = store.put(pickle.dumps(dict(computed), PICKLE))  # one file (one sync) for the keys of one call
        for value in missing:
            store.remember(part_keys[value], batch)
    tables = dict(computed)
    if len(missing) < len(keys):  # some kept: every key's rows, from the call that made them, in key order
        batches: dict[str, list[str]] = {}
        for value, digest in kept.items():
            if digest is not None:
                batches.setdefault(digest, []).append(value)
        pieces: list[tuple[Mapping[str, pd.DataFrame], Collection[str] | None]] = [(computed, None)] if computed else []
        for digest, values in batches.items():
            pieces.append((pickle.loads(store.read(digest)), set(values)))
        names = list(pieces[0][0])
        tables = {name: _in_key_order([(made[name], values) for made, values in pieces], key) for name in names}
    return tables, computed, missing, keys


def separated(per: Separable, arguments: Mapping[str, Any], store: ArtifactStore) -> tuple[StageOutput, dict[str, Any]]:
    """A :class:`~.stage.Separable` stage run by key: ``local``'s tables and then ``part``'s, each key's taken from
    ``store`` or computed (:func:`_kept_by_key`; ``part``'s by the key's rows of the split tables and of those
    ``spread`` makes), then ``whole`` on every part. Returns the output and what was computed: how many keys, and
    how many rows of the part's first table, of how many."""
    found = {name: loaded(value) for name, value in arguments.items()}
    others = {name: _by_content(value) for name, value in arguments.items() if name not in per.split}
    digest = json.dumps(input_digest(others), sort_keys=True, default=str)
    split = {name: found[name] for name in per.split}
    hashes = {name: _row_hashes(frame, per.key) for name, frame in split.items()}
    if per.spread is not None:
        local = _kept_by_key(per.local, per.key, found, split, hashes, digest, store)[0] if per.local else {}
        spread = dict(per.spread(**found | local))
        split |= spread
        hashes |= {name: _row_hashes(frame, per.key) for name, frame in spread.items()}
    tables, computed, missing, keys = _kept_by_key(per.part, per.key, found, split, hashes, digest, store)
    first = next(iter(tables))
    counts = {
        "key": per.key,
        "computed": len(missing),
        "of": len(keys),
        "table": first,
        "rows": [len(computed[first]) if missing else 0, len(tables[first])],
    }
    return per.whole(tables, **found), counts


def stage_task(stage: Stage, params: Any, store: ArtifactStore) -> Any:
    """The thin Prefect task around a stage: it loads the tables its :class:`StoredInput` arguments name, runs the
    stage function (a stage that splits by key, by :func:`separated`, its report's ``parts`` saying what it
    computed), completes its output by the contract (:func:`.stage.finish`) and, for a cached stage, keeps it
    in ``store`` and returns the :class:`StoredStage` that Prefect persists, keyed on the stage's code, declared
    outputs and inputs. A stage with side effects (publish) runs every time (Prefect's ``NO_CACHE``) and returns its
    :class:`StageOutput`."""

    def run(**arguments: Any) -> StoredStage | StageOutput:
        if stage.per is not None:
            computed, parts = separated(stage.per, arguments, store)
            # a stage that ran on whole tables after all says so in its own ``parts``
            output = finish(stage, dataclasses.replace(computed, report={"parts": parts} | computed.report), params)
        else:
            found = {name: loaded(value) for name, value in arguments.items()}
            output = finish(stage, stage.run(**found), params)
        keep_long_lived()
        if not stage.cached:
            return output
        return StoredStage.keep(output, store, None if stage.request_ids is None else stage.request_ids(output))

    functools.update_wrapper(run, stage.run)  # Prefect binds the stage function's own parameters
    name = stage.run.__name__
    if not stage.cached:
        return task(name=name, cache_policy=NO_CACHE, persist_result=False)(run)
    declared = {"drops": list(stage.drops), "outputs": {table: str(schema) for table, schema in stage.outputs.items()}}
    policy = StageInputsAndCode(code=(stage.run, finish), declared=declared)
    return task(name=name, cache_policy=policy, persist_result=True)(run)


def damaged_warning(folder: str, problems: Sequence[str]) -> str:
    """The manifest's warning for a stage whose kept files failed their check (:meth:`StoredStage.damaged`)."""
    return f"{folder}: computed again, its kept files failed their check: {'; '.join(problems)}"
