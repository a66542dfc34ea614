"""What the crawl may reach and how much it reads: only t.me and telegram.me unless a host is allowed by name,
exports only under the sources file's folder unless a folder is allowed, posts over a size limit left out with
a warning, a crawl store that is a link refused, and an export's store that follows its file."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from pbbq.flows.cli import main
from pbbq.tasks.core.inputs import InputError
from pbbq.tasks.crawl import CrawlParams
from pbbq.tasks.crawl.fetch import fetch_sources
from pbbq.tasks.crawl.sources import load_sources
from tests.fakes.telegram_server import FakeChannel, FakePost, FakeTelegram


@pytest.fixture
def fake_telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram([FakeChannel("probe_internal", posts=[FakePost(id=1, html="متن داخلی")])]) as server:
        yield server


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _manual(path: Path, posts: list[tuple[int, str]]) -> Path:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["post_id", "date", "text"])
    writer.writerows((post_id, "2024-03-01T08:00:00+00:00", text) for post_id, text in posts)
    return _write(path, buffer.getvalue())


def _manual_source(folder: Path, file: str = "x.csv", extra: str = "") -> Path:
    body = f'[[source]]\nname = "xs"\nkind = "manual"\nurl = "https://x.com/xs"\nfile = "{file}"\n{extra}'
    return _write(folder / "sources.toml", body)


# --- hosts ---------------------------------------------------------------------------------------------------


def test_a_host_other_than_telegram_is_refused_naming_the_file_and_the_source(
    tmp_path: Path, fake_telegram: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    url = fake_telegram.channel_url("probe_internal")
    sources = _write(tmp_path / "sources.toml", f'[[source]]\nname = "probe"\nkind = "telegram"\nurl = "{url}"\n')
    config = _write(tmp_path / "crawl.toml", f'[crawl]\nsources = "{sources}"\nmin_interval = 0.0\n')
    assert main(["crawl", "--config", str(config), "--outputs", str(tmp_path / "out"), "--run-id", "a"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"pbbq: error: {sources}: [[source]] number 1 (probe): url {url} is not on https://t.me or "
        f"https://telegram.me; to crawl another host, name it in allowed_hosts (this file's or [crawl]'s), e.g. "
        f'allowed_hosts = ["{fake_telegram.host}"]'
    )
    assert fake_telegram.requests == []  # nothing fetched
    assert not (tmp_path / "out").exists()  # refused before a run folder exists


@pytest.mark.parametrize("where", ["sources", "config"])
def test_a_host_allowed_by_name_is_crawled(tmp_path: Path, fake_telegram: FakeTelegram, where: str) -> None:
    url = fake_telegram.channel_url("probe_internal")
    allow = f'allowed_hosts = ["{fake_telegram.host}"]\n'
    body = f'[[source]]\nname = "probe"\nkind = "telegram"\nurl = "{url}"\n'
    sources = _write(tmp_path / "sources.toml", (allow if where == "sources" else "") + body)
    config = _write(
        tmp_path / "crawl.toml",
        f'[crawl]\nsources = "{sources}"\nmin_interval = 0.0\n' + (allow if where == "config" else ""),
    )
    assert main(["crawl", "--config", str(config), "--outputs", str(tmp_path / "out"), "--run-id", "a"]) == 0
    posts = pd.read_parquet(tmp_path / "out" / "a" / "01_crawl" / "posts.parquet")
    assert posts["text"].tolist() == ["متن داخلی"]


@pytest.mark.parametrize(
    "url",
    [
        "http://t.me/s/channel",  # not https
        "https://t.me.example.org/s/channel",
        "https://127.0.0.1:8443/s/channel",  # the host is allowed on another port only
    ],
)
def test_telegram_lookalikes_and_other_ports_are_refused(tmp_path: Path, url: str) -> None:
    body = f'allowed_hosts = ["127.0.0.1:18931"]\n[[source]]\nname = "c"\nkind = "telegram"\nurl = "{url}"\n'
    with pytest.raises(InputError, match=r"\[\[source\]\] number 1 \(c\): url .* is not on https://t.me"):
        load_sources(_write(tmp_path / "sources.toml", body))


def test_the_build_configuration_takes_allowed_hosts_and_paths_as_lists(sample_copy: Path) -> None:
    from pbbq.flows.config import ConfigError, load_config

    config = sample_copy / "configs" / "sample.toml"
    text = config.read_text(encoding="utf-8")
    extra = 'allowed_hosts = ["127.0.0.1:18931"]\nallowed_paths = ["../exports"]\nmax_post_chars = 1000\n'
    config.write_text(text.replace("[crawl]\n", "[crawl]\n" + extra), encoding="utf-8")
    crawl = load_config(config).crawl
    assert crawl.allowed_hosts == ("127.0.0.1:18931",) and crawl.max_post_chars == 1000
    assert crawl.allowed_paths == (str(sample_copy / "exports"),)
    for bad in ('allowed_hosts = "127.0.0.1"', 'allowed_paths = ["a\\u0000b"]'):
        config.write_text(text.replace("[crawl]\n", f"[crawl]\n{bad}\n"), encoding="utf-8")
        with pytest.raises(ConfigError, match=r"\[crawl\] allowed_(host|path)s must be a list of non-empty strings"):
            load_config(config)


# --- files ---------------------------------------------------------------------------------------------------


def test_an_export_outside_the_sources_folder_is_refused_unless_its_folder_is_allowed(tmp_path: Path) -> None:
    private = _write(
        tmp_path / "private" / "private.json", json.dumps([{"post_id": 1, "date": "2024-01-01", "text": "x"}])
    )
    sources = _manual_source(tmp_path / "crawl", str(private))
    with pytest.raises(InputError) as error:
        fetch_sources(CrawlParams(sources=str(sources)), tmp_path / "state")
    assert str(error.value) == (
        f"{sources}: [[source]] number 1 (xs): file {private} is outside {tmp_path / 'crawl'}, the sources "
        "file's folder; to read it, name its folder in allowed_paths (this file's or [crawl]'s)"
    )
    assert not (tmp_path / "state").exists()
    allowed = fetch_sources(CrawlParams(sources=str(sources), allowed_paths=(str(private.parent),)), tmp_path / "s")
    assert allowed.posts["text"].tolist() == ["x"]


def test_a_link_inside_the_sources_folder_to_a_file_outside_is_refused(tmp_path: Path) -> None:
    private = _manual(tmp_path / "private" / "x.csv", [(1, "خصوصی")])
    sources = _manual_source(tmp_path / "crawl", "x.csv")
    (tmp_path / "crawl" / "x.csv").symlink_to(private)
    with pytest.raises(InputError, match=r"file .*private/x\.csv is outside"):
        load_sources(sources)


def test_a_post_over_the_size_limit_is_left_out_with_a_warning_naming_the_file_and_the_post(tmp_path: Path) -> None:
    export = _manual(tmp_path / "x.csv", [(1, "کوتاه"), (2, "ب" * 101), (3, "کوتاه هم")])
    result = fetch_sources(CrawlParams(sources=str(_manual_source(tmp_path)), max_post_chars=100), tmp_path / "state")
    assert result.posts["post_id"].tolist() == ["1", "3"]
    assert result.report["warnings"] == [
        f"xs: {export}: post 2 has 101 characters of text, more than max_post_chars = 100; left out"
    ]
    assert result.report["fetch"]["totals"]["posts_too_long"] == 1


def test_a_csv_export_with_a_field_over_the_readers_limit_names_the_file_and_the_row(tmp_path: Path) -> None:
    export = _manual(tmp_path / "x.csv", [(1, "کوتاه"), (2, "ب" * 200_000)])
    with pytest.raises(InputError) as error:
        fetch_sources(CrawlParams(sources=str(_manual_source(tmp_path))), tmp_path / "state")
    assert str(error.value).startswith(f"{export}, row 3: a field longer than 131072 characters")


def test_a_crawl_store_that_is_a_link_is_refused_and_where_it_points_is_untouched(tmp_path: Path) -> None:
    _manual(tmp_path / "crawl" / "x.csv", [(1, "متن")])
    sources = _manual_source(tmp_path / "crawl")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "xs").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(InputError) as error:
        fetch_sources(CrawlParams(sources=str(sources)), tmp_path / "state")
    assert str(error.value).startswith(f"{tmp_path / 'state' / 'xs'}: is a symbolic link; a crawl store is a folder")
    assert list(elsewhere.iterdir()) == []


# --- an export's store follows its file ------------------------------------------------------------------------


def test_a_post_removed_from_an_export_is_removed_from_the_store_and_the_report_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = _manual(tmp_path / "crawl" / "x.csv", [(1, "یک"), (2, "دو"), (3, "سه")])
    config = _write(tmp_path / "crawl.toml", f'[crawl]\nsources = "{_manual_source(tmp_path / "crawl")}"\n')
    run = ["crawl", "--config", str(config), "--outputs", str(tmp_path / "out")]
    assert main([*run, "--run-id", "a"]) == 0
    _manual(export, [(1, "یک"), (3, "سه، ویرایش شده")])
    capsys.readouterr()
    assert main([*run, "--run-id", "b"]) == 0
    captured = capsys.readouterr()
    assert "crawl xs: read 2 posts: 0 new, 2 already stored; 1 post removed since the last crawl" in captured.err
    assert (
        "fetched 2 posts: 0 new, 2 already stored; 1 post removed since the last crawl; the store holds 2 posts "
        "from 1 source" in captured.out
    )
    stored = pq.read_table(tmp_path / "out" / ".crawl" / "xs" / "posts.parquet").to_pandas()
    assert stored[["post_id", "text"]].values.tolist() == [["1", "یک"], ["3", "سه، ویرایش شده"]]
    report = json.loads((tmp_path / "out" / "b" / "01_crawl" / "report.json").read_text(encoding="utf-8"))
    assert report["fetch"]["totals"]["posts_removed"] == 1


def test_an_export_is_read_whole_whatever_max_posts_says(tmp_path: Path) -> None:
    _manual(tmp_path / "x.csv", [(i, f"پست {i}") for i in range(1, 1501)])
    result = fetch_sources(CrawlParams(sources=str(_manual_source(tmp_path)), max_posts=1000), tmp_path / "state")
    assert len(result.posts) == 1500 and result.report["fetch"]["totals"]["posts_new"] == 1500
    with pytest.raises(InputError, match=r"\(xs\): max_posts limits a channel's walk; an export is read whole"):
        load_sources(_manual_source(tmp_path, extra="max_posts = 1000\n"))
