"""What a crawl keeps between runs, per source: its scrubbed posts (:data:`POST`) and, for a channel, the
cursor (the newest post id seen), under ``<outputs>/.crawl/<source>/`` (:class:`SourceStore`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.artifacts import atomic_write_bytes, parquet_bytes, write_json
from ..core.inputs import InputError
from ..core.schemas import to_arrow

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


def post_order(frame: pd.DataFrame) -> pd.DataFrame:
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
        atomic_write_bytes(self.folder / "posts.parquet", parquet_bytes(to_arrow(post_order(posts), POST, "posts")))
        if cursor is not None:
            updated = datetime.now(UTC).isoformat(timespec="seconds")
            write_json(self.folder / "cursor.json", {"newest_post_id": cursor, "url": url, "updated": updated})
