"""Record the sample's Telegram preview pages (``crawl/sample/pages/``) from its synthetic posts.

The posts (``posts.json``) are synthetic: written for the sample, labelled so. This script serves them from the
fake t.me (``tests/fakes/telegram_server.py``, the real page structure) on 127.0.0.1 and saves every page the
crawler asks for, named as ``pbbq.tasks.crawl.telegram.RecordedPages`` reads them, so the sample build crawls offline
through the same fetch and parse code as a real crawl. Run it after changing ``posts.json``:

    .venv/bin/python crawl/sample/record_pages.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from pbbq.tasks.crawl.telegram import FetchSettings, PreviewFetcher, RecordedPages, page_url, parse_preview_page  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram, load_channels  # noqa: E402

PAGES = HERE / "pages"


def record() -> list[Path]:
    """Write one file per page of every channel; returns the files, oldest page last."""
    PAGES.mkdir(exist_ok=True)
    for old in PAGES.glob("*.html"):
        old.unlink()
    written = []
    channels = load_channels(HERE / "posts.json")
    with FakeTelegram(channels) as fake, PreviewFetcher(FetchSettings(min_interval=0.0)) as fetcher:
        for channel in channels:
            url = fake.channel_url(channel.name)
            while True:
                html = fetcher.get(url)
                target = PAGES / RecordedPages.file_name(url)
                target.write_text(html, encoding="utf-8")
                written.append(target)
                page = parse_preview_page(html, url)
                if page.before is None:
                    break
                url = page_url(fake.channel_url(channel.name), page.before)
    return written


if __name__ == "__main__":
    for path in record():
        print(path.relative_to(HERE.parents[1]))
