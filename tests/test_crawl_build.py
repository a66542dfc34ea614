"""Stage 01 in the sample build: it runs first, offline from the recorded pages, the funnel starts at its posts,
a second build reuses it, and nothing personal reaches the outputs folder."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.helpers import planted_leaks, texts_under


def test_the_sample_build_crawls_first_and_its_funnel_starts_at_the_crawled_posts(
    two_builds: tuple[Path, Path],
) -> None:
    first, second = two_builds
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["stages"][0]["folder"] == "01_crawl"
    assert {"crawl_sources", "crawl_export_sample_export", "crawl_export_sample_x", "lexicon"} <= set(
        manifest["inputs"]
    )
    funnel = pd.read_parquet(first / "09_statistics" / "funnel.parquet")
    assert funnel["step"].tolist()[:4] == ["posts", "candidates", "candidate_clusters", "surveyed"]
    assert funnel["count"].tolist()[:3] == [59, 22, 15]
    one = json.loads((first / "01_crawl" / "report.json").read_text())
    two = json.loads((second / "01_crawl" / "report.json").read_text())
    assert (one["cached"], one["fetch"]["totals"]["posts_new"]) == (False, 59)
    assert (two["cached"], two["fetch"]["totals"]["posts_new"], two["fetch"]["totals"]["posts_seen"]) == (True, 0, 35)
    posts = pd.read_parquet(first / "01_crawl" / "posts.parquet")
    candidates = pd.read_parquet(first / "01_crawl" / "candidates.parquet")
    dropped = pd.read_parquet(first / "01_crawl" / "dropped.parquet")
    assert len(dropped) == one["dropped"]["total"] == 38 and set(dropped["reason"]) == {"no_candidate_in_post"}
    assert set(dropped["post_key"]) == set(posts["post_key"]) - set(candidates["post_key"])  # every post accounted
    for name in ("posts", "candidates", "clusters", "dropped"):
        assert (first / "01_crawl" / f"{name}.parquet").read_bytes() == (
            second / "01_crawl" / f"{name}.parquet"
        ).read_bytes()


def test_the_sample_build_leaves_no_planted_personal_data_under_its_outputs(two_builds: tuple[Path, Path]) -> None:
    outputs = two_builds[0].parent
    texts = texts_under(outputs)
    assert any("[PHONE]" in text for path, text in texts if ".cache" in path.parts)  # the cached results are read
    assert planted_leaks(outputs, texts) == []
