"""The kinds of crawl source, one small class each, in one registry (:data:`SOURCE_KINDS`).

A kind says how a ``[[source]]`` entry's ``url`` is checked (:meth:`SourceKind.source_url`), how its posts are
read (:meth:`SourceKind.read`) and whether its store has a cursor (:attr:`SourceKind.has_cursor`): a kind with a
cursor is walked page by page from the newest post down to the posts stored last time and its store grows; a
kind without one is read whole and its store is what it holds now. The crawl's fetch (:mod:`.fetch`) and the
sources file's checks (:mod:`.sources`) ask the registry, never a kind by name.

- ``telegram`` (:class:`TelegramChannel`): a public channel's web preview, its pages fetched politely;
- ``telegram_export`` (:class:`TelegramExport`): a Telegram Desktop ``result.json``;
- ``manual`` (:class:`ManualExport`): a CSV/JSON export of posts from a source with no public pages (X, Instagram).

Adding a kind is one class registered with :func:`register_source_kind` (docs/architecture.md, "Adding a crawl
source kind"): a paged kind subclasses :class:`PagedSource` and gives ``parse`` (a fetched page's posts and the
next page's ``before``) and ``origins`` (the hosts it may fetch from unless a sources file allows others by name);
a file kind subclasses :class:`FileExport` and gives ``load``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .telegram import (
    TELEGRAM_ORIGINS,
    FetchError,
    PageError,
    PreviewFetcher,
    PreviewPage,
    RawPost,
    host_allowed,
    page_url,
    parse_preview_page,
    preview_url,
    read_manual_export,
    read_telegram_export,
    url_host,
)


@dataclass(frozen=True)
class Source:
    """One ``[[source]]`` entry of a sources file, checked (:func:`~pbbq.tasks.crawl.sources.load_sources`)."""

    name: str
    kind: str
    url: str
    max_posts: int
    file: Path | None = None


@dataclass
class Reading:
    """What one crawl read from a source, before the posts are scrubbed and stored."""

    posts: list[RawPost] = field(default_factory=list)
    """The posts to store, in id order: a kind with a cursor gives only those above it."""
    seen: int = 0
    """Posts read but not in ``posts`` (a kind with a cursor: those at or below it)."""
    cursor: int | None = None
    """Where the store's cursor is after this crawl (a kind with a cursor)."""
    report: dict[str, Any] = field(default_factory=dict)
    """The kind's own figures for the source's entry in the report (pages, limits, problems, …)."""
    warnings: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    """Input files read, to record in the manifest."""
    skipped: str = ""
    """Why nothing was read (the store is kept as it is)."""


class SourceKind(ABC):
    """A kind of crawl source; subclasses set :attr:`name` and implement :meth:`read`."""

    name: ClassVar[str]
    """The ``kind`` of a ``[[source]]`` entry."""
    has_cursor: ClassVar[bool] = False
    """True: the store grows by the posts above its cursor and ``max_posts`` limits a crawl; False: the store is
    what :meth:`read` gives now (a post gone from it is gone from the store)."""
    needs_file: ClassVar[str] = ""
    """What ``file`` must name when a source of this kind needs one (empty: it needs none)."""
    verb: ClassVar[str] = "read"
    """How the crawl's log says it got the posts."""

    def source_url(self, url: str, allowed_hosts: tuple[str, ...]) -> str:
        """``url`` as the crawl uses it; a ValueError says why a sources file may not name it."""
        return url

    @abstractmethod
    def read(self, source: Source, fetcher: PreviewFetcher, cursor: int | None) -> Reading:
        """The posts of ``source`` now (above ``cursor``, for a kind with one)."""


SOURCE_KINDS: dict[str, SourceKind] = {}
"""Every source kind by name, in the order registered."""


def register_source_kind[K: type[SourceKind]](kind: K) -> K:
    """Register ``kind`` (a class decorator); a name registered twice is a programming error."""
    if kind.name in SOURCE_KINDS:
        raise ValueError(f"source kind {kind.name!r} is registered twice")
    SOURCE_KINDS[kind.name] = kind()
    return kind


class PagedSource(SourceKind):
    """A source read over HTTP page by page, from the newest post down to the cursor (or its first post, or
    ``max_posts``); a page names the next, older one by a post id (``before``). The fetcher is polite (rate
    limit, retries, back-off: :class:`~pbbq.tasks.crawl.telegram.PreviewFetcher`). The cursor moves only when a
    walk joins what is stored: a walk broken by an error keeps it, so the next crawl fills the gap."""

    has_cursor = True
    verb = "fetched"
    origins: ClassVar[tuple[str, ...]] = ()
    """Where a source of this kind may be fetched from (``https://host``) unless a host is allowed by name."""

    @abstractmethod
    def parse(self, text: str, url: str) -> PreviewPage:
        """A fetched page's posts and the next page's ``before``; a :class:`PageError` names the URL."""

    def page_url(self, url: str, before: int | None) -> str:
        """The address of the page of posts older than ``before`` (the newest page when None)."""
        return page_url(url, before)

    def source_url(self, url: str, allowed_hosts: tuple[str, ...]) -> str:
        if not host_allowed(url, self.origins, allowed_hosts):
            where = " or ".join(self.origins) or "a host allowed by name"
            raise ValueError(
                f"url {url} is not on {where}; to crawl another host, name it in allowed_hosts (this file's or "
                f'[crawl]\'s), e.g. allowed_hosts = ["{url_host(url)}"]'
            )
        return url

    def read(self, source: Source, fetcher: PreviewFetcher, cursor: int | None) -> Reading:
        walk = self._walk(fetcher, source, cursor)
        posts = [walk.posts[i] for i in sorted(walk.posts)]
        report: dict[str, Any] = {
            "pages": walk.pages,
            "limited": walk.limited,
            "problems": walk.problems,
            "cursor_before": cursor,
        }
        warnings = []
        if walk.error:
            report["error"] = walk.error
            warnings.append(f"{source.name}: {walk.error} (cursor kept at {cursor})")
        if walk.limited and cursor is not None:
            warnings.append(
                f"{source.name}: stopped at max_posts={source.max_posts} before reaching the "
                f"posts stored last time; raise max_posts to fetch the posts in between"
            )
        warnings.extend(f"{source.name}: {problem}" for problem in walk.problems)
        newest = max(walk.posts, default=None)
        if walk.joined and newest is not None:
            cursor = max(newest, cursor or newest)
        return Reading(posts, walk.on_pages - len(posts), cursor, report, warnings)

    def _walk(self, fetcher: PreviewFetcher, source: Source, cursor: int | None) -> _Walk:
        walk = _Walk()
        url, before = self.page_url(source.url, None), None
        while True:
            try:
                page = self.parse(fetcher.get(url), url)
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
            url = self.page_url(source.url, before)


@dataclass
class _Walk:
    posts: dict[int, RawPost] = field(default_factory=dict)
    pages: int = 0
    on_pages: int = 0
    joined: bool = False
    """The walk reached the cursor, the source's first post or the post limit: the cursor may move."""
    limited: bool = False
    error: str = ""
    problems: list[str] = field(default_factory=list)


@register_source_kind
class TelegramChannel(PagedSource):
    """A public Telegram channel's web preview (``https://t.me/s/<channel>``, older pages ``?before=<id>``)."""

    name = "telegram"
    origins = TELEGRAM_ORIGINS

    def source_url(self, url: str, allowed_hosts: tuple[str, ...]) -> str:
        return super().source_url(preview_url(url), allowed_hosts)

    def parse(self, text: str, url: str) -> PreviewPage:
        return parse_preview_page(text, url)


class FileExport(SourceKind):
    """A source whose posts come from an export file (``file``), read whole at every crawl; without a file
    (where :attr:`needs_file` is empty) the source is skipped and says how to get one."""

    @abstractmethod
    def load(self, path: Path) -> list[RawPost]:
        """The posts of an export file; an :class:`~pbbq.tasks.core.inputs.InputError` names what is wrong."""

    def read(self, source: Source, fetcher: PreviewFetcher, cursor: int | None) -> Reading:
        if source.file is None:
            skipped = "no export file: this source has no public pages; export its posts (CSV/JSON) and set file"
            return Reading(skipped=skipped)
        return Reading(self.load(source.file), files={f"crawl_export_{source.name}": source.file})


@register_source_kind
class TelegramExport(FileExport):
    """A Telegram Desktop export of one chat."""

    name = "telegram_export"
    needs_file = "its result.json"

    def load(self, path: Path) -> list[RawPost]:
        return read_telegram_export(path)


@register_source_kind
class ManualExport(FileExport):
    """Posts exported by hand from a source with no public pages (X, Instagram)."""

    name = "manual"

    def load(self, path: Path) -> list[RawPost]:
        return read_manual_export(path)
