"""The crawl's sources: the ``[crawl]`` parameters (:class:`CrawlParams`) and the sources file they name
(``crawl/sources.toml``: the paper's Appendix A channels), read by :func:`load_sources`. What a sources file may
reach is closed by default: channels on t.me and telegram.me, exports under its own folder, other hosts and
folders only when allowed by name.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..core.artifacts import REPO_ROOT
from ..core.inputs import InputError
from ..core.run_folder import display_path
from . import candidates as candidates_module
from .candidates import ClusterParams
from .kinds import SOURCE_KINDS, Source
from .telegram import FetchSettings

DEFAULT_SOURCES = REPO_ROOT / "crawl" / "sources.toml"
DEFAULT_LEXICON = REPO_ROOT / "annotations" / "lexicon" / "lexicon.csv"


@dataclass(frozen=True)
class CrawlParams:
    """The ``[crawl]`` section of a build configuration."""

    sources: str = ""
    """The sources file (``crawl/sources.toml``); empty: the stage is skipped and says so."""
    lexicon: str = ""
    """The group terms per category; empty: ``annotations/lexicon/lexicon.csv``."""
    recorded_pages: str = ""
    """A folder of recorded preview pages that answers every request instead of the network (the sample)."""
    max_posts: int = 1000
    """Posts read per source and run, unless the source sets its own ``max_posts``."""
    user_agent: str = FetchSettings.user_agent
    timeout: float = FetchSettings.timeout
    min_interval: float = FetchSettings.min_interval
    max_retries: int = FetchSettings.max_retries
    backoff: float = FetchSettings.backoff
    max_wait: float = FetchSettings.max_wait
    """How the preview pages are fetched: :class:`~pbbq.tasks.crawl.telegram.FetchSettings`."""
    similarity: float = ClusterParams.similarity
    ngram_min: int = ClusterParams.ngram_min
    ngram_max: int = ClusterParams.ngram_max
    max_examples: int = ClusterParams.max_examples
    """How candidates are clustered: :class:`~pbbq.tasks.crawl.candidates.ClusterParams`."""
    llm_extractor: bool = False
    """Also ask the configured LLM for the stereotypes of every post (prompts/extract_stereotypes.fa.txt)."""
    allowed_hosts: tuple[str, ...] | list[str] = ()
    """Hosts besides ``https://t.me`` and ``https://telegram.me`` that a channel's ``url`` may name, each by name
    (``host`` or ``host:port``, as in the address); a sources file may add its own (``allowed_hosts``)."""
    allowed_paths: tuple[str, ...] | list[str] = ()
    """Folders besides the sources file's own from which an export ``file`` may be read."""
    max_post_chars: int = 65_536
    """A post with more characters of text is left out, with a warning naming its file (or page) and id."""

    def __post_init__(self) -> None:
        for name in ("allowed_hosts", "allowed_paths"):
            value = getattr(self, name)
            if not isinstance(value, list | tuple) or not all(
                isinstance(v, str) and v.strip() and "\0" not in v for v in value
            ):
                raise ValueError(f"{name} must be a list of non-empty strings (no NUL), not {value!r}")
            object.__setattr__(self, name, tuple(value))
        if self.max_post_chars < 1:
            raise ValueError(f"max_post_chars must be >= 1, not {self.max_post_chars}")
        if self.max_posts < 1 or self.max_retries < 0 or self.max_examples < 1:
            raise ValueError("max_posts and max_examples must be >= 1, max_retries >= 0")
        if self.timeout <= 0 or self.min_interval < 0 or self.backoff < 0 or self.max_wait < 0:
            raise ValueError("timeout must be > 0; min_interval, backoff and max_wait >= 0")
        if not 0 < self.similarity <= 1:
            raise ValueError(f"similarity must be in (0, 1], not {self.similarity}")
        if not 1 <= self.ngram_min <= self.ngram_max:
            raise ValueError("ngram_min and ngram_max must satisfy 1 <= ngram_min <= ngram_max")
        if not self.user_agent.strip():
            raise ValueError("user_agent must not be empty: say who crawls and why")

    def relative_to(self, folder: Path) -> CrawlParams:
        """The paths resolved against ``folder`` (the configuration's folder)."""
        paths: dict[str, Any] = {  # replace's keywords: mypy checks a dict's value type against every field's
            name: str((folder / value).resolve())
            for name in ("sources", "lexicon", "recorded_pages")
            if (value := getattr(self, name))
        }
        allowed = tuple(str((folder / value).resolve()) for value in self.allowed_paths)
        return replace(self, **paths, allowed_paths=allowed)

    def as_report(self) -> dict[str, Any]:
        """The parameters for a report or the manifest, paths as the manifest shows them."""
        paths = ("sources", "lexicon", "recorded_pages")
        shown = {k: display_path(Path(v)) for k in paths if (v := getattr(self, k))}
        return asdict(self) | shown | {"allowed_paths": [display_path(Path(v)) for v in self.allowed_paths]}

    @property
    def lexicon_path(self) -> Path:
        return Path(self.lexicon) if self.lexicon else DEFAULT_LEXICON

    def fetch_settings(self) -> FetchSettings:
        names = {f.name for f in fields(FetchSettings)}
        return FetchSettings(**{k: v for k, v in asdict(self).items() if k in names})

    def cluster_params(self) -> ClusterParams:
        return ClusterParams(self.similarity, self.ngram_min, self.ngram_max, self.max_examples)

    def cache_identity(self) -> dict[str, Any]:
        """What the candidates depend on (not where the posts came from or how politely they were fetched),
        and the source of the module of their rules: the stage cache hashes only this module's own source."""
        rules = hashlib.sha256(Path(candidates_module.__file__).read_bytes()).hexdigest()
        return {**asdict(self.cluster_params()), "llm_extractor": self.llm_extractor, "rules": rules}


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _allowed_list(path: Path, raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError(path, None, f"{key} must be a list of non-empty strings, not {value!r}")
    return tuple(value)


def load_sources(
    path: Path, default_max_posts: int = 1000, allowed_hosts: Sequence[str] = (), allowed_paths: Sequence[str] = ()
) -> list[Source]:
    """The ``[[source]]`` entries of a sources file: name (a safe folder name, unique), kind (one of
    :data:`~pbbq.tasks.crawl.kinds.SOURCE_KINDS`), url, optional max_posts (a kind with a cursor: a channel's)
    and, for the export kinds, file (relative to the sources file).

    What a source may reach is closed by default: a paged kind's ``url`` is on its origins (a channel's on
    ``https://t.me`` or ``https://telegram.me``) unless its host is named in ``allowed_hosts`` (the file's
    top-level list, or the configuration's); an export ``file`` lies under the sources file's folder unless under
    a folder named in ``allowed_paths`` (the file's, relative to it, or the configuration's)."""
    if not path.is_file():
        raise InputError(path, None, "sources file not found")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"not valid TOML ({exc})") from None
    unknown = sorted(set(raw) - {"source", "allowed_hosts", "allowed_paths"})
    if unknown:
        raise InputError(
            path,
            None,
            f"unknown top-level key(s) {', '.join(unknown)}; expected [[source]] entries, allowed_hosts, allowed_paths",
        )
    hosts = (*allowed_hosts, *_allowed_list(path, raw, "allowed_hosts"))
    roots = [path.parent.resolve()]
    roots += [Path(folder).resolve() for folder in allowed_paths]
    roots += [(path.parent / folder).resolve() for folder in _allowed_list(path, raw, "allowed_paths")]
    sources: list[Source] = []
    for number, entry in enumerate(raw.get("source", []), 1):
        where = f"[[source]] number {number}"
        extra = sorted(set(entry) - {"name", "kind", "url", "max_posts", "file"})
        if extra:
            raise InputError(path, None, f"{where}: unknown key(s) {', '.join(extra)}")
        name, kind, url = (str(entry.get(key, "")) for key in ("name", "kind", "url"))
        if not _NAME.fullmatch(name):
            raise InputError(path, None, f"{where}: name {name!r} must be letters, digits, _ . - (a folder name)")
        if any(source.name == name for source in sources):
            raise InputError(path, None, f"{where}: name {name!r} is used twice")
        where = f"{where} ({name})"
        source_kind = SOURCE_KINDS.get(kind)
        if source_kind is None:
            raise InputError(path, None, f"{where}: kind {kind!r} is not one of {', '.join(SOURCE_KINDS)}")
        if not url:
            raise InputError(path, None, f"{where}: url is empty")
        try:
            url = source_kind.source_url(url, hosts)
        except ValueError as exc:
            raise InputError(path, None, f"{where}: {exc}") from None
        if not source_kind.has_cursor and "max_posts" in entry:
            raise InputError(path, None, f"{where}: max_posts limits a channel's walk; an export is read whole")
        max_posts = entry.get("max_posts", default_max_posts)
        if not isinstance(max_posts, int) or max_posts < 1:
            raise InputError(path, None, f"{where}: max_posts must be a whole number >= 1")
        file = (path.parent / entry["file"]).resolve() if entry.get("file") else None
        if source_kind.needs_file and file is None:
            raise InputError(path, None, f"{where}: a {kind} source needs file ({source_kind.needs_file})")
        if file is not None and not any(file.is_relative_to(root) for root in roots):
            raise InputError(
                path,
                None,
                f"{where}: file {file} is outside {roots[0]}, the sources file's folder; to read it, name its "
                "folder in allowed_paths (this file's or [crawl]'s)",
            )
        sources.append(Source(name, kind, url, max_posts, file))
    return sources


def configured_sources(params: CrawlParams) -> list[Source]:
    """The sources of ``params.sources`` with the configuration's allowed hosts and folders (none when no
    sources file is configured): a command checks them before it starts a run."""
    if not params.sources:
        return []
    return load_sources(Path(params.sources), params.max_posts, params.allowed_hosts, params.allowed_paths)
