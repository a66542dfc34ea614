"""What the cache keeps of a stage: a small record of its files in the content store (:class:`StoredStage`), and
the tables a stage that runs reads from there (:class:`StoredInput`, :class:`KeptInput`)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .artifacts import ArtifactStore, StageOutput, StoredFile, stage_files


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
                self._loaded[name] = self._store.load_pickled(self._frames[name])
            return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._frames)

    def in_memory(self) -> list[str]:
        """The names of its tables held in memory now."""
        with self._lock:
            return list(self._loaded)

    def release(self, name: str) -> None:
        """Let go of the table ``name`` if it is held in memory: it is loaded from the store again if read again."""
        with self._lock:
            self._loaded.pop(name, None)

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
        for name, frame in output.tables.items():  # pickled straight into the store
            frames[name], size = store.put_pickled(frame)
            sizes[frames[name]] = size
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


class SharedStacks:
    """The stacked frames of the stages that read the same tables stacked (every config's examples: diversity,
    statistics, the release data), made once and shared while a stage that reads them may still run (issue 35:
    each made its own copy, two of them at once). Each reader gets a shallow copy (pandas' copy-on-write: no data
    copied, and a change one stage makes copies what it changes, never the shared frame)."""

    def __init__(self, made: Callable[[tuple[str, ...]], None] | None = None) -> None:
        """``made``: called with a frame's key once it is made (the runner lets go of what it was made from)."""
        self._frames: dict[tuple[str, ...], pd.DataFrame] = {}
        self._lock = threading.Lock()
        self._made = made

    def stacked(self, key: tuple[str, ...], make: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        """The frame stacked under ``key`` (its tables' file hashes), made by ``make()`` the first time."""
        with self._lock:
            made = key not in self._frames
            if made:
                self._frames[key] = make()
            frame = self._frames[key].copy(deep=False)
        if made and self._made is not None:
            self._made(key)
        return frame

    def release(self, key: tuple[str, ...]) -> None:
        """Let go of the frame stacked under ``key`` (made again if a stage asks for it again)."""
        with self._lock:
            self._frames.pop(key, None)

    def held(self) -> list[tuple[str, ...]]:
        """The keys of the frames held now."""
        with self._lock:
            return list(self._frames)

    def __getstate__(self) -> dict[str, Any]:
        return {}  # to a Dask worker: nothing shared, each stacks its own

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]


@dataclass(frozen=True)
class StoredInput:
    """A stage's argument made of tables earlier stages wrote: each as (the sha256 of its file, that stage's tables,
    the table's name). The cache key takes the hashes alone, so a stage taken from the cache never loads a table;
    a stage that runs gets the frame (``stacked``: the tables stacked into one, as :class:`.stage.Tables` says,
    shared through ``stacks`` with the other stages that read them stacked)."""

    parts: tuple[tuple[str, Mapping[str, pd.DataFrame], str], ...]
    stacked: bool = False
    stacks: SharedStacks | None = field(default=None, compare=False)

    def cache_identity(self) -> list[str]:
        return [digest for digest, _, _ in self.parts]

    def load(self) -> pd.DataFrame:
        if not self.stacked:
            tables, name = self.parts[0][1:]
            return tables[name]
        if self.stacks is None:
            return self._stack()
        return self.stacks.stacked(tuple(self.cache_identity()), self._stack)

    def _stack(self) -> pd.DataFrame:
        return pd.concat([tables[name] for _, tables, name in self.parts], ignore_index=True)


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
