"""Reading Telegram exports is linear in their size: 10k, 30k and 100k messages through the crawler, against a floor.

    python -m benchmarks.crawl_exports [--rows 10000 30000 100000]

Each size is a generated Telegram Desktop ``result.json`` (SYNTHETIC: forwarded jokes repeated across the
channel, statements about groups of the lexicon, chatter, personal data in entities and text). Three timings per
size, in one run, side by side:

- **fetch**: :func:`pbbq.tasks.crawl.fetch.fetch_sources` on a fresh store (read, scrub, store the parquet);
- **floor**: ``json.load`` of the file and :func:`pbbq.tasks.crawl.scrub.scrub_segments` of every message alone, what
  any reader of the export must do at least;
- **stage**: :func:`pbbq.tasks.crawl.crawl` on the fetched posts (candidates, near-duplicate clusters, review).

The table gives each in seconds, fetch / floor, and microseconds per message: linear reading keeps the per-message
figures flat from 10k to 100k.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from pbbq.tasks.core.markdown import markdown_table
from pbbq.tasks.crawl import CrawlParams, crawl
from pbbq.tasks.crawl.candidates import load_lexicon
from pbbq.tasks.crawl.fetch import fetch_sources
from pbbq.tasks.crawl.scrub import scrub_segments
from pbbq.tasks.crawl.telegram import export_segments

CHATTER = [
    "امروز",
    "هوا",
    "خوب",
    "بود",
    "و",
    "ما",
    "رفتیم",
    "بیرون",
    "تا",
    "کمی",
    "قدم",
    "بزنیم",
    "اما",
    "باران",
    "آمد",
    "کتاب",
    "خواندم",
    "فیلم",
    "دیدم",
]
CUES = ("همیشه", "همه‌ی", "هیچ‌وقت", "معروفند به", "مثل")


def export(rows: int, terms: list[str], seed: int = 13) -> dict:
    """A Telegram Desktop export of one channel with ``rows`` messages (see the module docstring)."""
    rng = random.Random(seed)
    jokes = [f"{rng.choice(CUES)} {term}ها {rng.choice(CHATTER)} {rng.choice(CHATTER)}ند." for term in terms[:30]]
    messages = []
    for i in range(1, rows + 1):
        chatter = " ".join(rng.choices(CHATTER, k=rng.randint(5, 30)))
        draw = rng.random()
        if draw < 0.2:  # a forwarded joke, word for word
            text: object = f"{rng.choice(jokes)} {chatter}"
        elif draw < 0.35:  # a statement of its own
            term = rng.choice(terms)
            text = f"{rng.choice(CUES)} {term}ها {rng.choice(CHATTER)} {rng.choice(CHATTER)} {i}ند. {chatter}"
        elif draw < 0.45:  # personal data, tagged and in the text
            text = [f"{chatter} تماس ۰۹۱۲ ۳۴۵ {i % 10000:04d} ", {"type": "mention", "text": f"@user_{i}"}, " ."]
        else:
            text = chatter
        messages.append({"id": i, "type": "message", "date_unixtime": str(1_706_781_600 + 60 * i), "text": text})
    return {"name": "benchmark (synthetic)", "type": "public_channel", "messages": messages}


def floor(path: Path) -> int:
    """What any reader does at least: parse the JSON and scrub every message's text."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return sum(len(scrub_segments(export_segments(m["text"], "")).text) for m in data["messages"])


def measure(rows: int, folder: Path, lexicon_path: Path) -> list[object]:
    lexicon = load_lexicon(lexicon_path)
    path = folder / f"result-{rows}.json"
    path.write_text(json.dumps(export(rows, list(lexicon["term"])), ensure_ascii=False), encoding="utf-8")
    sources = folder / f"sources-{rows}.toml"
    sources.write_text(
        f'[[source]]\nname = "bench"\nkind = "telegram_export"\nurl = "https://t.me/bench"\nfile = "{path.name}"\n',
        encoding="utf-8",
    )
    params = CrawlParams(sources=str(sources))
    start = time.perf_counter()
    fetched = fetch_sources(params, folder / f"state-{rows}")
    fetch_s = time.perf_counter() - start
    assert len(fetched.posts) == rows, f"read {len(fetched.posts)} of {rows} messages"
    start = time.perf_counter()
    floor(path)
    floor_s = time.perf_counter() - start
    start = time.perf_counter()
    output = crawl(fetched.posts, lexicon, params)
    stage_s = time.perf_counter() - start
    counts = output.report["counts"]
    return [
        f"{rows:,}",
        f"{fetch_s:.1f}",
        f"{floor_s:.1f}",
        f"{fetch_s / floor_s:.2f}",
        f"{1e6 * fetch_s / rows:.0f}",
        f"{stage_s:.1f}",
        f"{1e6 * stage_s / rows:.0f}",
        f"{counts['candidates']:,} / {counts['clusters']:,}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    args = parser.parse_args()
    lexicon_path = CrawlParams().lexicon_path
    import sklearn.cluster  # noqa: F401  (loaded before the first timing, as a second crawl finds it)

    with tempfile.TemporaryDirectory(prefix="pbbq-crawl-bench-") as folder:
        rows = [measure(n, Path(folder), lexicon_path) for n in args.rows]
    headers = [
        "messages",
        "fetch (s)",
        "floor: json + scrub (s)",
        "fetch / floor",
        "fetch µs / message",
        "stage (s)",
        "stage µs / message",
        "candidates / clusters",
    ]
    print(markdown_table(headers, rows, right_from=1))


if __name__ == "__main__":
    main()
