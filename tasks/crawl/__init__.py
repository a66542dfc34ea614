"""Stage 01, crawl: public Telegram channels and exports → scrubbed posts → candidate stereotypes → the experts'
review sheet (PBBQ §3.2, Appendix A; docs/architecture.md, crawl).

Two steps, because one of them reads the outside world:

1. :func:`.fetch.fetch_sources` reads every configured source (``crawl/sources.toml``: the paper's Appendix A channels)
   and keeps what it read under the outputs folder (``<outputs>/.crawl/<source>/``): the scrubbed posts and, for
   a channel, a cursor (the newest post id seen). A rerun fetches only the pages down to the cursor and stores no
   post twice. A channel's cursor moves only when its walk joined the posts already stored (or reached the
   channel's first post, or the source's post limit), so a walk cut short by an error leaves no gap behind. An
   export's store is replaced by what its file holds now, read whole.
   Personal data is replaced before any row exists (:mod:`pbbq.tasks.crawl.scrub`); the raw HTML is never kept. It is
   not a cached task: its input is the network.
2. :func:`crawl` (the cached task ``crawl_task``) finds candidates in the posts, collapses near-duplicates and
   writes ``posts``, ``candidates``, ``clusters`` and ``review.csv`` (:mod:`pbbq.tasks.crawl.candidates`).

A source that fails (a page that does not parse, a server that keeps refusing) is reported with its URL as a
warning and the others go on; a wrong sources file or export file stops the run with one message naming it. What
a sources file may reach is closed by default (:func:`.sources.load_sources`): channels on t.me and telegram.me,
exports under its own folder, other hosts and folders only when allowed by name.

One job per module: :mod:`.sources` (the ``[crawl]`` parameters and the sources file), :mod:`.kinds` (the source
kinds, one class each, in a registry), :mod:`.store` (what a source keeps between runs), :mod:`.fetch` (step 1),
:mod:`.telegram` (the preview pages and the exports), :mod:`.scrub` (personal data), :mod:`.candidates` (step
2's rules), :mod:`.survey_form` (the survey form); here step 2 as the stage :data:`STAGE`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from ..core.artifacts import StageOutput
from ..core.stage import Client, Input, Resource, Stage
from .candidates import (
    CANDIDATE,
    CLUSTER,
    PROMPT_FILE,
    STAGE_NAME,
    GroupMatcher,
    cluster_candidates,
    lexicon_candidates,
    llm_candidates,
    load_lexicon,
    people_csv,
    placeholders_by_kind,
    review_sheet,
)
from .fetch import FetchResult
from .sources import CrawlParams
from .store import POST

if TYPE_CHECKING:  # the LLM SDKs load only when the extractor runs
    from ..llm import LLMClient

DROPPED_POST = POST.append(pa.field("reason", pa.string()))
"""A post that gave no candidate (``no_candidate_in_post``): kept whole in ``01_crawl/dropped``."""


def crawl(
    posts: pd.DataFrame,
    lexicon: pd.DataFrame,
    params: CrawlParams,
    client: LLMClient | None = None,
    prompt: str = "",
) -> StageOutput:
    """Candidates (lexicon and cues; the LLM extractor when ``client`` is given), their clusters and the review
    sheet of ``posts``."""
    if params.llm_extractor and client is None:
        raise ValueError("[crawl] llm_extractor = true needs the LLM client")
    candidates = lexicon_candidates(posts, GroupMatcher.from_lexicon(lexicon))
    rejected: dict[str, int] = {}
    if client is not None:
        found, rejected = llm_candidates(posts, client, prompt)
        candidates = pd.concat([candidates, found], ignore_index=True) if len(found) else candidates
    candidates = candidates.reset_index(drop=True)
    clusters, assigned = cluster_candidates(candidates, params.cluster_params())
    if len(candidates):
        candidates["cluster_id"] = assigned
    dropped = posts[~posts["post_key"].isin(candidates["post_key"])].assign(reason="no_candidate_in_post")
    without = len(dropped)
    report: dict[str, Any] = {
        "stage": STAGE_NAME,
        "parameters": params.as_report(),
        "counts": {
            "in": len(posts),
            "out": len(clusters),
            "posts": len(posts),
            "posts_with_text": int((posts["text"] != "").sum()),
            "candidates": len(candidates),
            "clusters": len(clusters),
        },
        "dropped": {"total": without, "by_reason": {"no_candidate_in_post": without} if without else {}},
        "candidates_by_method": {str(k): int(v) for k, v in sorted(candidates["method"].value_counts().items())},
        "candidates_by_category": {str(k): int(v) for k, v in sorted(candidates["category"].value_counts().items())},
        "cues": {str(k): int(v) for k, v in sorted(candidates["cues"].explode().dropna().value_counts().items())},
        "placeholders_in_posts": placeholders_by_kind(posts["text"]),
    }
    if client is not None:
        report["llm"] = client.usage(STAGE_NAME).as_dict()
        report["llm_rejected"] = rejected
        report["prompt_sha256"] = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
    return StageOutput(
        tables={"posts": posts, "candidates": candidates, "clusters": clusters, "dropped": dropped},
        schemas={"posts": POST, "candidates": CANDIDATE, "clusters": CLUSTER, "dropped": DROPPED_POST},
        report=report,
        files={"review.csv": people_csv(review_sheet(clusters))},
    )


def load_prompt() -> str:
    return PROMPT_FILE.read_text(encoding="utf-8")


def with_fetch_report(output: StageOutput, fetched: FetchResult) -> StageOutput:
    """The stage's output with this run's fetch figures in its report (``fetch``, ``warnings``, ``skipped``):
    the candidates may come from the cache, the fetch is always this run's."""
    return replace(output, report={**output.report, **fetched.report})


def crawl_counts(output: StageOutput | Mapping[str, Any]) -> dict[str, int] | None:
    """The crawl's figures for the funnel (posts, candidates, clusters), None when the crawl was skipped."""
    report = output.report if isinstance(output, StageOutput) else output
    if report.get("skipped"):
        return None
    counts = report["counts"]
    return {"crawled_posts": counts["posts"], "candidates": counts["candidates"], "clusters": counts["clusters"]}


STAGE = Stage(
    "01_crawl",
    "crawl",
    crawl,
    inputs={
        "posts": Input("posts"),
        "lexicon": Input("lexicon", load_lexicon, section="crawl", key="lexicon_path"),
        "client": Client(when=lambda p: p.llm_extractor),
        "prompt": Resource(load_prompt, when=lambda p: p.llm_extractor),
    },
    outputs={"posts": POST, "candidates": CANDIDATE, "clusters": CLUSTER, "dropped": DROPPED_POST},
    params=CrawlParams,
    ranges={"max_posts": (1, None), "timeout": (1e-9, None), "min_interval": (0, None), "max_retries": (0, 20)}
    | {"backoff": (0, None), "max_wait": (0, None), "similarity": (1e-9, 1), "ngram_min": (1, 10)}
    | {"ngram_max": (1, 10), "max_examples": (1, None)},
    drops=("dropped",),
    words=("posts", "candidate stereotypes", "posts that gave no candidate"),
    funnel={"candidates": "Candidate stereotypes"},
    request_ids=lambda out: out["candidates"]["llm_request_id"].loc[lambda ids: ids != ""],
)
"""The crawl (PBBQ §3.1): the posts the build fetched, the lexicon of ``[crawl] lexicon_path``."""
