"""Stage 01, crawl: public Telegram channels and exports → scrubbed posts → candidate stereotypes → the experts'
review sheet (PBBQ §3.2, Appendix A; docs/architecture.md, crawl).

Two steps, because one of them reads the outside world:

1. :func:`fetch_sources` reads every configured source (``crawl/sources.toml``: the paper's Appendix A channels)
   and keeps what it read under the outputs folder (``<outputs>/.crawl/<source>/``): the scrubbed posts and, for
   a channel, a cursor (the newest post id seen). A rerun fetches only the pages down to the cursor and stores no
   post twice. A channel's cursor moves only when its walk joined the posts already stored (or reached the
   channel's first post, or the source's post limit), so a walk cut short by an error leaves no gap behind. An
   export's store is replaced by what its file holds now, read whole.
   Personal data is replaced before any row exists (:mod:`pbbq.tasks.crawl.scrub`); the raw HTML is never kept. It is
   not a cached task: its input is the network.
2. :func:`crawl` (the cached task ``crawl_task``) finds candidates in the posts, collapses near-duplicates and
   writes ``posts``, ``candidates``, ``clusters`` and ``review.csv`` (:mod:`pbbq.tasks.crawl.candidates`).

A source that fails (a page that does not parse, a server that keeps refusing) is reported with its URL as a
warning and the others go on; a wrong sources file or export file stops the run with one message naming it. What
a sources file may reach is closed by default (:func:`load_sources`): channels on t.me and telegram.me, exports
under its own folder, other hosts and folders only when allowed by name.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.artifacts import REPO_ROOT, StageOutput, atomic_write_bytes, display_path, parquet_bytes, write_json
from ..core.inputs import InputError
from ..core.schemas import to_arrow
from ..core.stage import Client, Input, Resource, Stage
from . import candidates as candidates_module
from .candidates import (
    CANDIDATE,
    CLUSTER,
    PROMPT_FILE,
    STAGE_NAME,
    ClusterParams,
    GroupMatcher,
    cluster_candidates,
    lexicon_candidates,
    llm_candidates,
    load_lexicon,
    people_csv,
    placeholders_by_kind,
    review_sheet,
)
from .scrub import KINDS, scrub_field, scrub_segments
from .telegram import (
    TELEGRAM_ORIGINS,
    FetchError,
    FetchSettings,
    PageError,
    PreviewFetcher,
    RawPost,
    RecordedPages,
    host_allowed,
    page_url,
    parse_preview_page,
    preview_url,
    read_manual_export,
    read_telegram_export,
    url_host,
)

if TYPE_CHECKING:  # the LLM SDKs load only when the extractor runs
    from ..llm import LLMClient

DEFAULT_SOURCES = REPO_ROOT / "crawl" / "sources.toml"
DEFAULT_LEXICON = REPO_ROOT / "annotations" / "lexicon" / "lexicon.csv"
SOURCE_KINDS = ("telegram", "telegram_export", "manual")
"""``telegram``: a public channel's web preview; ``telegram_export``: a Telegram Desktop ``result.json``;
``manual``: a CSV/JSON export of posts from a source with no public pages (X, Instagram)."""
SKIPPED = "no crawl sources configured: set [crawl] sources to a sources file (crawl/sources.toml lists the paper's"
SKIPPED += " Appendix A channels)"

POST = pa.schema(
    [
        ("post_key", pa.string()),
        ("source", pa.string()),
        ("kind", pa.string()),
        ("post_id", pa.string()),
        ("date", pa.string()),
        ("text", pa.string()),
        ("views", pa.int64()),
        ("forwarded_from", pa.string()),
    ]
)
"""A crawled post, scrubbed: ``post_key`` is ``<source>/<post_id>``; ``text`` is normalised line by line, with
its line breaks, personal data replaced by ``[HANDLE]``, ``[PHONE]``, ``[EMAIL]``, ``[URL]``, ``[NAME]``,
``[ACCOUNT]``; ``forwarded_from`` is a public channel's name, ``[NAME]`` for a person, or empty."""
DROPPED_POST = POST.append(pa.field("reason", pa.string()))
"""A post that gave no candidate (``no_candidate_in_post``): kept whole in ``01_crawl/dropped``."""


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
        paths = {
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


@dataclass(frozen=True)
class Source:
    name: str
    kind: str
    url: str
    max_posts: int
    file: Path | None = None


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _allowed_list(path: Path, raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError(path, None, f"{key} must be a list of non-empty strings, not {value!r}")
    return tuple(value)


def load_sources(
    path: Path, default_max_posts: int = 1000, allowed_hosts: tuple[str, ...] = (), allowed_paths: tuple[str, ...] = ()
) -> list[Source]:
    """The ``[[source]]`` entries of a sources file: name (a safe folder name, unique), kind, url, optional
    max_posts (a channel's) and, for the export kinds, file (relative to the sources file).

    What a source may reach is closed by default: a channel's ``url`` is on ``https://t.me`` or
    ``https://telegram.me`` unless its host is named in ``allowed_hosts`` (the file's top-level list, or the
    configuration's); an export ``file`` lies under the sources file's folder unless under a folder named in
    ``allowed_paths`` (the file's, relative to it, or the configuration's)."""
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
        if kind not in SOURCE_KINDS:
            raise InputError(path, None, f"{where}: kind {kind!r} is not one of {', '.join(SOURCE_KINDS)}")
        if not url:
            raise InputError(path, None, f"{where}: url is empty")
        if kind == "telegram":
            try:
                url = preview_url(url)
            except ValueError as exc:
                raise InputError(path, None, f"{where}: {exc}") from None
            if not host_allowed(url, hosts):
                raise InputError(
                    path,
                    None,
                    f"{where}: url {url} is not on {' or '.join(TELEGRAM_ORIGINS)}; to crawl another host, name it "
                    f"in allowed_hosts (this file's or [crawl]'s), e.g. allowed_hosts = [\"{url_host(url)}\"]",
                )
        elif "max_posts" in entry:
            raise InputError(path, None, f"{where}: max_posts limits a channel's walk; an export is read whole")
        max_posts = entry.get("max_posts", default_max_posts)
        if not isinstance(max_posts, int) or max_posts < 1:
            raise InputError(path, None, f"{where}: max_posts must be a whole number >= 1")
        file = (path.parent / entry["file"]).resolve() if entry.get("file") else None
        if kind == "telegram_export" and file is None:
            raise InputError(path, None, f"{where}: a telegram_export source needs file (its result.json)")
        if file is not None and not any(file.is_relative_to(root) for root in roots):
            raise InputError(
                path,
                None,
                f"{where}: file {file} is outside {roots[0]}, the sources file's folder; to read it, name its "
                "folder in allowed_paths (this file's or [crawl]'s)",
            )
        sources.append(Source(name, kind, url, max_posts, file))
    return sources


# --- what a crawl keeps between runs -------------------------------------------------------------------------


def _post_order(frame: pd.DataFrame) -> pd.DataFrame:
    numeric = pd.to_numeric(frame["post_id"], errors="coerce")
    return (
        frame.assign(_n=numeric)
        .sort_values(["source", "_n", "post_id"], na_position="last")
        .drop(columns="_n")
        .reset_index(drop=True)
    )


def empty_posts() -> pd.DataFrame:
    return POST.empty_table().to_pandas()


class SourceStore:
    """``<state>/<source>/posts.parquet`` (scrubbed posts) and ``cursor.json`` (the newest post id seen)."""

    def __init__(self, folder: Path) -> None:
        """Refuses a store that is a symbolic link (the ``.crawl`` folder, the source's folder or a file in it):
        a crawl reads and writes its own folder under the outputs folder, never where a link points."""
        for path in (folder.parent, folder, folder / "posts.parquet", folder / "cursor.json"):
            if path.is_symlink():
                raise InputError(
                    path,
                    None,
                    "is a symbolic link; a crawl store is a folder of its own under the outputs folder: "
                    "remove the link (the next crawl fetches the source again)",
                )
        self.folder = folder

    def posts(self) -> pd.DataFrame:
        path = self.folder / "posts.parquet"
        return pq.read_table(path).to_pandas() if path.is_file() else empty_posts()

    def cursor(self) -> int | None:
        path = self.folder / "cursor.json"
        return int(json.loads(path.read_text())["newest_post_id"]) if path.is_file() else None

    def save(self, posts: pd.DataFrame, cursor: int | None, url: str) -> None:
        """Posts first, then the cursor: a run killed between the two refetches, and stores nothing twice."""
        atomic_write_bytes(self.folder / "posts.parquet", parquet_bytes(to_arrow(_post_order(posts), POST, "posts")))
        if cursor is not None:
            updated = datetime.now(UTC).isoformat(timespec="seconds")
            write_json(self.folder / "cursor.json", {"newest_post_id": cursor, "url": url, "updated": updated})


# --- fetching ------------------------------------------------------------------------------------------------


@dataclass
class ChannelWalk:
    posts: dict[int, RawPost] = field(default_factory=dict)
    pages: int = 0
    on_pages: int = 0
    joined: bool = False
    """The walk reached the cursor, the channel's first post or the post limit: the cursor may move."""
    limited: bool = False
    error: str = ""
    problems: list[str] = field(default_factory=list)


def walk_channel(fetcher: PreviewFetcher, source: Source, cursor: int | None) -> ChannelWalk:
    """Read a channel's preview pages from the newest down to the cursor (or its first post, or the limit)."""
    walk = ChannelWalk()
    url, before = source.url, None
    while True:
        try:
            page = parse_preview_page(fetcher.get(url), url)
        except (FetchError, PageError) as exc:
            walk.error = str(exc)
            return walk
        finally:
            walk.pages += 1
        walk.problems.extend(page.problems)
        walk.on_pages += len(page.posts)
        for post in page.posts:
            if cursor is None or int(post.post_id) > cursor:
                walk.posts[int(post.post_id)] = post
        if len(walk.posts) >= source.max_posts:
            for post_id in sorted(walk.posts)[: len(walk.posts) - source.max_posts]:
                del walk.posts[post_id]
            walk.limited = walk.joined = True
            return walk
        reached = cursor is not None and any(int(post.post_id) <= cursor for post in page.posts)
        if reached or page.before is None:
            walk.joined = True
            return walk
        if before is not None and page.before >= before:
            walk.error = f"{url}: the 'load more' link does not go back (before={page.before}); stopped"
            return walk
        before = page.before
        url = page_url(source.url, before)


def scrub_post(source: Source, post: RawPost, counts: Counter[str]) -> dict[str, Any]:
    """The row of a post: text and forward's origin scrubbed; the signature and the raw HTML never read."""
    scrubbed = scrub_segments(post.segments)
    counts.update(scrubbed.counts)
    forwarded = scrub_field(*post.forwarded_from, counts) if post.forwarded_from else ""
    return {
        "post_key": f"{source.name}/{post.post_id}",
        "source": source.name,
        "kind": source.kind,
        "post_id": str(post.post_id),
        "date": post.date,
        "text": scrubbed.text,
        "views": post.views,
        "forwarded_from": forwarded,
    }


@dataclass
class FetchResult:
    posts: pd.DataFrame
    """Every stored post of every configured source, scrubbed, in source and id order."""
    report: dict[str, Any]
    """Merged into the stage's report.json: ``fetch`` (per source and totals), ``warnings``, ``skipped``."""
    files: dict[str, Path] = field(default_factory=dict)
    """Input files of this crawl (sources file, exports), to record in the manifest."""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(parquet_bytes(to_arrow(self.posts, POST, "posts"))).hexdigest()


def configured_sources(params: CrawlParams) -> list[Source]:
    """The sources of ``params.sources`` with the configuration's allowed hosts and folders (none when no
    sources file is configured): a command checks them before it starts a run."""
    if not params.sources:
        return []
    return load_sources(Path(params.sources), params.max_posts, params.allowed_hosts, params.allowed_paths)


def _text_length(post: RawPost) -> int:
    return sum(len(text) for text, _ in post.segments)


def fetch_sources(
    params: CrawlParams, state: Path, transport: httpx.BaseTransport | None = None, log: Any = None
) -> FetchResult:
    """Read every source of ``params.sources`` into the store under ``state`` and return all stored posts.

    A channel's store grows: the posts above its cursor are added. An export's store is what its file holds
    now: a post gone from the file is gone from the store (counted as ``posts_removed``). A post whose text is
    longer than ``max_post_chars`` is left out with a warning naming its file (or page) and id."""
    if not params.sources:
        return FetchResult(empty_posts(), {"skipped": True, "skip_reason": SKIPPED, "fetch": {}, "warnings": []})
    sources_path = Path(params.sources)
    sources = configured_sources(params)
    stores = {source.name: SourceStore(state / source.name) for source in sources}  # every link refused first
    files = {"crawl_sources": sources_path}
    if transport is None and params.recorded_pages:
        transport = RecordedPages(Path(params.recorded_pages))
    per_source, warnings, frames = [], [], []
    totals: Counter[str] = Counter()
    scrubbed: Counter[str] = Counter()
    with PreviewFetcher(params.fetch_settings(), transport) as fetcher:
        for source in sources:
            store = stores[source.name]
            stored = store.posts()
            known = set(stored["post_id"])
            entry: dict[str, Any] = {"source": source.name, "kind": source.kind, "url": source.url}
            cursor = store.cursor()
            raw: list[RawPost]
            if source.kind == "telegram":
                walk = walk_channel(fetcher, source, cursor)
                raw = [walk.posts[i] for i in sorted(walk.posts)]
                entry.update(pages=walk.pages, limited=walk.limited, problems=walk.problems, cursor_before=cursor)
                if walk.error:
                    entry["error"] = walk.error
                    warnings.append(f"{source.name}: {walk.error} (cursor kept at {cursor})")
                if walk.limited and cursor is not None:
                    warnings.append(
                        f"{source.name}: stopped at max_posts={source.max_posts} before reaching the "
                        f"posts stored last time; raise max_posts to fetch the posts in between"
                    )
                warnings.extend(f"{source.name}: {problem}" for problem in walk.problems)
                seen_on_pages = walk.on_pages - len(raw)
                newest = max(walk.posts, default=None)
                if walk.joined and newest is not None:
                    cursor = max(newest, cursor or newest)
            elif source.file is None:
                entry["skipped"] = "no export file: this source has no public pages; export its posts (CSV/JSON) "
                entry["skipped"] += "and set file"
                per_source.append(entry)
                frames.append(stored)
                continue
            else:
                reader = read_telegram_export if source.kind == "telegram_export" else read_manual_export
                raw = reader(source.file)
                files[f"crawl_export_{source.name}"] = source.file
                seen_on_pages = 0
            too_long = [post for post in raw if _text_length(post) > params.max_post_chars]
            where = display_path(source.file) if source.file is not None else source.url
            warnings.extend(
                f"{source.name}: {where}: post {post.post_id} has {_text_length(post)} characters of text, more "
                f"than max_post_chars = {params.max_post_chars}; left out"
                for post in too_long
            )
            raw = [post for post in raw if _text_length(post) <= params.max_post_chars] if too_long else raw
            new = [post for post in raw if str(post.post_id) not in known]
            counts: Counter[str] = Counter()
            if source.kind == "telegram":  # a channel's store grows by the posts above its cursor
                rows = pd.DataFrame([scrub_post(source, post, counts) for post in new], columns=POST.names)
                merged = pd.concat([stored, rows], ignore_index=True) if len(rows) else stored
                removed = 0
                if len(rows) or cursor != store.cursor():
                    store.save(merged, cursor, source.url)
            else:  # an export's store is what its file holds now
                merged = pd.DataFrame([scrub_post(source, post, counts) for post in raw], columns=POST.names)
                removed = len(known - set(merged["post_id"]))
                store.save(merged, None, source.url)
            seen = len(raw) - len(new) + seen_on_pages
            posts = {
                "posts_new": len(new),
                "posts_seen": seen,
                "posts_removed": removed,
                "posts_too_long": len(too_long),
                "posts_stored": len(merged),
            }
            entry.update(posts, scrubbed=dict(counts))
            if source.kind == "telegram":
                entry["cursor_after"] = cursor
            totals.update(posts, pages=entry.get("pages", 0))
            scrubbed.update(counts)
            per_source.append(entry)
            frames.append(merged)
            if log is not None:
                log(f"crawl {source.name}: {source_summary(entry)}")
        totals.update(requests=fetcher.requests, retries=fetcher.retries)
    posts = _post_order(pd.concat(frames, ignore_index=True)) if frames else empty_posts()
    report = {
        "skipped": False,
        "fetch": {
            "sources": per_source,
            "totals": dict(sorted(totals.items())),
            "scrubbed": {kind: scrubbed[kind] for kind in KINDS},
            "sources_file": display_path(sources_path),
            "recorded_pages": display_path(Path(params.recorded_pages)) if params.recorded_pages else None,
        },
        "warnings": warnings,
    }
    # through the schema and back: the same dtypes whether fetched now or read from the store, so the stage's
    # cache key (over the table's content) is the same for the same posts
    table = to_arrow(posts, POST, "posts").to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    return FetchResult(table, report, files)


def _removed(figures: Mapping[str, Any]) -> str:
    removed = figures.get("posts_removed", 0)
    return f"; {removed} post{'s' * (removed != 1)} removed since the last crawl" if removed else ""


def source_summary(entry: Mapping[str, Any]) -> str:
    """One source's fetch in words: what it read, what was new, what the store holds."""
    read = entry["posts_new"] + entry["posts_seen"]
    verb = "fetched" if entry["kind"] == "telegram" else "read"
    return (
        f"{verb} {read} post{'s' * (read != 1)}: {entry['posts_new']} new, {entry['posts_seen']} already stored"
        f"{_removed(entry)}; the store holds {entry['posts_stored']}"
    )


def fetch_summary(report: Mapping[str, Any], posts: int, sources: int) -> str:
    """The whole fetch in words (``pbbq crawl``'s summary): ``posts`` stored from ``sources`` sources."""
    totals = report.get("fetch", {}).get("totals", {})
    new, seen = totals.get("posts_new", 0), totals.get("posts_seen", 0)
    return (
        f"fetched {new + seen} post{'s' * (new + seen != 1)}: {new} new, {seen} already stored{_removed(totals)}; "
        f"the store holds {posts} post{'s' * (posts != 1)} from {sources} source{'s' * (sources != 1)}"
    )


# --- the stage -----------------------------------------------------------------------------------------------


def crawl(
    posts: pd.DataFrame,
    lexicon: pd.DataFrame,
    params: CrawlParams,
    client: LLMClient | None = None,
    prompt: str = "",
) -> StageOutput:
    """Candidates (lexicon and cues; the LLM extractor when ``client`` is given), their clusters and the review
    sheet of ``posts``."""
    if params.llm_extractor and client is None:
        raise ValueError("[crawl] llm_extractor = true needs the LLM client")
    candidates = lexicon_candidates(posts, GroupMatcher.from_lexicon(lexicon))
    rejected: dict[str, int] = {}
    if client is not None:
        found, rejected = llm_candidates(posts, client, prompt)
        candidates = pd.concat([candidates, found], ignore_index=True) if len(found) else candidates
    candidates = candidates.reset_index(drop=True)
    clusters, assigned = cluster_candidates(candidates, params.cluster_params())
    if len(candidates):
        candidates["cluster_id"] = assigned
    dropped = posts[~posts["post_key"].isin(candidates["post_key"])].assign(reason="no_candidate_in_post")
    without = len(dropped)
    report: dict[str, Any] = {
        "stage": STAGE_NAME,
        "parameters": params.as_report(),
        "counts": {
            "in": len(posts),
            "out": len(clusters),
            "posts": len(posts),
            "posts_with_text": int((posts["text"] != "").sum()),
            "candidates": len(candidates),
            "clusters": len(clusters),
        },
        "dropped": {"total": without, "by_reason": {"no_candidate_in_post": without} if without else {}},
        "candidates_by_method": {str(k): int(v) for k, v in sorted(candidates["method"].value_counts().items())},
        "candidates_by_category": {str(k): int(v) for k, v in sorted(candidates["category"].value_counts().items())},
        "cues": {str(k): int(v) for k, v in sorted(candidates["cues"].explode().dropna().value_counts().items())},
        "placeholders_in_posts": placeholders_by_kind(posts["text"]),
    }
    if client is not None:
        report["llm"] = client.usage(STAGE_NAME).as_dict()
        report["llm_rejected"] = rejected
        report["prompt_sha256"] = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
    return StageOutput(
        tables={"posts": posts, "candidates": candidates, "clusters": clusters, "dropped": dropped},
        schemas={"posts": POST, "candidates": CANDIDATE, "clusters": CLUSTER, "dropped": DROPPED_POST},
        report=report,
        files={"review.csv": people_csv(review_sheet(clusters))},
    )


def load_prompt() -> str:
    return PROMPT_FILE.read_text(encoding="utf-8")


def with_fetch_report(output: StageOutput, fetched: FetchResult) -> StageOutput:
    """The stage's output with this run's fetch figures in its report (``fetch``, ``warnings``, ``skipped``):
    the candidates may come from the cache, the fetch is always this run's."""
    return replace(output, report={**output.report, **fetched.report})


def crawl_counts(output: StageOutput | Mapping[str, Any]) -> dict[str, int] | None:
    """The crawl's figures for the funnel (posts, candidates, clusters), None when the crawl was skipped."""
    report = output.report if isinstance(output, StageOutput) else output
    if report.get("skipped"):
        return None
    counts = report["counts"]
    return {"crawled_posts": counts["posts"], "candidates": counts["candidates"], "clusters": counts["clusters"]}


STAGE = Stage(
    "01_crawl",
    "crawl",
    crawl,
    inputs={
        "posts": Input("posts"),
        "lexicon": Input("lexicon", load_lexicon, section="crawl", key="lexicon_path"),
        "client": Client(when=lambda p: p.llm_extractor),
        "prompt": Resource(load_prompt, when=lambda p: p.llm_extractor),
    },
    outputs={"posts": POST, "candidates": CANDIDATE, "clusters": CLUSTER, "dropped": DROPPED_POST},
    params=CrawlParams,
    ranges={"max_posts": (1, None), "timeout": (1e-9, None), "min_interval": (0, None), "max_retries": (0, 20)}
    | {"backoff": (0, None), "max_wait": (0, None), "similarity": (1e-9, 1), "ngram_min": (1, 10)}
    | {"ngram_max": (1, 10), "max_examples": (1, None)},
    drops=("dropped",),
    words=("posts", "candidate stereotypes", "posts that gave no candidate"),
    funnel={"candidates": "Candidate stereotypes"},
    request_ids=lambda out: out["candidates"]["llm_request_id"].loc[lambda ids: ids != ""],
)
"""The crawl (PBBQ §3.1): the posts the build fetched, the lexicon of ``[crawl] lexicon_path``."""
