"""A crawl source kind is one class registered (tasks/crawl/kinds.py): a kind declared here, a JSON feed read
page by page, is checked by the sources file, walked down to its cursor, scrubbed and stored like a channel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from pbbq.tasks.core.inputs import InputError
from pbbq.tasks.crawl.fetch import fetch_sources
from pbbq.tasks.crawl.kinds import SOURCE_KINDS, PagedSource, register_source_kind
from pbbq.tasks.crawl.sources import CrawlParams, load_sources
from pbbq.tasks.crawl.telegram import PageError, PreviewPage, RawPost
from tests.fakes.local_server import LocalServer, QuietHandler


class JsonFeed(PagedSource):
    """A feed whose page is ``{"posts": [{"id", "date", "text"}, ...], "before": <an older page's id or null>}``."""

    name = "json_feed"

    def parse(self, text: str, url: str) -> PreviewPage:
        try:
            page = json.loads(text)
            posts = [RawPost(post["id"], post["date"], ((post["text"], None),)) for post in page["posts"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise PageError(f"{url}: not a feed page ({exc!r})") from None
        return PreviewPage(posts, page["before"])


class FeedServer(LocalServer):
    """``GET /feed`` (``?before=<id>``): the newest ``PAGE`` posts older than ``before``, newest last."""

    PAGE = 3

    def __init__(self, count: int) -> None:
        self.texts = {i: f"پست {i}: تماس با 09121234567" for i in range(1, count + 1)}
        self.requests: list[str] = []
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.requests.append(self.path)
                before = int(parse_qs(urlsplit(self.path).query).get("before", ["0"])[0]) or len(server.texts) + 1
                ids = [i for i in sorted(server.texts) if i < before][-FeedServer.PAGE :]
                posts = [{"id": i, "date": f"2024-02-{i:02d}T08:00:00Z", "text": server.texts[i]} for i in ids]
                body = json.dumps({"posts": posts, "before": ids[0] if ids and ids[0] > 1 else None}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

        super().__init__(ThreadingHTTPServer(("127.0.0.1", 0), Handler))


@pytest.fixture
def json_feed() -> Iterator[None]:
    register_source_kind(JsonFeed)
    yield
    del SOURCE_KINDS[JsonFeed.name]


def _sources(tmp_path: Path, url: str, allowed: str | None) -> Path:
    path = tmp_path / "sources.toml"
    hosts = f'allowed_hosts = ["{allowed}"]\n\n' if allowed else ""
    path.write_text(f'{hosts}[[source]]\nname = "feed"\nkind = "json_feed"\nurl = "{url}/feed"\n', encoding="utf-8")
    return path


def test_a_kind_declared_by_one_class_is_crawled_down_to_its_cursor(tmp_path: Path, json_feed: None) -> None:
    with FeedServer(7) as server:
        params = CrawlParams(sources=str(_sources(tmp_path, server.url, f"127.0.0.1:{server.port}")), min_interval=0)
        first = fetch_sources(params, tmp_path / "state")
        assert first.posts["post_id"].tolist() == [str(i) for i in range(1, 8)]
        assert set(first.posts["kind"]) == {"json_feed"}
        assert not first.posts["text"].str.contains("0912").any()  # scrubbed like every kind's posts
        entry = first.report["fetch"]["sources"][0]
        assert (entry["pages"], entry["posts_new"], entry["cursor_before"], entry["cursor_after"]) == (3, 7, None, 7)

        server.texts |= {8: "پست ۸", 9: "پست ۹"}
        server.requests.clear()
        again = fetch_sources(params, tmp_path / "state")
        entry = again.report["fetch"]["sources"][0]
        figures = ("posts_new", "cursor_before", "cursor_after", "posts_stored")
        assert [entry[key] for key in figures] == [2, 7, 9, 9]
        assert server.requests == ["/feed"]  # the newest page reached the cursor: no walk further back


def test_a_new_kind_is_closed_by_default_and_its_name_is_listed(tmp_path: Path, json_feed: None) -> None:
    with pytest.raises(InputError, match=r"url http://127\.0\.0\.1:9/feed is not on a host allowed by name"):
        load_sources(_sources(tmp_path, "http://127.0.0.1:9", None))
    rss = tmp_path / "rss.toml"
    rss.write_text('[[source]]\nname = "a"\nkind = "rss"\nurl = "https://example.org"\n', encoding="utf-8")
    with pytest.raises(InputError, match="kind 'rss' is not one of telegram, telegram_export, manual, json_feed"):
        load_sources(rss)


def test_a_kind_without_its_reader_or_a_name_registered_twice_is_refused(json_feed: None) -> None:
    class Unreadable(PagedSource):
        name = "unreadable"

    with pytest.raises(TypeError, match="abstract method 'parse'"):
        register_source_kind(Unreadable)
    with pytest.raises(ValueError, match="source kind 'json_feed' is registered twice"):
        register_source_kind(JsonFeed)
