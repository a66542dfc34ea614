"""Candidate stereotypes in crawled posts, collapsed into clusters for the experts' review (PBBQ §3.2;
docs/architecture.md, crawl).

- **Lexicon and cues**: a sentence is a candidate when a group term of the lexicon (``annotations/lexicon/
  lexicon.csv``: category, group, term) meets a generalising cue: a quantifier ('همه‌ی …'), 'always/never'
  ('… ها همیشه …'), a comparative or superlative, 'known for', 'like the …', a generic plural statement
  ('… ها … اند'), or a joke frame ('یه روز یه …'; a joke frame anywhere in a post marks its sentences).
  The experts' review decides; these rules only propose.
- **LLM extractor** (optional): the prompt ``prompts/extract_stereotypes.fa.txt``, the post appended after the
  instructions inside ``<post>…</post>`` (delimiters inside the post removed), through :mod:`pbbq.tasks.llm`
  (cached and replayable); an answer is kept only when it is JSON of the asked shape, its category is one of
  the 16 and its quote occurs in the post.
- **Near-duplicates** (the same joke forwarded or retold) collapse within one category and group: character
  n-gram TF-IDF (scikit-learn), DBSCAN with the cosine distance and ``eps = 1 − similarity``, ``min_samples =
  1``, so two statements join when a chain of pairs at least ``similarity`` alike links them (over the distinct
  statements: copies of one join its cluster). A cluster keeps its count, its sources, example posts and evidence;
  its proposed statement is its medoid.
- **Review sheet**: one row per cluster, UTF-8 with a BOM (spreadsheet tools then show Persian), every cell that
  a spreadsheet would read as a formula neutralised (OWASP CSV injection), and empty ``decision``,
  ``statement_fa``, ``statement_en``, ``target_group``, ``non_target_groups`` columns for the experts.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..core.inputs import InputError, read_csv_filled, require_none, spreadsheet_row
from ..imports import one_import_at_a_time
from ..text.categories import CATEGORIES, not_one_of
from ..text.languages.fa import ZWNJ, normalize_fa

if TYPE_CHECKING:  # the LLM SDKs load only when the extractor runs
    from ..llm import LLMClient, LLMRequest

STAGE_NAME = "crawl"
LEXICON_COLUMNS = ["category", "group", "term"]
_strings = pa.list_(pa.string())

CANDIDATE = pa.schema(
    [
        ("candidate_id", pa.string()),
        ("post_key", pa.string()),
        ("source", pa.string()),
        ("sentence", pa.string()),
        ("statement", pa.string()),
        ("category", pa.string()),
        ("group", pa.string()),
        ("term", pa.string()),
        ("cues", _strings),
        ("method", pa.string()),
        ("llm_request_id", pa.string()),
        ("cluster_id", pa.string()),
    ]
)
"""A sentence (or, from the LLM, a quote and its statement) that may state a stereotype about ``group``."""

CLUSTER = pa.schema(
    [
        ("cluster_id", pa.string()),
        ("category", pa.string()),
        ("group", pa.string()),
        ("proposed_statement", pa.string()),
        ("n_candidates", pa.int64()),
        ("n_posts", pa.int64()),
        ("sources", _strings),
        ("example_posts", _strings),
        ("evidence", _strings),
        ("cues", _strings),
        ("methods", _strings),
    ]
)
"""Near-duplicate candidates of one category and group: what the experts review, one row each."""

REVIEW_COLUMNS = [
    "cluster_id",
    "category",
    "group",
    "proposed_statement",
    "count",
    "sources",
    "example_posts",
    "evidence",
    "decision",
    "statement_fa",
    "statement_en",
    "target_group",
    "non_target_groups",
]
EXPERT_COLUMNS = ("decision", "statement_fa", "statement_en", "target_group", "non_target_groups")
EVIDENCE_SEPARATOR = " | "


# --- the lexicon ---------------------------------------------------------------------------------------------


def load_lexicon(path: Path) -> pd.DataFrame:
    """The group terms per category: one row per surface form (``category, group, term``), normalised."""
    frame = read_csv_filled(path, LEXICON_COLUMNS)
    require_none(
        path,
        ~frame["category"].isin(CATEGORIES),
        lambda i: not_one_of(frame.at[i, "category"]),
    )
    frame = frame.assign(group=frame["group"].map(normalize_fa), term=frame["term"].map(normalize_fa))
    duplicated = frame["term"].duplicated(keep="first")
    if duplicated.any():
        index = duplicated.idxmax()
        first = frame.index[frame["term"] == frame.at[index, "term"]][0]
        raise InputError(
            path,
            spreadsheet_row(index),
            f"term {frame.at[index, 'term']!r} is listed twice (first in row {spreadsheet_row(first)}); a term "
            "belongs to one group",
        )
    return frame.reset_index(drop=True)


# Inflections after a group term: plural and ezafe/indefinite endings, then a copula or clitic.
_SUFFIX = r"(?:\u200c?(?:هایی|های|ها|ایی|ای|ان|ا|یه|ی|ه))?(?:\u200c?(?:ست|اند|ند|شون|شان|مون|رو|را|ن))?"
_PLURAL = re.compile(r"(?:ها|های|هایی|ا|ان)(?:\u200c?(?:ست|اند|ند|شون|شان|رو|را|ن))?$")


def _term_pattern(term: str) -> str:
    """A term as a regex: a space or a ZWNJ inside it matches either, or nothing (صاحب‌خانه, صاحبخانه)."""
    pieces = re.split(rf"[ {ZWNJ}]", term)
    return rf"[ {ZWNJ}]?".join(re.escape(piece) for piece in pieces)


@dataclass(frozen=True)
class GroupMatcher:
    """Finds lexicon terms as whole words (with their inflections) in normalised text."""

    pattern: re.Pattern[str]
    groups: dict[str, tuple[str, str, str]]
    """regex group name → (term, category, group)."""

    @classmethod
    def from_lexicon(cls, lexicon: pd.DataFrame) -> GroupMatcher:
        terms = sorted(lexicon["term"], key=len, reverse=True)
        alternation = "|".join(f"(?P<t{i}>{_term_pattern(term)})" for i, term in enumerate(terms))
        pattern = re.compile(rf"(?<![\w{ZWNJ}])(?:{alternation}){_SUFFIX}(?![\w{ZWNJ}])")
        by_term = {row.term: (row.category, row.group) for row in lexicon.itertuples()}
        return cls(pattern, {f"t{i}": (term, *by_term[term]) for i, term in enumerate(terms)})

    def find(self, sentence: str) -> list[tuple[str, str, str, bool, tuple[int, int]]]:
        """(term, category, group, is_plural, span) of every term in ``sentence``."""
        found = []
        for match in self.pattern.finditer(sentence):
            name = next(key for key, value in match.groupdict().items() if value is not None)
            term, category, group = self.groups[name]
            found.append((term, category, group, bool(_PLURAL.search(match.group(0))), match.span()))
        return found


_W = rf"[ {ZWNJ}]"
CUES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(rf"(?<![\w{ZWNJ}])(?:{pattern})(?![\w{ZWNJ}])"))
    for kind, pattern in (
        ("quantifier", rf"همه{_W}?(?:ی|شون|شان)?|همشون|تمام{_W}?(?:ی)?|اکثرا?|اغلب|عموما"),
        ("always_never", rf"همیشه|هیچ{_W}?وقت|هرگز|معمولا|اصلا|کلا|ذاتا|عمرا|ذات{_W}?شون"),
        ("comparative", rf"\w+{_W}?تر{_W}از|\w+{_W}?ترین|بیشتر{_W}از|کمتر{_W}از|از{_W}همه"),
        ("known_for", r"معروف(?:ند|اند|ن|ه)?|مشهور(?:ند|اند|ن)?|شهره"),
        ("like", r"مثل|عین|مانند"),
    )
)
JOKE = re.compile(
    rf"(?:^|\n)یه{_W}روز|(?<![\w{ZWNJ}])یه{_W}\w+{_W}(?:و|با){_W}یه{_W}|می{_W}?دون(?:ی|ید|ین){_W}?چرا"
    rf"|به{_W}یه{_W}\w+{_W}(?:گفتن|میگن|می{_W}?گن)|فرق{_W}.+{_W}با{_W}.+{_W}چیه|جوک|لطیفه|😂|🤣"
)
_GENERIC_END = re.compile(r"(?:ند|ن|هستند|هستن|اند)\W*$")
_SENTENCE_END = re.compile(r"(?<=[.!?؟…])\s+|(?<=[!?؟])(?=[^\s!?؟])")


def sentences(text: str) -> list[str]:
    """The sentences of a post: its lines, split after ``. ! ? ؟ …``."""
    out: list[str] = []
    for line in text.split("\n"):
        out.extend(part.strip() for part in _SENTENCE_END.split(line) if len(part.strip().split()) >= 2)
    return out


def cue_kinds(sentence: str, term_spans: Sequence[tuple[int, int]], plural: bool, joke: bool) -> list[str]:
    """The generalising cues of ``sentence`` that lie outside the group terms themselves."""
    kinds = []
    for kind, pattern in CUES:
        if any(not any(a <= m.start() < b for a, b in term_spans) for m in pattern.finditer(sentence)):
            kinds.append(kind)
    if plural and _GENERIC_END.search(sentence):
        kinds.append("generic_plural")
    if joke:
        kinds.append("joke")
    return kinds


def _short_id(prefix: str, *parts: str) -> str:
    return f"{prefix}-{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:12]}"


def lexicon_candidates(posts: pd.DataFrame, matcher: GroupMatcher) -> pd.DataFrame:
    """One candidate per sentence and group whose sentence holds a lexicon term and a cue."""
    rows = []
    for post in posts.itertuples():
        joke = bool(JOKE.search(post.text))
        for sentence in sentences(post.text):
            found = matcher.find(sentence)
            if not found:
                continue
            spans = [span for *_, span in found]
            first: dict[str, tuple[str, str]] = {}
            for term, category, group, _, _ in found:
                first.setdefault(group, (term, category))
            for group, (term, category) in first.items():
                plural = any(is_plural for _, _, g, is_plural, _ in found if g == group)
                cues = cue_kinds(sentence, spans, plural, joke)
                if not cues:
                    continue
                rows.append(
                    {
                        "candidate_id": _short_id("CA", post.post_key, sentence, group, "lexicon"),
                        "post_key": post.post_key,
                        "source": post.source,
                        "sentence": sentence,
                        "statement": sentence,
                        "category": category,
                        "group": group,
                        "term": term,
                        "cues": cues,
                        "method": "lexicon",
                        "llm_request_id": "",
                        "cluster_id": "",
                    }
                )
    return pd.DataFrame(rows, columns=CANDIDATE.names)


# --- the LLM extractor ---------------------------------------------------------------------------------------

PROMPT_FILE = Path(__file__).resolve().parents[2] / "prompts" / "extract_stereotypes.fa.txt"
_DELIMITER = re.compile(r"<\s*/?\s*post\s*>", re.IGNORECASE)


def extraction_request(prompt: str, post_key: str, text: str) -> LLMRequest:
    """The instructions first, then the post inside ``<post>…</post>``; a delimiter inside the post is removed,
    so the post cannot close its block and speak as instructions."""
    from ..llm import LLMRequest

    instructions = Template(prompt).substitute(categories="، ".join(CATEGORIES))
    body = _DELIMITER.sub(" ", text)
    return LLMRequest(
        messages=(("user", f"{instructions.rstrip()}\n\n<post>\n{body}\n</post>"),),
        prompt_hash=hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
        stage=STAGE_NAME,
        context=f"post {post_key}",
    )


def _answer_items(text: str) -> list[Any]:
    body = re.sub(r"^\s*```(?:json)?\s*|\s*```\s*$", "", text.strip())
    value = json.loads(body)
    if not isinstance(value, dict) or not isinstance(value.get("stereotypes"), list):
        raise ValueError("not an object with a 'stereotypes' list")
    return value["stereotypes"]


def _flat(text: str) -> str:
    return normalize_fa(text).replace("\n", " ")


def llm_candidates(posts: pd.DataFrame, client: LLMClient, prompt: str) -> tuple[pd.DataFrame, dict[str, int]]:
    """Ask the model for the stereotypes of every post with text; returns the valid ones as candidates and
    the rejected items (or whole answers) per reason."""
    with_text = posts[posts["text"] != ""]
    requests = [extraction_request(prompt, row.post_key, row.text) for row in with_text.itertuples()]
    answers = client.complete_many(requests)
    rows: list[dict[str, Any]] = []
    rejected: Counter[str] = Counter()
    for post, answer in zip(with_text.itertuples(), answers, strict=True):
        try:
            items = _answer_items(answer.text)
        except (json.JSONDecodeError, ValueError):
            rejected["answer_not_json_of_the_shape"] += 1
            continue
        flat_post = _flat(post.text)
        for item in items:
            fields = {k: normalize_fa(str(item.get(k, ""))) for k in ("category", "group", "statement", "quote")}
            if not isinstance(item, dict) or not all(fields.values()):
                rejected["item_missing_a_field"] += 1
            elif fields["category"] not in CATEGORIES:
                rejected["category_not_one_of_16"] += 1
            elif _flat(fields["quote"]) not in flat_post:
                rejected["quote_not_in_post"] += 1
            else:
                rows.append(
                    {
                        "candidate_id": _short_id("CA", post.post_key, fields["quote"], fields["group"], "llm"),
                        "post_key": post.post_key,
                        "source": post.source,
                        "sentence": fields["quote"],
                        "statement": fields["statement"],
                        "category": fields["category"],
                        "group": fields["group"],
                        "term": "",
                        "cues": ["llm"],
                        "method": "llm",
                        "llm_request_id": answer.request_id,
                        "cluster_id": "",
                    }
                )
    frame = pd.DataFrame(rows, columns=CANDIDATE.names).drop_duplicates("candidate_id")
    return frame, dict(sorted(rejected.items()))


# --- near-duplicates -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterParams:
    similarity: float = 0.5
    """Cosine similarity of character n-gram TF-IDF vectors at which two statements are near-duplicates."""
    ngram_min: int = 2
    ngram_max: int = 4
    max_examples: int = 5
    """Example posts and evidence sentences kept per cluster."""


def _medoid(matrix: Any, statements: Sequence[str]) -> int:
    """The member most alike to the others; on a tie the one with the fewest characters that are not words or
    sentence punctuation (emoji, placeholders' brackets, digits), then the shortest. A member's closeness, the
    sum of its cosines to every member, is its dot product with the members' summed vector: linear in the
    cluster's size, no member-by-member matrix."""
    closeness = np.round(np.asarray(matrix @ np.asarray(matrix.sum(axis=0)).ravel()).ravel(), 9)
    noise = [sum(not (c.isalpha() or c.isspace() or c == ZWNJ or c in ".،؛؟!?,") for c in s) for s in statements]
    lengths = [len(statement) for statement in statements]
    return int(np.lexsort((np.asarray(lengths), np.asarray(noise), -closeness))[0])


def cluster_candidates(candidates: pd.DataFrame, params: ClusterParams) -> tuple[pd.DataFrame, pd.Series]:
    """Clusters of near-duplicate candidates within each category and group, and each candidate's cluster id."""
    with one_import_at_a_time():
        from sklearn.cluster import DBSCAN
        from sklearn.feature_extraction.text import TfidfVectorizer

    if candidates.empty:
        return pd.DataFrame(columns=CLUSTER.names), pd.Series(dtype="object")
    vectorizer = TfidfVectorizer(
        analyzer="char_wb", ngram_range=(params.ngram_min, params.ngram_max), sublinear_tf=True
    )
    vectors = vectorizer.fit_transform(candidates["statement"])
    order = {category: i for i, category in enumerate(CATEGORIES)}
    clusters, assigned = [], pd.Series("", index=candidates.index, dtype="object")
    for (category, group), part in candidates.groupby(["category", "group"], sort=False):
        positions = candidates.index.get_indexer(part.index)
        # identical statements (a joke forwarded many times) are one point: DBSCAN's neighbourhoods, pairwise,
        # then grow with the distinct statements only, and every copy joins its statement's cluster
        distinct, copies = np.unique(part["statement"].to_numpy(dtype=str), return_index=True, return_inverse=True)[1:]
        dbscan = DBSCAN(eps=1 - params.similarity, min_samples=1, metric="cosine")
        labels = dbscan.fit_predict(vectors[positions[distinct]])[copies]
        for label_rows in pd.Series(labels).groupby(labels).indices.values():
            members = part.iloc[label_rows]
            rows = positions[label_rows]
            ids = sorted(members["candidate_id"])
            cluster_id = _short_id("CL", category, group, *ids)
            assigned[members.index] = cluster_id
            medoid = members.iloc[_medoid(vectors[rows], list(members["statement"]))]
            posts = list(dict.fromkeys(members.sort_values("post_key")["post_key"]))
            evidence = list(dict.fromkeys(members["sentence"]))
            clusters.append(
                {
                    "cluster_id": cluster_id,
                    "category": category,
                    "group": group,
                    "proposed_statement": medoid["statement"],
                    "n_candidates": len(members),
                    "n_posts": len(posts),
                    "sources": sorted(set(members["source"])),
                    "example_posts": posts[: params.max_examples],
                    "evidence": evidence[: params.max_examples],
                    "cues": sorted(set(members["cues"].explode().dropna())),
                    "methods": sorted(set(members["method"])),
                }
            )
    table = pd.DataFrame(clusters, columns=CLUSTER.names)
    table = table.assign(_order=table["category"].map(order)).sort_values(
        ["_order", "group", "n_candidates", "cluster_id"], ascending=[True, True, False, True]
    )
    return table.drop(columns="_order").reset_index(drop=True), assigned


# --- the review sheet ----------------------------------------------------------------------------------------

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise_cell(value: str) -> str:
    """A cell a spreadsheet would run as a formula (starting with ``= + - @``, tab or CR) gets a leading ``'``
    (OWASP, CSV injection); so does a cell already starting with ``'``, so :func:`restore_cell` is exact."""
    return "'" + value if value.startswith((*_FORMULA_START, "'")) else value


def restore_cell(value: str) -> str:
    """Undo :func:`neutralise_cell` (a spreadsheet that dropped the ``'`` on saving leaves nothing to undo)."""
    return value[1:] if value.startswith("'") and value[1:].startswith((*_FORMULA_START, "'")) else value


def people_csv(frame: pd.DataFrame) -> bytes:
    """A CSV for people: UTF-8 with a BOM, every cell neutralised."""
    text = frame.astype(str).map(neutralise_cell).to_csv(index=False, lineterminator="\n")
    return ("\ufeff" + text).encode("utf-8")


def review_sheet(clusters: pd.DataFrame) -> pd.DataFrame:
    """One row per cluster for the experts, with the empty columns they fill."""
    sheet = pd.DataFrame(
        {
            "cluster_id": clusters["cluster_id"],
            "category": clusters["category"],
            "group": clusters["group"],
            "proposed_statement": clusters["proposed_statement"],
            "count": clusters["n_candidates"].astype(str),
            "sources": clusters["sources"].map(";".join),
            "example_posts": clusters["example_posts"].map(";".join),
            "evidence": clusters["evidence"].map(EVIDENCE_SEPARATOR.join),
        }
    )
    for column in EXPERT_COLUMNS:
        sheet[column] = ""
    return sheet[REVIEW_COLUMNS]


def placeholders_by_kind(texts: Iterable[str]) -> dict[str, int]:
    """Placeholders of personal data in ``texts``, by kind (what the scrubber left in their place)."""
    from .scrub import PLACEHOLDERS

    joined = "\n".join(texts)
    return {kind: joined.count(token) for kind, token in PLACEHOLDERS.items()}
