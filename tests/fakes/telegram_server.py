"""A local fake of Telegram's public channel previews (``https://t.me/s/<channel>``), stdlib only.

One ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) serves ``GET /s/<channel>`` and ``GET /s/<channel>?before=<id>``
in the structure of the real pages (read from t.me/s pages): ``section.tgme_channel_history`` holding one
``div.tgme_widget_message_wrap`` per post with ``div.tgme_widget_message[data-post="<channel>/<id>"]``, the
author's signature (``.tgme_widget_message_from_author``), the forward's origin
(``a.tgme_widget_message_forwarded_from_name`` to ``https://t.me/<channel>/<id>`` for a channel, a ``span`` for a
person), ``div.tgme_widget_message_text`` with ``<br/>`` line breaks, the views (``1.2K``) and
``a.tgme_widget_message_date > time[datetime]``; and, above them, the 'load more' link
``a.tme_messages_more[data-before]`` while older posts exist. A page holds the newest ``page_size`` (20, as
Telegram) posts older than ``before``. A deleted post is not shown (its id is a gap, as on Telegram); a channel
with no post has an empty history; an unknown channel redirects to ``/<channel>``, as Telegram does.

Faults, served in order to the next requests (``plan("429", "500", "malformed")``, optionally only for one
channel): ``429`` and ``500`` with a ``Retry-After`` header (``retry_after`` seconds), ``malformed`` a 200 page
without the channel history, ``bad_message`` a page whose first message has no date, ``ok`` no fault (to reach
a later page: ``plan("ok", "malformed")`` breaks the second page). Every request is recorded
(path, query, monotonic arrival time, user agent) for assertions.

The crawl fetches only from t.me and telegram.me unless a host is allowed by name: a sources file for this fake
declares ``allowed_hosts = ["<host>"]`` (:attr:`FakeTelegram.host`).

``render_page`` is also what ``crawl/sample/record_pages.py`` records the sample's pages with.
"""

from __future__ import annotations

import html
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.local_server import LocalServer, QuietHandler

FAULTS = frozenset({"ok", "429", "500", "malformed", "bad_message"})


@dataclass
class FakePost:
    id: int
    html: str
    """The message text as Telegram renders it: HTML with ``<br/>``, ``<a href>`` links and mentions."""
    date: str = "2024-01-01T10:00:00+00:00"
    views: str = "1.2K"
    author: str | None = None
    forwarded_from: tuple[str, str | None] | None = None
    """(display name, href): an href ``https://t.me/<channel>/<id>`` is a channel, None a person's name."""
    deleted: bool = False


@dataclass
class FakeChannel:
    name: str
    title: str = "Fake channel"
    posts: list[FakePost] = field(default_factory=list)


def _message(channel: str, post: FakePost, drop_date: bool = False) -> str:
    parts = [
        '<div class="tgme_widget_message_wrap js-widget_message_wrap">',
        f'<div class="tgme_widget_message text_not_supported_wrap js-widget_message" data-post="{channel}/{post.id}"'
        f' data-view="fake">',
        '<div class="tgme_widget_message_bubble">',
        f'<div class="tgme_widget_message_author accent_color"><a class="tgme_widget_message_owner_name"'
        f' href="https://t.me/{channel}"><span dir="auto">{html.escape(channel)}</span></a></div>',
    ]
    if post.forwarded_from is not None:
        name, href = post.forwarded_from
        origin = (
            f'<a class="tgme_widget_message_forwarded_from_name" href="{html.escape(href)}">'
            f'<span dir="auto">{html.escape(name)}</span></a>'
            if href
            else f'<span class="tgme_widget_message_forwarded_from_name">{html.escape(name)}</span>'
        )
        parts.append(f'<div class="tgme_widget_message_forwarded_from accent_color">Forwarded from {origin}</div>')
    parts.append(f'<div class="tgme_widget_message_text js-message_text" dir="auto">{post.html}</div>')
    parts.append('<div class="tgme_widget_message_footer compact js-message_footer">')
    parts.append('<div class="tgme_widget_message_info short js-message_info">')
    parts.append(f'<span class="tgme_widget_message_views">{html.escape(post.views)}</span>')
    if post.author:
        parts.append(f'<span class="tgme_widget_message_from_author" dir="auto">{html.escape(post.author)}</span>')
    stamp = "" if drop_date else f'<time datetime="{post.date}" class="time">10:00</time>'
    parts.append(
        f'<span class="tgme_widget_message_meta"><a class="tgme_widget_message_date"'
        f' href="https://t.me/{channel}/{post.id}">{stamp}</a></span>'
    )
    parts.append("</div></div></div></div></div>")
    return "".join(parts)


def render_page(channel: FakeChannel, before: int | None, page_size: int = 20, bad_message: bool = False) -> str:
    """The preview page of ``channel`` holding the newest ``page_size`` visible posts older than ``before``."""
    visible = sorted((p for p in channel.posts if not p.deleted), key=lambda p: p.id)
    older = [p for p in visible if before is None or p.id < before]
    page = older[-page_size:]
    more = ""
    if page and len(older) > len(page):
        first = page[0].id
        more = (
            f'<a href="/s/{channel.name}?before={first}" class="tme_messages_more js-messages_more"'
            f' data-before="{first}"></a>'
        )
    messages = "".join(_message(channel.name, p, drop_date=bad_message and i == 0) for i, p in enumerate(page))
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        f'<title>{html.escape(channel.title)} – Telegram</title></head><body class="widget_frame_base">'
        '<header class="tgme_header"><div class="tgme_channel_info_header_title">'
        f"{html.escape(channel.title)}</div></header>"
        '<main class="tgme_main"><section class="tgme_channel_history js-message_history">'
        f"{more}{messages}</section></main></body></html>"
    )


MALFORMED = '<!DOCTYPE html><html><head><title>Telegram</title></head><body><div class="tgme_page">Please'


class FakeTelegram(LocalServer):
    """A threaded fake of t.me channel previews (see the module docstring)."""

    def __init__(self, channels: list[FakeChannel] | None = None, *, page_size: int = 20, retry_after: str = "1"):
        self.channels = {c.name: c for c in channels or []}
        self.page_size = page_size
        self.retry_after = retry_after
        self._lock = threading.Lock()
        self._plan: deque[tuple[str, str | None]] = deque()
        self.requests: list[dict[str, Any]] = []
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.fake = self  # type: ignore[attr-defined]
        super().__init__(httpd)

    def channel_url(self, name: str) -> str:
        return f"{self.url}/s/{name}"

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``: what a sources file names in ``allowed_hosts`` to crawl this fake."""
        return f"127.0.0.1:{self.port}"

    def plan(self, *faults: str, channel: str | None = None) -> None:
        """Fail the next requests (to ``channel`` only, when given) with these faults, in order."""
        unknown = set(faults) - FAULTS
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {sorted(FAULTS)}")
        with self._lock:
            self._plan.extend((fault, channel) for fault in faults)

    def _take_fault(self, channel: str) -> str | None:
        with self._lock:
            for item in self._plan:
                if item[1] in (None, channel):
                    self._plan.remove(item)
                    return item[0]
        return None

    def requests_to(self, channel: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["channel"] == channel]


class _Handler(QuietHandler):
    server: ThreadingHTTPServer

    def do_GET(self) -> None:
        fake: FakeTelegram = self.server.fake  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        segments = [s for s in parts.path.split("/") if s]
        channel = segments[1] if len(segments) == 2 and segments[0] == "s" else ""
        before = int(query["before"][0]) if "before" in query else None
        with fake._lock:
            fake.requests.append(
                {
                    "channel": channel,
                    "before": before,
                    "at": time.monotonic(),
                    "user_agent": self.headers.get("User-Agent", ""),
                }
            )
        fault = fake._take_fault(channel)
        if fault in ("429", "500"):
            self._send(int(fault), b"slow down", {"Retry-After": fake.retry_after})
        elif channel not in fake.channels:
            self._send(302, b"", {"Location": f"/{channel or parts.path}"})
        elif fault == "malformed":
            self._send(200, MALFORMED.encode())
        else:
            page = render_page(fake.channels[channel], before, fake.page_size, bad_message=fault == "bad_message")
            self._send(200, page.encode("utf-8"))

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def load_channels(path: Any) -> list[FakeChannel]:
    """The channels of a posts file (``crawl/sample/posts.json``: ``channels`` of ``name``, ``title``, ``posts``
    with ``id``, ``date``, ``html`` and optionally ``views``, ``author``, ``forwarded_from`` [name, href],
    ``deleted``; other keys are labels for the tests and are ignored)."""
    import json
    from pathlib import Path

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    channels = []
    for channel in data["channels"]:
        posts = [
            FakePost(
                id=int(post["id"]),
                html=post["html"],
                date=post["date"],
                views=post.get("views", "1K"),
                author=post.get("author"),
                forwarded_from=tuple(post["forwarded_from"]) if post.get("forwarded_from") else None,
                deleted=bool(post.get("deleted", False)),
            )
            for post in channel["posts"]
        ]
        channels.append(FakeChannel(channel["name"], channel.get("title", channel["name"]), posts))
    return channels
