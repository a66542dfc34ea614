"""Reading posts: public Telegram channel previews, Telegram Desktop exports and the exports of manual sources
(PBBQ §3.2, Appendix A; docs/architecture.md, crawl).

- **Previews** (``https://t.me/s/<channel>``, older pages with ``?before=<post id>``) are fetched with httpx: a
  timeout, a descriptive user agent, at most one request per ``min_interval`` seconds to a host, and retries
  with doubling back-off (tenacity) on 429, 5xx and transport errors that honour the server's ``Retry-After``.
  A page is parsed with BeautifulSoup: each ``div.tgme_widget_message`` gives the post id (``data-post``), the
  date (``time[datetime]``), the text with its line breaks, the views and the forward's origin; the 'load more'
  link (``a.tme_messages_more[data-before]``) gives the next page. A page without the channel history, or a
  message without its id or date, is reported with its URL, never skipped silently.
- **Telegram Desktop exports** (``result.json`` of one chat): text as a string or a list of entities.
- **Manual sources** (X, Instagram: no public unauthenticated pages): a CSV or JSON export with ``post_id``,
  ``date``, ``text`` and optionally ``views``.

All three give :class:`RawPost` objects, which hold text that may carry personal data: they live in memory
only, and :mod:`pbbq.tasks.crawl.scrub` turns them into rows before anything is written. The raw HTML is never kept.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx

from ..core.inputs import InputError
from ..imports import one_import_at_a_time
from .scrub import Segment

if TYPE_CHECKING:  # BeautifulSoup and tenacity load when a page is fetched or parsed, not with the build
    from bs4 import Tag
    from tenacity import RetryCallState

USER_AGENT = (
    "pbbq-builder/0.1 (research crawler for PBBQ, a Persian bias benchmark; reads public channel previews "
    "only, one request every few seconds)"
)


@dataclass(frozen=True)
class RawPost:
    """A post as read, before scrubbing. Never written: :func:`pbbq.tasks.crawl.fetch.scrub_post` makes the row."""

    post_id: int | str
    date: str
    """ISO 8601 in UTC (``2024-03-01T09:30:00Z``), or empty when the source gives none."""
    segments: tuple[Segment, ...]
    views: int | None = None
    forwarded_from: Segment | None = None
    """A public channel's name (kind ``None``) or a person's (kind ``name``)."""


class FetchError(Exception):
    """A page could not be fetched; the message names its URL."""


class PageError(Exception):
    """A fetched page does not have a channel preview's structure; the message names its URL."""


@dataclass(frozen=True)
class PreviewPage:
    posts: list[RawPost]
    before: int | None
    """``data-before`` of the 'load more' link: the next (older) page is ``?before=<this>``; None at the start."""
    problems: list[str] = field(default_factory=list)
    """Messages left out, each with the page URL and why."""


def utc_iso(moment: datetime) -> str:
    """``moment`` in UTC as ``YYYY-MM-DDTHH:MM:SSZ`` (a naive time is taken to be UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_VIEWS = re.compile(r"^\s*([\d.,]+)\s*([KMB]?)\s*$", re.IGNORECASE)
_SCALE = {"": 1, "K": 1_000, "M": 1_000_000, "B": 1_000_000_000}


def parse_views(text: str) -> int | None:
    """Telegram's view counter: ``845``, ``1.2K``, ``3.4M``; None when it is not a count."""
    match = _VIEWS.match(text)
    if not match:
        return None
    return round(float(match.group(1).replace(",", "")) * _SCALE[match.group(2).upper()])


_PROFILE = re.compile(r"^https?://(?:t\.me|telegram\.me)/(?:[A-Za-z0-9_]{3,32})/?$", re.IGNORECASE)
_CHANNEL_POST = re.compile(r"^https?://(?:t\.me|telegram\.me)/(?:s/)?([A-Za-z0-9_]{3,32})/\d+/?$", re.IGNORECASE)


def _link_segments(link: Tag) -> list[Segment]:
    """A link in a post's text: a mention of a person (``tg://user``, a profile link whose text is not a handle)
    is a tagged name, an ``@handle`` a handle, ``mailto:``/``tel:`` an e-mail or phone; any other link keeps its
    text (scrubbed later like all text) and loses its address."""
    href = str(link.get("href", ""))
    text = link.get_text()
    if text.strip().startswith("@"):
        return [(text, "handle")]
    if href.startswith("mailto:"):
        return [(text, "email")]
    if href.startswith("tel:"):
        return [(text, "phone")]
    if href.startswith("tg://user") or (_PROFILE.match(href) and not _looks_like_link(text)):
        return [(text, "name")]
    return _segments(link)


def _looks_like_link(text: str) -> bool:
    return bool(re.match(r"^\s*(?:https?://|www\.|t\.me/)", text, re.IGNORECASE))


def _segments(node: Tag) -> list[Segment]:
    """The text of a message's text element: ``<br>`` as a line break, emoji as their character, links by
    :func:`_link_segments`, block elements on their own lines."""
    with one_import_at_a_time():
        from bs4 import NavigableString, Tag

    out: list[Segment] = []
    for child in node.children:
        if isinstance(child, NavigableString):
            if type(child) is NavigableString:  # not a comment, CDATA or doctype
                out.append((str(child), None))
        elif isinstance(child, Tag):
            if child.name == "br":
                out.append(("\n", None))
            elif child.name == "a":
                out.extend(_link_segments(child))
            elif child.name in ("blockquote", "div", "p", "pre"):
                out += [("\n", None), *_segments(child), ("\n", None)]
            else:
                out.extend(_segments(child))
    return out


def _forwarded_from(message: Tag) -> Segment | None:
    origin = message.select_one(".tgme_widget_message_forwarded_from_name")
    if origin is None:
        return None
    match = _CHANNEL_POST.match(str(origin.get("href", ""))) if origin.name == "a" else None
    return (match.group(1), None) if match else (origin.get_text(" ", strip=True), "name")


def parse_preview_page(html: str, url: str) -> PreviewPage:
    """Parse one channel preview page. Raises :class:`PageError` when the page has no channel history; a
    message without a valid ``data-post`` or ``time[datetime]`` is left out and named in ``problems``."""
    with one_import_at_a_time():
        from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    history = soup.select_one(".tgme_channel_history")
    if history is None:
        raise PageError(f"{url}: not a channel preview page (no .tgme_channel_history); the page did not parse")
    posts: list[RawPost] = []
    problems: list[str] = []
    for index, message in enumerate(history.select("div.tgme_widget_message"), 1):
        if "service_message" in (message.get("class") or []):
            continue
        data_post = str(message.get("data-post", ""))
        match = re.fullmatch(r"[A-Za-z0-9_]+/(\d+)", data_post)
        if not match:
            problems.append(f"{url}: message {index} has no valid data-post ({data_post!r}); left out")
            continue
        post_id = int(match.group(1))
        stamp = message.select_one(".tgme_widget_message_date time[datetime]") or message.select_one("time[datetime]")
        try:
            date = utc_iso(datetime.fromisoformat(str(stamp["datetime"]))) if stamp is not None else ""
        except ValueError:
            date = ""
        if not date:
            problems.append(f"{url}: post {post_id} has no valid time[datetime]; left out")
            continue
        texts = [
            node
            for node in message.select(".tgme_widget_message_text")
            if node.find_parent(class_="tgme_widget_message_reply") is None
        ]
        views = message.select_one(".tgme_widget_message_views")
        posts.append(
            RawPost(
                post_id=post_id,
                date=date,
                segments=tuple(_segments(texts[0])) if texts else (),
                views=parse_views(views.get_text()) if views is not None else None,
                forwarded_from=_forwarded_from(message),
            )
        )
    more = soup.select_one("a.tme_messages_more[data-before]")
    before = None
    if more is not None:
        try:
            before = int(str(more["data-before"]))
        except ValueError:
            raise PageError(f"{url}: the 'load more' link has a data-before that is not a post id") from None
    return PreviewPage(posts, before, problems)


def preview_url(url: str) -> str:
    """The preview address of a channel: ``https://t.me/<channel>`` becomes ``https://t.me/s/<channel>``."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if not re.fullmatch(r"(?:/s)?/[A-Za-z0-9_]{3,64}", path):
        raise ValueError(f"{url!r} is not a channel address like https://t.me/<channel> or https://t.me/s/<channel>")
    if not path.startswith("/s/"):
        path = "/s" + path
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


TELEGRAM_ORIGINS = ("https://t.me", "https://telegram.me")
"""Where a channel's preview may be fetched from unless a host is allowed by name."""


def url_host(url: str) -> str:
    """The host of ``url`` as ``allowed_hosts`` names it: ``host``, or ``host:port`` when a port is given."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{parts.hostname or ''}:{port}" if port is not None else parts.hostname or ""


def host_allowed(url: str, origins: tuple[str, ...], allowed_hosts: tuple[str, ...]) -> bool:
    """Whether ``url`` is on one of ``origins`` (``https://host``) or on a host of ``allowed_hosts`` (``host`` or
    ``host:port``, compared without case), over http or https."""
    parts = urlsplit(url)
    if f"{parts.scheme}://{url_host(url)}".lower() in origins:
        return True
    return parts.scheme in ("http", "https") and url_host(url).lower() in {h.strip().lower() for h in allowed_hosts}


def page_url(url: str, before: int | None) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode({"before": before}) if before else "", ""))


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (a number or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class FetchSettings:
    user_agent: str = USER_AGENT
    timeout: float = 20.0
    min_interval: float = 3.0
    """Seconds between two requests to one host."""
    max_retries: int = 4
    backoff: float = 2.0
    """Wait before the first retry when the server names none; doubled at every retry."""
    max_wait: float = 300.0
    """The longest wait honoured; a server asking for more fails the page."""


class PreviewFetcher:
    """GETs preview pages politely (see the module docstring); one per crawl, closed after it."""

    def __init__(
        self,
        settings: FetchSettings,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.sleep = sleep
        self.client = httpx.Client(
            headers={"User-Agent": settings.user_agent, "Accept-Language": "fa,en;q=0.5"},
            timeout=settings.timeout,
            transport=transport,
            follow_redirects=False,
        )
        self._next_slot: dict[str, float] = {}
        self.requests = 0
        self.retries = 0

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> PreviewFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take_turn(self, host: str) -> None:
        """Per-host rate limit: wait until ``min_interval`` has passed since the last request to ``host``."""
        now = time.monotonic()
        slot = max(now, self._next_slot.get(host, 0.0))
        if slot > now:
            self.sleep(slot - now)
        self._next_slot[host] = max(slot, time.monotonic()) + self.settings.min_interval

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, _Retryable) and error.retry_after is not None:
            return error.retry_after
        return min(self.settings.backoff * 2 ** (state.attempt_number - 1), self.settings.max_wait)

    def _before_sleep(self, state: RetryCallState) -> None:
        self.retries += 1

    def get(self, url: str) -> str:
        """The page's HTML. Raises :class:`FetchError` naming the URL when it cannot be had."""
        with one_import_at_a_time():
            from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

        retrying = Retrying(
            stop=stop_after_attempt(1 + self.settings.max_retries),
            wait=self._wait,
            retry=retry_if_exception_type((_Retryable, httpx.TransportError)),
            sleep=self.sleep,
            before_sleep=self._before_sleep,
            reraise=True,
        )
        try:
            return retrying(self._get_once, url)
        except _Retryable as exc:
            raise FetchError(f"{url}: {exc} after {1 + self.settings.max_retries} attempts") from None
        except httpx.TransportError as exc:
            raise FetchError(
                f"{url}: {type(exc).__name__} after {1 + self.settings.max_retries} attempts ({exc})"
            ) from None

    def _get_once(self, url: str) -> str:
        self._take_turn(urlsplit(url).netloc)
        self.requests += 1
        response = self.client.get(url)
        status = response.status_code
        if status == 429 or status >= 500:
            wait = retry_after_seconds(response.headers.get("Retry-After"))
            if wait is not None and wait > self.settings.max_wait:
                raise FetchError(
                    f"{url}: HTTP {status} asks to wait {wait:.0f} s, more than max_wait {self.settings.max_wait:g} s"
                )
            raise _Retryable(f"HTTP {status}", wait)
        if 300 <= status < 400:
            raise FetchError(
                f"{url}: redirected to {response.headers.get('Location', '?')}: the channel has no public preview"
            )
        if status != 200:
            raise FetchError(f"{url}: HTTP {status}")
        return response.text


class RecordedPages(httpx.BaseTransport):
    """Answers preview requests from a folder of recorded pages, with no network: ``/s/<channel>`` is
    ``<channel>.html`` and ``?before=<id>`` is ``<channel>.before-<id>.html``. A request with no recorded page
    is an error naming the URL and the file it looked for."""

    def __init__(self, folder: Path) -> None:
        if not folder.is_dir():
            raise FetchError(f"{folder}: the recorded pages folder does not exist")
        self.folder = folder

    @staticmethod
    def file_name(url: str) -> str:
        parts = httpx.URL(url)
        channel = parts.path.rstrip("/").rsplit("/", 1)[-1]
        before = parts.params.get("before")
        return f"{channel}.before-{before}.html" if before else f"{channel}.html"

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = self.folder / self.file_name(str(request.url))
        if not path.is_file():
            raise FetchError(f"{request.url}: no recorded page ({path})")
        return httpx.Response(200, content=path.read_bytes(), headers={"Content-Type": "text/html; charset=utf-8"})


# --- exports -------------------------------------------------------------------------------------------------

EXPORT_ENTITY_KINDS = {
    "mention": "handle",
    "mention_name": "name",
    "phone": "phone",
    "email": "email",
    "link": "url",
    "bank_card": "account",
}
"""Telegram export entity types that are personal data, and their kind; every other type is plain text
(``text_link`` keeps its text and drops its address)."""


def export_segments(text: Any, where: str) -> list[Segment]:
    if isinstance(text, str):
        return [(text, None)]
    if not isinstance(text, list):
        raise ValueError(f"{where}: text is neither a string nor a list of entities")
    out: list[Segment] = []
    for part in text:
        if isinstance(part, str):
            out.append((part, None))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append((part["text"], EXPORT_ENTITY_KINDS.get(str(part.get("type")))))
        else:
            raise ValueError(f"{where}: an entity without text ({str(part)[:40]!r}...)")
    return out


def _export_date(message: dict[str, Any]) -> str:
    if str(message.get("date_unixtime", "")).isdigit():
        return utc_iso(datetime.fromtimestamp(int(message["date_unixtime"]), UTC))
    return utc_iso(datetime.fromisoformat(str(message["date"])))


def read_telegram_export(path: Path) -> list[RawPost]:
    """The messages of a Telegram Desktop export of one chat (``result.json``); service messages are left out.
    The forward's origin is kept only when ``forwarded_from_id`` names a channel; otherwise it is a person."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, None, f"not a readable Telegram export ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise InputError(path, None, "not a Telegram Desktop export of one chat: no 'messages' list at the top")
    posts = []
    for index, message in enumerate(data["messages"], 1):
        where = f"message {index}"
        if not isinstance(message, dict) or message.get("type", "message") != "message":
            continue
        try:
            post_id = int(message["id"])
            where = f"message {index} (id {post_id})"
            date = _export_date(message)
            segments = export_segments(message.get("text", ""), where)
        except (KeyError, TypeError, ValueError) as exc:
            problem = str(exc) if isinstance(exc, ValueError) and where in str(exc) else f"{where}: {exc!r}"
            raise InputError(path, None, f"{problem} (needs id, date or date_unixtime, text)") from None
        origin = message.get("forwarded_from")
        forwarded: Segment | None = None
        if origin:
            is_channel = str(message.get("forwarded_from_id", "")).startswith("channel")
            forwarded = (str(origin), None if is_channel else "name")
        posts.append(RawPost(post_id, date, tuple(segments), None, forwarded))
    return posts


MANUAL_COLUMNS = ("post_id", "date", "text")


def read_manual_export(path: Path) -> list[RawPost]:
    """Posts exported by hand from a source with no public pages (X, Instagram): a CSV with a header row or a
    JSON list of objects, with ``post_id``, ``date`` (ISO 8601) and ``text``, optionally ``views``."""
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"not a readable UTF-8 file ({exc})") from None
    if path.suffix.lower() == ".json":
        try:
            rows = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(path, None, f"not valid JSON ({exc})") from None
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise InputError(path, None, "expected a JSON list of objects with post_id, date, text")
        first_row = 1
    elif path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(raw))
        missing = [column for column in MANUAL_COLUMNS if column not in (reader.fieldnames or [])]
        if missing:
            raise InputError(path, 1, f"missing column(s) {', '.join(missing)}")
        rows, first_row = [], 2
        try:
            rows.extend(reader)
        except csv.Error as exc:
            problem = f"not readable as CSV ({exc})"
            if "field limit" in str(exc):
                problem = f"a field longer than {csv.field_size_limit()} characters, the CSV reader's limit; a post "
                problem += "that long is no stereotype statement: remove it from the export"
            raise InputError(path, first_row + len(rows), problem) from None
    else:
        raise InputError(path, None, "a manual export must be .csv or .json")
    posts: list[RawPost] = []
    seen: dict[str, int] = {}
    for number, row in enumerate(rows, first_row):
        missing = [column for column in MANUAL_COLUMNS if not str(row.get(column) or "").strip()]
        if missing:
            raise InputError(path, number, f"empty {', '.join(missing)}")
        post_id = str(row["post_id"]).strip()
        if post_id in seen:
            raise InputError(path, number, f"duplicate post_id {post_id!r} (first in row {seen[post_id]})")
        seen[post_id] = number
        try:
            date = utc_iso(datetime.fromisoformat(str(row["date"]).strip()))
        except ValueError:
            raise InputError(path, number, f"date {row['date']!r} is not ISO 8601") from None
        views = parse_views(str(row.get("views") or "")) if row.get("views") else None
        posts.append(RawPost(post_id, date, ((str(row["text"]), None),), views, None))
    return posts
