"""The crawl's fetch (the first of its two steps): every configured source read into its store
(:mod:`.store`) as its kind reads it (:mod:`.kinds`: a channel by walking its preview pages down to the cursor,
an export read whole); the posts scrubbed before any row exists (:mod:`.scrub`). Not a cached task: its input is
the network.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pyarrow as pa

from ..core.artifacts import parquet_bytes
from ..core.run_folder import display_path
from ..core.schemas import to_arrow
from .kinds import SOURCE_KINDS, Source
from .scrub import KINDS, scrub_field, scrub_segments
from .sources import CrawlParams, configured_sources
from .store import POST, SourceStore, empty_posts, post_order
from .telegram import PreviewFetcher, RawPost, RecordedPages

SKIPPED = "no crawl sources configured: set [crawl] sources to a sources file (crawl/sources.toml lists the paper's"
SKIPPED += " Appendix A channels)"


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
            kind = SOURCE_KINDS[source.kind]
            reading = kind.read(source, fetcher, store.cursor())
            if reading.skipped:
                entry["skipped"] = reading.skipped
                per_source.append(entry)
                frames.append(stored)
                continue
            entry.update(reading.report)
            warnings.extend(reading.warnings)
            files.update(reading.files)
            raw = reading.posts
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
            if kind.has_cursor:  # a channel's store grows by the posts above its cursor
                rows = pd.DataFrame([scrub_post(source, post, counts) for post in new], columns=POST.names)
                merged = pd.concat([stored, rows], ignore_index=True) if len(rows) else stored
                removed = 0
                if len(rows) or reading.cursor != store.cursor():
                    store.save(merged, reading.cursor, source.url)
            else:  # an export's store is what its file holds now
                merged = pd.DataFrame([scrub_post(source, post, counts) for post in raw], columns=POST.names)
                removed = len(known - set(merged["post_id"]))
                store.save(merged, None, source.url)
            seen = len(raw) - len(new) + reading.seen
            posts = {
                "posts_new": len(new),
                "posts_seen": seen,
                "posts_removed": removed,
                "posts_too_long": len(too_long),
                "posts_stored": len(merged),
            }
            entry.update(posts, scrubbed=dict(counts))
            if kind.has_cursor:
                entry["cursor_after"] = reading.cursor
            totals.update(posts, pages=entry.get("pages", 0))
            scrubbed.update(counts)
            per_source.append(entry)
            frames.append(merged)
            if log is not None:
                log(f"crawl {source.name}: {source_summary(entry, kind.verb)}")
        totals.update(requests=fetcher.requests, retries=fetcher.retries)
    posts = post_order(pd.concat(frames, ignore_index=True)) if frames else empty_posts()
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


def source_summary(entry: Mapping[str, Any], verb: str) -> str:
    """One source's fetch in words: how (``verb``) it got how many posts, what was new, what the store holds."""
    read = entry["posts_new"] + entry["posts_seen"]
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
