"""The crawl's fetch side against a fake t.me on 127.0.0.1: pagination, the cursor, faults, exports, and personal
data that must never reach disk."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pbbq.flows.cli import main
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.inputs import InputError
from pbbq.tasks.crawl import CrawlParams
from pbbq.tasks.crawl.fetch import fetch_sources
from pbbq.tasks.crawl.scrub import scrub_segments
from pbbq.tasks.crawl.sources import load_sources
from pbbq.tasks.crawl.telegram import USER_AGENT, parse_preview_page, parse_views, read_manual_export
from pbbq.tasks.text.languages.fa import normalize_fa
from tests.fakes.telegram_server import FakeChannel, FakePost, FakeTelegram, render_page
from tests.helpers import CRAWL_SAMPLE, planted_leaks, refusal, texts_under


def _channel(name: str, n: int, deleted: tuple[int, ...] = ()) -> FakeChannel:
    posts = [
        FakePost(
            id=i,
            html=f"پست شماره‌ی {i}<br/>خط دوم پست {i}",
            date=f"2024-01-{1 + i % 28:02d}T10:{i % 60:02d}:00+03:30",
            views=f"{i}.5K",
            deleted=i in deleted,
        )
        for i in range(1, n + 1)
    ]
    return FakeChannel(name, f"Test channel {name}", posts)


@pytest.fixture
def fake_telegram() -> Iterator[FakeTelegram]:
    channels = [_channel("big_channel", 45, deleted=(30,)), FakeChannel("empty_channel", "Empty")]
    with FakeTelegram(channels) as server:
        yield server


def _params(tmp_path: Path, fake_telegram: FakeTelegram, *channels: str, **overrides: object) -> CrawlParams:
    sources = tmp_path / "sources.toml"
    sources.write_text(
        f'allowed_hosts = ["{fake_telegram.host}"]  # the fake Telegram\n\n'
        + "".join(
            f'[[source]]\nname = "{name}"\nkind = "telegram"\nurl = "{fake_telegram.channel_url(name)}"\n\n'
            for name in channels
        ),
        encoding="utf-8",
    )
    settings = {"min_interval": 0.0, "backoff": 0.05, "max_retries": 2, "timeout": 5.0, **overrides}
    return CrawlParams(sources=str(sources), **settings)  # type: ignore[arg-type]


def _source(report: dict, name: str) -> dict:
    return next(entry for entry in report["fetch"]["sources"] if entry["source"] == name)


def test_pagination_reads_every_page_and_a_deleted_post_is_a_gap(tmp_path: Path, fake_telegram: FakeTelegram) -> None:
    result = fetch_sources(_params(tmp_path, fake_telegram, "big_channel"), tmp_path / "state")
    requests = fake_telegram.requests_to("big_channel")
    assert [r["before"] for r in requests] == [None, 25, 5]  # 20 per page, newest first, post 30 missing
    assert list(result.posts["post_id"]) == [str(i) for i in range(1, 46) if i != 30]
    first = result.posts.iloc[0]
    assert first["text"] == "پست شماره‌ی 1\nخط دوم پست 1"  # the <br/> is a line break
    assert first["date"] == "2024-01-02T06:31:00Z"  # +03:30 to UTC
    assert first["views"] == 1500
    entry = _source(result.report, "big_channel")
    assert (entry["pages"], entry["posts_new"], entry["cursor_after"]) == (3, 44, 45)
    assert all(r["user_agent"] == USER_AGENT for r in requests)


def test_rerun_fetches_only_new_posts_and_stores_none_twice(tmp_path: Path, fake_telegram: FakeTelegram) -> None:
    params = _params(tmp_path, fake_telegram, "big_channel")
    fetch_sources(params, tmp_path / "state")
    fake_telegram.channels["big_channel"].posts += [FakePost(id=i, html=f"تازه {i}") for i in (46, 47, 48)]
    fake_telegram.requests.clear()
    again = fetch_sources(params, tmp_path / "state")
    assert [r["before"] for r in fake_telegram.requests] == [None]  # the first page holds the cursor: no older page
    entry = _source(again.report, "big_channel")
    assert (entry["posts_new"], entry["posts_seen"], entry["cursor_after"]) == (3, 17, 48)
    assert len(again.posts) == 47 and again.posts["post_key"].is_unique
    stored = pq.read_table(tmp_path / "state" / "big_channel" / "posts.parquet").to_pandas()
    assert stored["post_key"].is_unique and len(stored) == 47
    fake_telegram.requests.clear()
    third = fetch_sources(params, tmp_path / "state")
    assert _source(third.report, "big_channel")["posts_new"] == 0 and len(fake_telegram.requests) == 1
    assert third.sha256 == again.sha256  # nothing new: the same table, so the stage after it is cached


def test_more_than_a_page_of_new_posts_walks_back_to_the_cursor(tmp_path: Path, fake_telegram: FakeTelegram) -> None:
    params = _params(tmp_path, fake_telegram, "big_channel")
    fetch_sources(params, tmp_path / "state")
    fake_telegram.channels["big_channel"].posts += [FakePost(id=i, html=f"تازه {i}") for i in range(46, 71)]
    fake_telegram.requests.clear()
    again = fetch_sources(params, tmp_path / "state")
    assert [r["before"] for r in fake_telegram.requests] == [None, 51]
    assert _source(again.report, "big_channel")["posts_new"] == 25
    assert len(again.posts) == 69


def test_429_waits_as_long_as_retry_after_says(tmp_path: Path, fake_telegram: FakeTelegram) -> None:
    fake_telegram.plan("429", channel="empty_channel")
    result = fetch_sources(_params(tmp_path, fake_telegram, "empty_channel"), tmp_path / "state")
    first, second = fake_telegram.requests_to("empty_channel")
    assert second["at"] - first["at"] >= 0.95  # Retry-After: 1, not the 0.05 s back-off
    assert result.report["fetch"]["totals"]["retries"] == 1
    assert "error" not in _source(result.report, "empty_channel")


def test_500_then_success_retries_with_back_off(tmp_path: Path, fake_telegram: FakeTelegram) -> None:
    fake_telegram.retry_after = ""  # no Retry-After: the back-off decides
    fake_telegram.plan("500", "500", channel="big_channel")
    result = fetch_sources(_params(tmp_path, fake_telegram, "big_channel", backoff=0.1), tmp_path / "state")
    at = [r["at"] for r in fake_telegram.requests_to("big_channel")]
    assert at[1] - at[0] >= 0.09 and at[2] - at[1] >= 0.19  # 0.1 s, then doubled
    assert _source(result.report, "big_channel")["posts_new"] == 44
    assert result.report["fetch"]["totals"]["retries"] == 2


def test_a_server_that_keeps_failing_is_reported_with_the_url_and_the_others_go_on(
    tmp_path: Path, fake_telegram: FakeTelegram
) -> None:
    fake_telegram.retry_after = "0"
    fake_telegram.plan("500", "500", "500", channel="big_channel")
    result = fetch_sources(_params(tmp_path, fake_telegram, "big_channel", "empty_channel"), tmp_path / "state")
    entry = _source(result.report, "big_channel")
    assert entry["error"] == f"{fake_telegram.channel_url('big_channel')}: HTTP 500 after 3 attempts"
    assert any(fake_telegram.channel_url("big_channel") in warning for warning in result.report["warnings"])
    assert entry["posts_new"] == 0 and entry["cursor_after"] is None
    assert "error" not in _source(result.report, "empty_channel")
    assert not (tmp_path / "state" / "big_channel" / "cursor.json").exists()


def test_a_retry_after_longer_than_max_wait_fails_at_once(tmp_path: Path, fake_telegram: FakeTelegram) -> None:
    fake_telegram.retry_after = "3600"
    fake_telegram.plan("429", channel="big_channel")
    result = fetch_sources(_params(tmp_path, fake_telegram, "big_channel", max_wait=10.0), tmp_path / "state")
    assert "asks to wait 3600 s, more than max_wait 10 s" in _source(result.report, "big_channel")["error"]
    assert len(fake_telegram.requests_to("big_channel")) == 1


def test_a_malformed_page_is_reported_and_the_cursor_waits_for_a_whole_walk(
    tmp_path: Path, fake_telegram: FakeTelegram
) -> None:
    params = _params(tmp_path, fake_telegram, "big_channel")
    fetch_sources(params, tmp_path / "state")
    fake_telegram.channels["big_channel"].posts += [FakePost(id=i, html=f"تازه {i}") for i in range(46, 71)]
    fake_telegram.plan("ok", "malformed", channel="big_channel")
    broken = fetch_sources(params, tmp_path / "state")
    entry = _source(broken.report, "big_channel")
    assert entry["error"].startswith(
        f"{fake_telegram.channel_url('big_channel')}?before=51: not a channel preview page"
    )
    assert entry["posts_new"] == 20 and entry["cursor_after"] == 45  # kept what it read; the cursor did not move
    healed = fetch_sources(params, tmp_path / "state")
    entry = _source(healed.report, "big_channel")
    assert (entry["posts_new"], entry["cursor_after"]) == (5, 70)
    assert healed.posts["post_key"].is_unique and len(healed.posts) == 69


def test_a_message_without_a_date_is_reported_not_skipped_silently(tmp_path: Path, fake_telegram: FakeTelegram) -> None:
    fake_telegram.plan("bad_message", channel="big_channel")
    result = fetch_sources(_params(tmp_path, fake_telegram, "big_channel"), tmp_path / "state")
    problem = f"{fake_telegram.channel_url('big_channel')}: post 25 has no valid time[datetime]; left out"
    assert _source(result.report, "big_channel")["problems"] == [problem]
    assert f"big_channel: {problem}" in result.report["warnings"]


def test_an_empty_channel_and_an_unknown_one(tmp_path: Path, fake_telegram: FakeTelegram) -> None:
    sources = tmp_path / "sources.toml"
    params = _params(tmp_path, fake_telegram, "empty_channel", "no_such_channel")
    result = fetch_sources(params, tmp_path / "state")
    empty = _source(result.report, "empty_channel")
    assert (empty["pages"], empty["posts_new"], empty["cursor_after"]) == (1, 0, None) and "error" not in empty
    unknown = _source(result.report, "no_such_channel")
    assert "redirected to /no_such_channel: the channel has no public preview" in unknown["error"]
    assert sources.is_file() and result.posts.empty


class _SendTimes(httpx.HTTPTransport):
    """The real transport, noting when each request leaves the crawler (what its rate limit promises: a request's
    arrival at the server also waits for the connection, so gaps measured there shrink on a loaded machine)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[float] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(time.monotonic())
        return super().handle_request(request)


def test_requests_to_one_host_keep_the_minimum_interval(tmp_path: Path, fake_telegram: FakeTelegram) -> None:
    transport = _SendTimes()
    params = _params(tmp_path, fake_telegram, "big_channel", "empty_channel", min_interval=0.2)
    fetch_sources(params, tmp_path / "state", transport=transport)
    assert len(fake_telegram.requests) == len(transport.sent) == 4
    # 0.2 s apart, less what a busy machine may put between a request's turn and its send (a limiter that does
    # not wait sends them milliseconds apart)
    assert min(b - a for a, b in itertools.pairwise(transport.sent)) >= 0.15


def test_no_sources_configured_skips_and_says_why(tmp_path: Path) -> None:
    result = fetch_sources(CrawlParams(), tmp_path / "state")
    assert result.report["skipped"] is True and "no crawl sources configured" in result.report["skip_reason"]
    assert result.posts.empty and not (tmp_path / "state").exists()


# --- parsing ---------------------------------------------------------------------------------------------------


def test_the_page_parser_reads_a_post_as_telegram_renders_it() -> None:
    post = FakePost(
        id=7,
        html='سلام<br/>به <a href="https://t.me/some_person">یک نام</a> و <a href="https://t.me/x">@x_handle</a>'
        ' <i class="emoji"><b>😂</b></i>',
        date="2024-05-01T12:00:00+00:00",
        views="3.4M",
        author="امضای نویسنده",
        forwarded_from=("other_channel", "https://t.me/other_channel/99"),
    )
    page = parse_preview_page(render_page(FakeChannel("c_one", posts=[post]), None), "u")
    (parsed,) = page.posts
    assert parsed.post_id == 7 and parsed.date == "2024-05-01T12:00:00Z" and parsed.views == 3_400_000
    assert parsed.segments == (
        ("سلام", None),
        ("\n", None),
        ("به ", None),
        ("یک نام", "name"),
        (" و ", None),
        ("@x_handle", "handle"),
        (" ", None),
        ("😂", None),
    )
    assert parsed.forwarded_from == ("other_channel", None)
    assert "امضای نویسنده" not in repr(parsed)  # the signature is never read
    person = FakePost(id=8, html="x", forwarded_from=("یک شخص", None))
    (forward,) = parse_preview_page(render_page(FakeChannel("c_one", posts=[person]), None), "u").posts
    assert forward.forwarded_from == ("یک شخص", "name")


@pytest.mark.parametrize(("text", "views"), [("845", 845), ("1.2K", 1200), ("3.4M", 3_400_000), ("x", None)])
def test_views(text: str, views: int | None) -> None:
    assert parse_views(text) == views


# --- personal data ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "scrubbed", "kind"),
    [
        ("با ۰۹۱۲ ۳۴۵ ۶۷۸۹ تماس بگیرید", "با [PHONE] تماس بگیرید", "phone"),
        ("شماره +98 912 345 6789 است", "شماره [PHONE] است", "phone"),
        ("شماره 0098-21-88776655 است", "شماره [PHONE] است", "phone"),
        ("دفتر ۰۲۱-۶۶۵۵۴۴۳۳ است", "دفتر [PHONE] است", "phone"),
        ("شماره9123456789را", "شماره[PHONE]را", "phone"),
        ("ایمیل a.b@example.com لطفا", "ایمیل [EMAIL] لطفا", "email"),
        ("ادمین @some_admin است", "ادمین [HANDLE] است", "handle"),
        ("ببینید https://example.org/a?b=1، ممنون", "ببینید [URL]، ممنون", "url"),
        ("گروه t.me/joinchat/AbC و", "گروه [URL] و", "url"),
        ("سایت www.shop.ir/x را", "سایت [URL] را", "url"),
        ("کارت ۶۰۳۷-۹۹۷۵-۱۲۳۴-۵۶۷۸ به نام", "کارت [ACCOUNT] به نام", "account"),
        ("شبا IR120170000000123456789012 است", "شبا [ACCOUNT] است", "account"),
    ],
)
def test_each_kind_of_personal_data_is_replaced_and_the_text_around_it_kept(raw: str, scrubbed: str, kind: str) -> None:
    result = scrub_segments([(raw, None)])
    assert result.text == scrubbed and result.counts == {kind: 1}


def test_numbers_that_are_not_personal_data_stay() -> None:
    text = "سال ۱۴۰۲ قیمت 250000 تومان، تاریخ 1402/05/12 و 12345678 بازدید"
    assert scrub_segments([(text, None)]).text == normalize_fa(text)


def test_tagged_segments_become_placeholders_whole() -> None:
    result = scrub_segments([("سلام ", None), ("هوشنگ نمونه", "name"), ("\n\nخط دوم", None)])
    assert result.text == "سلام [NAME]\nخط دوم" and result.counts == {"name": 1}


# --- exports and the sources file ------------------------------------------------------------------------------


def test_a_telegram_export_and_a_manual_export_go_through_the_same_path(tmp_path: Path) -> None:
    sources = tmp_path / "sources.toml"
    sources.write_text(
        f'allowed_paths = ["{CRAWL_SAMPLE / "exports"}"]\n\n'
        f'[[source]]\nname = "exp"\nkind = "telegram_export"\nurl = "https://t.me/exp"\n'
        f'file = "{CRAWL_SAMPLE / "exports" / "sample_export_result.json"}"\n\n'
        f'[[source]]\nname = "xs"\nkind = "manual"\nurl = "https://x.com/xs"\n'
        f'file = "{CRAWL_SAMPLE / "exports" / "sample_x_posts.csv"}"\n'
        f'\n[[source]]\nname = "ig"\nkind = "manual"\nurl = "https://www.instagram.com/ig"\n',
        encoding="utf-8",
    )
    result = fetch_sources(CrawlParams(sources=str(sources)), tmp_path / "state")
    posts = result.posts.set_index("post_key")
    assert list(posts.index[posts["source"] == "exp"]) == ["exp/2", "exp/3", "exp/4", "exp/5", "exp/6"]  # no service
    assert posts.at["exp/3", "text"] == "سلام به [NAME] و [HANDLE] ! شماره‌ی [PHONE] و ایمیل [EMAIL] را یادداشت کنید."
    assert posts.at["exp/4", "text"] == "متن کامل: [URL] و اینجا و کارت [ACCOUNT]"  # a text_link keeps its text only
    assert posts.at["exp/5", "forwarded_from"] == "[NAME]" and posts.at["exp/6", "forwarded_from"] == "sample_jokes_a"
    assert posts.at["exp/2", "date"] == "2024-02-02T10:00:00Z"
    assert posts.at["xs/1750000000000000001", "text"] == "خانم‌ها هیچ‌وقت نمی‌تونن درست پارک کنن!\nاین را [HANDLE] گفت."
    assert "no export file" in _source(result.report, "ig")["skipped"]
    again = fetch_sources(CrawlParams(sources=str(sources)), tmp_path / "state")
    assert again.report["fetch"]["totals"]["posts_new"] == 0 and again.report["fetch"]["totals"]["posts_seen"] == 8


def test_a_bad_manual_export_names_the_file_and_the_row(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("post_id,date,text\n1,2024-01-01,سلام\n2,,متن\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"x\.csv, row 3: empty date"):
        read_manual_export(path)
    path.write_text("post_id,date,text\n1,yesterday,سلام\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"row 2: date 'yesterday' is not ISO 8601"):
        read_manual_export(path)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('[[source]]\nname = "a b"\nkind = "telegram"\nurl = "https://t.me/abc"\n', "name 'a b' must be"),
        ('[[source]]\nname = "a"\nkind = "rss"\nurl = "https://t.me/abc"\n', "kind 'rss' is not one of"),
        ('[[source]]\nname = "a"\nkind = "telegram"\nurl = "https://t.me/abc/12/x"\n', "is not a channel address"),
        ('[[source]]\nname = "a"\nkind = "telegram_export"\nurl = "https://t.me/abc"\n', "needs file"),
        ('[[source]]\nname = "a"\nkind = "telegram"\nurl = "https://t.me/abc"\nlimit = 3\n', "unknown key(s) limit"),
    ],
)
def test_a_bad_sources_file_names_the_entry_and_the_problem(tmp_path: Path, body: str, problem: str) -> None:
    path = tmp_path / "sources.toml"
    message = refusal(load_sources, path, body)
    assert message.startswith(f"{path}: [[source]] number 1") and problem in message


def test_the_default_sources_are_the_papers_appendix_a() -> None:
    sources = load_sources(REPO_ROOT / "crawl" / "sources.toml")
    kinds = pd.Series([source.kind for source in sources]).value_counts().to_dict()
    assert kinds == {"telegram": 14, "manual": 13}
    assert sources[0].url == "https://t.me/s/weeklyofnationaljokes"
    assert {s.url for s in sources} >= {"https://www.instagram.com/liberalabad", "https://x.com/Forouzandy"}


# --- nothing personal under the outputs folder -----------------------------------------------------------------


def _sample_crawl_config(tmp_path: Path) -> Path:
    config = tmp_path / "crawl.toml"
    sources, pages = CRAWL_SAMPLE / "sources.toml", CRAWL_SAMPLE / "pages"
    config.write_text(
        f'[crawl]\nsources = "{sources}"\nrecorded_pages = "{pages}"\nmin_interval = 0.0\n', encoding="utf-8"
    )
    return config


def test_pbbq_crawl_leaves_no_planted_personal_data_anywhere_under_the_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = tmp_path / "outputs"
    config = _sample_crawl_config(tmp_path)
    assert main(["crawl", "--config", str(config), "--outputs", str(outputs), "--run-id", "one"]) == 0
    assert main(["crawl", "--config", str(config), "--outputs", str(outputs), "--run-id", "two"]) == 0
    printed = capsys.readouterr().out
    assert "fetched 59 posts: 59 new, 0 already stored; the store holds 59 posts from 4 sources" in printed
    assert "22 candidate stereotypes in them, in 15 clusters of near-duplicates" in printed
    assert "fetched 35 posts: 0 new, 35 already stored; the store holds 59 posts from 4 sources" in printed
    report = json.loads((outputs / "one" / "01_crawl" / "report.json").read_text())
    assert report["fetch"]["scrubbed"] == {"account": 2, "email": 2, "handle": 3, "name": 4, "phone": 6, "url": 6}
    texts = texts_under(outputs)
    assert {path.name for path, _ in texts} >= {"posts.parquet", "cursor.json", "review.csv", "report.json"}
    assert planted_leaks(outputs, texts) == []
    posts = pd.read_parquet(outputs / "one" / "01_crawl" / "posts.parquet").set_index("post_key")
    assert posts.at["sample_jokes_a/3", "text"] == "برای سفارش با [PHONE] تماس بگیرید و سلام ما را برسانید."
    assert posts.at["sample_forwards_b/3", "forwarded_from"] == "[NAME]"


def test_a_page_is_never_kept_raw(tmp_path: Path, fake_telegram: FakeTelegram) -> None:
    fetch_sources(_params(tmp_path, fake_telegram, "big_channel"), tmp_path / "state")
    names = sorted(p.relative_to(tmp_path / "state").as_posix() for p in (tmp_path / "state").rglob("*") if p.is_file())
    assert names == ["big_channel/cursor.json", "big_channel/posts.parquet"]  # the table and the cursor only


def test_a_skipped_crawl_writes_empty_tables_and_says_why(tmp_path: Path) -> None:
    from pbbq.tasks.crawl import crawl, crawl_counts, with_fetch_report
    from pbbq.tasks.crawl.candidates import load_lexicon

    fetched = fetch_sources(CrawlParams(), tmp_path / "state")
    output = with_fetch_report(
        crawl(fetched.posts, load_lexicon(REPO_ROOT / "annotations/lexicon/lexicon.csv"), CrawlParams()), fetched
    )
    assert output.report["skipped"] is True and output.report["skip_reason"].startswith("no crawl sources configured")
    assert all(table.empty for table in output.tables.values())
    assert crawl_counts(output) is None  # the funnel then starts at the surveyed stereotypes
    ran = with_fetch_report(output, dataclasses.replace(fetched, report={"skipped": False}))
    assert crawl_counts(ran) == {"crawled_posts": 0, "candidates": 0, "clusters": 0}


def test_pbbq_crawl_against_the_fake_server_crawls_resumes_and_scrubs(
    tmp_path: Path, fake_telegram: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_telegram.channels["big_channel"].posts[
        0
    ].html = "تماس: ۰۹۱۲ ۳۴۵ ۶۷۸۹ یا @someone_here<br/>همه‌ی اصفهانیا همیشه حسابگرن"
    params = _params(tmp_path, fake_telegram, "big_channel", "empty_channel")
    config = tmp_path / "crawl.toml"
    config.write_text(f'[crawl]\nsources = "{params.sources}"\nmin_interval = 0.0\n', encoding="utf-8")
    run = ["crawl", "--config", str(config), "--outputs", str(tmp_path / "out")]
    assert main([*run, "--run-id", "a"]) == 0
    assert main([*run, "--run-id", "b"]) == 0
    fake_telegram.channels["big_channel"].posts.append(FakePost(id=46, html="رشتیا همیشه خونسردن"))
    assert main([*run, "--run-id", "c"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("fetched")]
    assert lines == [
        "fetched 44 posts: 44 new, 0 already stored; the store holds 44 posts from 1 source",
        "fetched 20 posts: 0 new, 20 already stored; the store holds 44 posts from 1 source",
        "fetched 20 posts: 1 new, 19 already stored; the store holds 45 posts from 1 source",  # page one: 46, 19 more
    ]
    assert [r["before"] for r in fake_telegram.requests_to("big_channel")] == [None, 25, 5, None, None]
    posts = pd.read_parquet(tmp_path / "out" / "c" / "01_crawl" / "posts.parquet").set_index("post_key")
    assert posts.at["big_channel/1", "text"] == "تماس: [PHONE] یا [HANDLE]\nهمه‌ی اصفهانیا همیشه حسابگرن"
    clusters = pd.read_parquet(tmp_path / "out" / "c" / "01_crawl" / "clusters.parquet")
    assert sorted(clusters["group"]) == ["اصفهانی‌ها", "رشتی‌ها"]


def test_a_bad_crawl_parameter_names_the_section_and_the_key(sample_copy: Path) -> None:
    from pbbq.flows.config import ConfigError, load_config

    config = sample_copy / "configs" / "sample.toml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("similarity = 0.5", "similarity = 2.0"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[crawl\] similarity = 2.0 is outside 1e-09 … 1"):
        load_config(config)
    config.write_text(text.replace("similarity = 0.5", "simmilarity = 0.5"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[crawl\] has unknown key\(s\) simmilarity"):
        load_config(config)
    config.write_text(text, encoding="utf-8")
    assert load_config(config).crawl.sources == str(sample_copy / "crawl" / "sample" / "sources.toml")
