"""Text diversity of the benchmark: the four metrics of the PBBQ paper (§3.5, Table 2, Appendix C), on two levels.

Text units.
- Template level, ``table2``, the paper's Table 2: each category's template texts, each written once. For every
  template of the dataset its ambiguous context and its two disambiguating continuations (biased and counter-
  biased), with ``{stereo}``, ``{nonstereo}`` and ``{lex}`` each replaced by the one neutral word
  :data:`NEUTRAL_TOKEN`; a counter-biased continuation that mirrors the biased one is then the same text and
  counts once. Table 2's TTR (0.62-0.85) and Self-BLEU (0.11-0.44) can only come from texts like these.
- Instance level, ``table2_instances``, per config (fa, fa-names, en): the distinct instantiated contexts. They
  repeat their template's words for every entity pair and lexical variant, so Self-BLEU is near 1 and TTR near
  0.02; a figure to compare builds with each other, not with the paper.
Every metric runs on the DISTINCT units of a group (a category, or all of them): Appendix C speaks of the texts
of the dataset, not of its question-answer rows. Units are sorted, so a result does not depend on row order.

What Table 2 can and cannot confirm (checked against its numbers):
- its Average row is the unweighted mean of the 16 category rows for NGD (0.754 → 0.75) and TTR (0.735 →
  0.74), which the tables follow; its Self-BLEU (0.27) and BERTScore (0.5188) averages match neither the
  unweighted (0.26, 0.5205) nor the sample-weighted (0.28, 0.5157) mean of its rows, so the paper's average
  for those two columns cannot be reproduced; the 'Overall' row (all units together) is reported besides.
- its NGD values (0.68-0.80) are below what the C.3 formula, a sum of four ratios (as in Shaib et al.'s
  ``diversity`` package, whose wording C.3 takes), gives on text whose stop-word-free TTR is 0.62-0.85 (the
  unigram ratio alone is then about 0.4 and the longer n-gram ratios are larger), so the paper's table likely
  shows the mean of the four ratios. ``ngd`` is the formula as written; ``ngd_mean`` (ngd / 4) is on the
  table's scale.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
from pbbq.tasks.artifacts import StageOutput
from pbbq.tasks.inputs import PLACEHOLDER
from pbbq.tasks.persian_text import stop_words, tokenize, tokenize_en, words
from pbbq.tasks.schemas import example_configs
from sacrebleu.metrics.bleu import BLEU

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

NGRAM_ORDER = 4  # n = 1..4 for NGD (Appendix C.3) and BLEU's default maximum order
DEFAULT_HOMOGENIZATION_MODEL = "sbunlp/fabert"  # FaBERT (Masumi et al., 2025), as in §3.5
# bert-score's layer for the BERT-base models it knows (bert-base-uncased, bert-base-multilingual-cased); FaBERT
# is a BERT-base and the paper names no layer, so this is our choice, a parameter of the flow.
DEFAULT_HOMOGENIZATION_LAYERS = 9
CONFIGS = ("fa", "fa-names", "en")
METRICS = ("ngd", "ttr", "self_bleu", "homogenization")
NEUTRAL_TOKEN = "فلانی"
"""What each placeholder of a template text becomes at the template level: 'so-and-so', one Persian word that
holds the entity's (or the lexical variant's) place, so no n-gram runs across it."""
TEMPLATE_SLOTS = frozenset({"stereo", "nonstereo", "lex"})
TEMPLATE_TEXT_COLUMNS = ("ambiguous_fa", "disambiguated_fa", "disambiguated_counter_biased_fa")
REVIEW_SOURCE = "review"
"""The source of a continuation that failed validation: its template yields no example."""
TEMPLATE_TITLE = "Table 2: diversity of the template texts (the paper's Table 2)"
INSTANCE_TITLE = "Diversity of the instantiated contexts, per config (not the paper's Table 2)"


# ---------------------------------------------------------------------------------------------- n-gram tables


def _token_codes(token_lists: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """The integer code of every token of the concatenated lists, and the length of each list."""
    lengths = np.fromiter((len(tokens) for tokens in token_lists), dtype=np.int64, count=len(token_lists))
    flat = np.array([token for tokens in token_lists for token in tokens], dtype=object)
    return pd.factorize(flat)[0].astype(np.int64), lengths


def _ngram_codes(codes: np.ndarray) -> list[np.ndarray]:
    """For n = 1..4, a compact code (0..k-1, k = #distinct n-grams) of the n-gram starting at each position
    of the code sequence, n-grams spanning list boundaries included (len(codes) - n + 1 codes)."""
    base = int(codes.max()) + 1 if len(codes) else 1
    orders = [codes]
    for n in range(1, NGRAM_ORDER):
        # the (n+1)-gram at p is the n-gram at p followed by the token at p + n; codes < len(codes), so the
        # pair code stays below len(codes)**2 and fits int64
        orders.append(pd.factorize(orders[-1][:-1] * base + codes[n:])[0].astype(np.int64))
    return orders


# --------------------------------------------------------------------------------------------------- metrics


def ngram_diversity(token_lists: Sequence[Sequence[str]]) -> float:
    """N-gram diversity, Appendix C.3: NGD(D) = Σ_{n=1..4} #unique n-grams in D⊕ / #n-grams in D⊕.

    D⊕ is the dataset "concatenated into a single string": the units' token lists are joined into one
    sequence, in the order given, and n-grams are counted over it, so an n-gram may span two units. Units are
    the distinct contexts of a group, tokens their words (punctuation out, stop words kept:
    ``pbbq.tasks.persian_text.words``). Ranges over (0, 4]. NaN when D⊕ has fewer than 4 tokens (a ratio is 0/0).
    """
    codes, _ = _token_codes(token_lists)
    if len(codes) < NGRAM_ORDER:
        return math.nan
    return float(sum((grams.max() + 1) / len(grams) for grams in _ngram_codes(codes)))


def type_token_ratio(token_lists: Sequence[Sequence[str]], stop_words: frozenset[str]) -> float:
    """Type-token ratio, Appendix C.2: #unique words / #words of T, stop words removed.

    T is all units of a group taken together (the distinct contexts' words, punctuation out); ``stop_words``
    is ``pbbq.tasks.persian_text.stop_words(lang)``. NaN when no word is left.
    """
    kept = [token for tokens in token_lists for token in tokens if token not in stop_words]
    return len(set(kept)) / len(kept) if kept else math.nan


def _clipped_matches(grams: np.ndarray, owner: np.ndarray, n_units: int) -> np.ndarray:
    """Per unit, Σ over its n-grams of min(its count, the largest count in any OTHER unit).

    That is BLEU's clipped match count against all other units as references (sacrebleu merges the
    references' counts by max). The largest count over the others is the n-gram's largest count over all
    units, unless this unit holds it alone; then it is the second largest (0 if no other unit has the n-gram).
    """
    if len(grams) == 0:
        return np.zeros(n_units, dtype=np.int64)
    keys, count = np.unique(grams * n_units + owner, return_counts=True)  # sorted by n-gram, then unit
    gram, unit = np.divmod(keys, n_units)
    first = np.r_[True, gram[1:] != gram[:-1]]
    starts = np.flatnonzero(first)
    group = np.cumsum(first) - 1
    top = np.maximum.reduceat(count, starts)
    at_top = count == top[group]
    n_at_top = np.bincount(group[at_top], minlength=len(starts))
    second = np.where(n_at_top >= 2, top, np.maximum.reduceat(np.where(at_top, 0, count), starts))
    best_other = np.where(at_top, second[group], top[group])
    clipped = np.minimum(count, best_other)
    return np.rint(np.bincount(unit, weights=clipped, minlength=n_units)).astype(np.int64)


def _closest_other_lengths(lengths: np.ndarray) -> np.ndarray:
    """Per unit, sacrebleu's effective reference length against all OTHER units: the length closest to its
    own, the shorter one on a tie (``BLEU._get_closest_ref_len``), found by bisection in the sorted lengths."""
    ordered = np.sort(lengths)
    left = np.searchsorted(ordered, lengths, side="left")
    right = np.searchsorted(ordered, lengths, side="right")
    far = np.int64(2**40)  # farther than any real length: marks a missing neighbour
    below = np.where(left > 0, ordered[np.maximum(left - 1, 0)], -far)
    above = np.where(right < len(ordered), ordered[np.minimum(right, len(ordered) - 1)], far)
    nearest = np.where(lengths - below <= above - lengths, below, above)
    return np.where(right - left >= 2, lengths, nearest)  # another unit has the same length


def _sentence_bleu_scores(token_lists: Sequence[Sequence[str]]) -> np.ndarray:
    """sacrebleu's sentence_bleu score (0-100) of every unit against all the others, from n-gram tables.

    Equal to ``sentence_bleu(' '.join(h), [' '.join(r) for r in others], tokenize='none')`` with sacrebleu's
    defaults (exp smoothing, effective order); the statistics are counted here, the score is sacrebleu's own
    ``BLEU.compute_bleu``. Needs at least 2 units.
    """
    n_units = len(token_lists)
    codes, lengths = _token_codes(token_lists)
    unit_of = np.repeat(np.arange(n_units, dtype=np.int64), lengths)
    correct = np.zeros((n_units, NGRAM_ORDER), dtype=np.int64)
    for n, grams in enumerate(_ngram_codes(codes), start=1):
        owner = unit_of[: len(grams)]
        inside = owner == unit_of[n - 1 :]  # the n-gram starts and ends in the same unit
        correct[:, n - 1] = _clipped_matches(grams[inside], owner[inside], n_units)
    totals = np.maximum(lengths[:, None] - np.arange(NGRAM_ORDER)[None, :], 0)
    ref_lengths = _closest_other_lengths(lengths)
    return np.array(
        [
            BLEU.compute_bleu(
                correct=correct[i].tolist(),
                total=totals[i].tolist(),
                sys_len=int(lengths[i]),
                ref_len=int(ref_lengths[i]),
                smooth_method="exp",
                effective_order=True,
            ).score
            for i in range(n_units)
        ]
    )


def self_bleu(sentences: Sequence[str], tokenize: Callable[[str], list[str]] = tokenize_en) -> float:
    """Self-BLEU, Appendix C.1 (Zhu et al., 2018): the mean over units of the BLEU of the unit against all
    the others as references, on a 0-1 scale (sacrebleu's score / 100).

    Exactly the mean of sacrebleu's ``sentence_bleu(h, others)`` with its defaults (smooth_method='exp',
    effective order, 4-grams), but computed from n-gram count tables with no pairwise BLEU call. ``tokenize``
    gives BLEU's tokens: the default is sacrebleu's 13a tokenizer, so English equals ``tokenize='13a'`` on the
    raw text; for Persian pass ``pbbq.tasks.persian_text.tokenize_fa`` (hazm), which equals sacrebleu on the tokens
    joined by spaces with ``tokenize='none'``, so both sides see the same tokens. Punctuation tokens count, as
    in BLEU. Units are the distinct contexts of a group; an empty unit scores 0 (as sacrebleu) and still counts
    as a reference of length 0. NaN (not computed) for fewer than 2 units: there is no reference.
    """
    return _self_bleu_of_tokens([tokenize(sentence) for sentence in sentences])


def _self_bleu_of_tokens(token_lists: Sequence[Sequence[str]]) -> float:
    """:func:`self_bleu` of already tokenised units."""
    if len(token_lists) < 2:
        return math.nan
    return float(np.mean(_sentence_bleu_scores(token_lists))) / 100


# ------------------------------------------------------------------------------------------- homogenization


@dataclass(frozen=True)
class HomogenizationResult:
    """The BERTScore homogenization of a group, or why it was not computed (then ``value`` is NaN)."""

    value: float
    computed: bool
    reason: str
    model: str
    num_layers: int
    n_units: int
    n_pairs: int  # unordered pairs scored
    n_pairs_total: int  # unordered pairs in the group
    seed: int

    @property
    def note(self) -> str:
        """One line for a report: the model, layer and pair sample, or the reason it was not computed."""
        if not self.computed:
            return f"not computed: {self.reason}"
        sample = (
            f"{self.n_pairs} of {self.n_pairs_total} pairs sampled (seed {self.seed})"
            if self.n_pairs < self.n_pairs_total
            else f"all {self.n_pairs} pairs"
        )
        return f"BERTScore F1, {self.model} layer {self.num_layers}, {sample}"


@dataclass(frozen=True)
class _BertScoreModel:
    """A model and tokenizer loaded the way bert-score loads them, with the batch size and device."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    batch_size: int
    device: str


def _load_bertscore_model(model_path: str, num_layers: int, batch_size: int, device: str) -> _BertScoreModel:
    """Load ``model_path`` (a local folder, or a Hub id already in the local cache: never downloaded) with
    bert-score's own loaders: its tokenizer choice (slow tokenizer) and its cut to the first ``num_layers``."""
    from bert_score.utils import get_model, get_tokenizer
    from huggingface_hub import snapshot_download

    folder = model_path if Path(model_path).is_dir() else snapshot_download(model_path, local_files_only=True)
    model = get_model(str(folder), num_layers).to(device)
    return _BertScoreModel(model, get_tokenizer(str(folder), use_fast=False), batch_size, device)


def _embed(
    texts: Sequence[str], scorer: _BertScoreModel
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Embed each text once, as bert-score does: its encoding (special tokens kept), one forward pass of the
    cut model, unit-normalised token vectors. Returns the vectors of all texts packed one after the other,
    each text's offset and length, and each token's weight: 1 / #tokens for a word piece, 0 for [CLS] and [SEP]
    (bert-score's idf=False weights, normalised per text). Texts are batched by length to limit padding."""
    import torch
    from bert_score.utils import sent_encode

    tokenizer = scorer.tokenizer
    # bert-score's sent_encode breaks on an empty text with transformers 5; encoding '' gives [CLS] [SEP],
    # which is what it returns under transformers 4
    ids = [sent_encode(tokenizer, text) if text.strip() else tokenizer.encode("") for text in texts]
    lengths = torch.tensor([len(piece_ids) for piece_ids in ids])
    offsets = torch.cumsum(lengths, 0) - lengths
    vectors = torch.empty(int(lengths.sum()), scorer.model.config.hidden_size)
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    for start in range(0, len(order), scorer.batch_size):
        batch = order[start : start + scorer.batch_size]
        width = len(ids[batch[0]])
        padded = torch.full((len(batch), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, i in enumerate(batch):
            padded[row, : len(ids[i])] = torch.tensor(ids[i])
            mask[row, : len(ids[i])] = 1
        with torch.no_grad():
            hidden = scorer.model(padded.to(scorer.device), attention_mask=mask.to(scorer.device))[0].cpu()
        for row, i in enumerate(batch):
            vectors[offsets[i] : offsets[i] + lengths[i]] = hidden[row, : lengths[i]]
    vectors /= vectors.norm(dim=-1, keepdim=True)
    flat_ids = torch.tensor([piece for piece_ids in ids for piece in piece_ids])
    special = torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id])
    weights = (~torch.isin(flat_ids, special)).float()
    owner = torch.repeat_interleave(torch.arange(len(ids)), lengths)
    word_pieces = torch.zeros(len(ids)).index_add_(0, owner, weights)[owner]
    return vectors, offsets, lengths, weights / word_pieces.clamp(min=1)


def _gather(
    vectors: torch.Tensor, weights: torch.Tensor, offsets: torch.Tensor, lengths: torch.Tensor, rows: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded vectors, weights and validity mask of the texts ``rows`` (padding: weight 0, invalid)."""
    import torch

    width = int(lengths[rows].max())
    position = torch.arange(width)[None, :]
    valid = position < lengths[rows][:, None]
    index = torch.where(valid, offsets[rows][:, None] + position, 0)
    return vectors[index], torch.where(valid, weights[index], 0.0), valid


def _pair_f1(
    embedded: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    first: np.ndarray,
    second: np.ndarray,
    batch_size: int,
) -> np.ndarray:
    """BERTScore F1 of each pair (first[k], second[k]), in batches: greedy cosine matching as bert-score's
    greedy_cos_idf (every token of one text to its most similar token of the other, [CLS] and [SEP] included
    as match candidates, weighted means P and R, F = 2PR / (P + R), 0 for an empty text).

    Padding never wins a match: padded cells are set below any cosine. (bert-score multiplies them by 0, so a
    token whose best real match is negative would get 0 there; with the positive cosines of trained BERTs
    both agree, and ours does not depend on how the pairs were batched.)"""
    import torch

    vectors, offsets, lengths, weights = embedded
    scores = []
    for start in range(0, len(first), batch_size):
        hyp = torch.from_numpy(first[start : start + batch_size])
        ref = torch.from_numpy(second[start : start + batch_size])
        hyp_vectors, hyp_weights, hyp_valid = _gather(vectors, weights, offsets, lengths, hyp)
        ref_vectors, ref_weights, ref_valid = _gather(vectors, weights, offsets, lengths, ref)
        similarity = torch.bmm(hyp_vectors, ref_vectors.transpose(1, 2))
        similarity = similarity.masked_fill(~(hyp_valid[:, :, None] & ref_valid[:, None, :]), -2.0)
        precision = (similarity.max(dim=2).values * hyp_weights).sum(dim=1)
        recall = (similarity.max(dim=1).values * ref_weights).sum(dim=1)
        f1 = torch.nan_to_num(2 * precision * recall / (precision + recall), nan=0.0)
        scores.append(f1.numpy().astype(np.float64))
    return np.concatenate(scores)


def _pairs(n_units: int, max_pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """All unordered pairs i < j of n_units, or, above max_pairs, a sample of max_pairs of them drawn
    without replacement with np.random.default_rng(seed) (pair k is row i, column j of the upper triangle)."""
    total = n_units * (n_units - 1) // 2
    if total <= max_pairs:
        first, second = np.triu_indices(n_units, 1)
        return first.astype(np.int64), second.astype(np.int64)
    picked = np.sort(np.random.default_rng(seed).choice(total, size=max_pairs, replace=False))
    rows = np.arange(n_units - 1, dtype=np.int64)
    row_start = rows * (2 * n_units - rows - 1) // 2  # index of pair (i, i + 1)
    first = np.searchsorted(row_start, picked, side="right") - 1
    return first, picked - row_start[first] + first + 1


def _homogenization(
    sentences: Sequence[str], scorer: _BertScoreModel | str, *, model: str, num_layers: int, max_pairs: int, seed: int
) -> HomogenizationResult:
    """The homogenization of ``sentences`` with a loaded scorer, or not computed with ``scorer`` as reason."""
    n_units = len(sentences)
    total = n_units * (n_units - 1) // 2

    def result(value: float, reason: str, n_pairs: int) -> HomogenizationResult:
        return HomogenizationResult(value, not reason, reason, model, num_layers, n_units, n_pairs, total, seed)

    if isinstance(scorer, str):
        return result(math.nan, scorer, 0)
    if n_units < 2:
        return result(math.nan, "fewer than 2 units: no pair", 0)
    first, second = _pairs(n_units, max_pairs, seed)
    used, inverse = np.unique(np.concatenate([first, second]), return_inverse=True)
    distinct, text_index = np.unique(np.asarray(sentences, dtype=object)[used], return_inverse=True)
    embedded = _embed(distinct.tolist(), scorer)  # each distinct text once
    text_of = text_index[inverse]
    f1 = _pair_f1(embedded, text_of[: len(first)], text_of[len(first) :], scorer.batch_size)
    return result(float(f1.mean()), "", len(first))


def _scorer_or_reason(model_path: str, num_layers: int, batch_size: int, device: str) -> _BertScoreModel | str:
    """The loaded model, or why it cannot be loaded (extra not installed, not on disk, not in the cache)."""
    try:
        return _load_bertscore_model(model_path, num_layers, batch_size, device)
    except ImportError as error:
        return f"the homogenization extra (torch, transformers, bert-score) is not installed: {error}"
    except (OSError, ValueError) as error:  # missing folder or files, not in the local Hub cache, bad id
        return f"model {model_path!r} cannot be loaded from disk: {type(error).__name__}: {error}"


def homogenization_bertscore(
    sentences: Sequence[str],
    model_path: str = DEFAULT_HOMOGENIZATION_MODEL,
    *,
    num_layers: int,
    batch_size: int = 64,
    max_pairs: int = 5_000,
    seed: int = 0,
    device: str = "cpu",
) -> HomogenizationResult:
    """Homogenization score, Appendix C.4: the mean BERTScore F1 over pairs of distinct units d ≠ d'.

    C.4 prints hom(D) = 1/(|D|-1) Σ_{d≠d'} sim(d, d'), the per-document form of Padmakumar & He (2023) whose
    mean over d is the mean over ordered pairs; Table 2's values (0.39-0.64) are that mean. BERTScore F1 is
    symmetric (swapping the texts swaps P and R), so the mean over unordered pairs i < j is the same number.
    sim is bert_score.score's F1 with idf=False, no baseline rescaling, layer ``num_layers`` of
    ``model_path`` (FaBERT by default; any local folder). Each distinct text is embedded once and pairs are
    scored in batches; above ``max_pairs`` pairs a sample of ``max_pairs`` drawn with
    np.random.default_rng(``seed``), recorded in the result. Units are the distinct contexts of a group.

    The model is read from disk only (a folder, or a Hub id already in the local cache). Without the optional
    extra (torch, transformers, bert-score) or the model, the result is marked not computed with the reason.
    """
    scorer = _scorer_or_reason(model_path, num_layers, batch_size, device)
    return _homogenization(sentences, scorer, model=model_path, num_layers=num_layers, max_pairs=max_pairs, seed=seed)


# ------------------------------------------------------------------------------------------ template texts


def mask_placeholders(text: str, *, where: str) -> str:
    """``text`` with each of ``{stereo}``, ``{nonstereo}`` and ``{lex}`` replaced by :data:`NEUTRAL_TOKEN`.

    Any other brace token is an error naming ``where`` (the table, the template and the column)."""

    def neutral(match: re.Match[str]) -> str:
        if match.group(1) not in TEMPLATE_SLOTS:
            raise ValueError(
                f"{where}: unknown placeholder {match.group(0)!r}; a template text may hold only "
                "{stereo}, {nonstereo} and {lex}"
            )
        return NEUTRAL_TOKEN

    masked = PLACEHOLDER.sub(neutral, text)
    if re.search(r"[{}]", masked):
        raise ValueError(f"{where}: an unmatched brace in {text!r}")
    return masked


def template_units(templates: pd.DataFrame) -> pd.DataFrame:
    """The template-level units of Table 2: for every template of the dataset, its ambiguous context and its two
    disambiguating continuations, placeholders masked (:func:`mask_placeholders`).

    ``templates`` is the ``04_disambiguate/templates`` table. A template is of the dataset when neither of its
    continuations is in review (``disambiguated_source`` and ``counter_biased_source`` not ``review``: a template
    with a continuation in review yields no example). Columns: template_id, category, column, text; one row per
    template and text column, in the table's order. A used template with an empty text is an error.
    """
    missing = {"template_id", "category", "disambiguated_source", "counter_biased_source", *TEMPLATE_TEXT_COLUMNS}
    missing -= set(templates.columns)
    if missing:
        raise ValueError(f"diversity: the 04_disambiguate templates table lacks the columns {sorted(missing)}")
    used = templates[
        (templates["disambiguated_source"] != REVIEW_SOURCE) & (templates["counter_biased_source"] != REVIEW_SOURCE)
    ]
    rows = []
    for template in used.itertuples(index=False):
        for column in TEMPLATE_TEXT_COLUMNS:
            where = f"diversity: 04_disambiguate templates, template {template.template_id!r}, column {column!r}"
            text = getattr(template, column)
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{where}: empty, yet the template is not in review")
            rows.append(
                {
                    "template_id": template.template_id,
                    "category": template.category,
                    "column": column,
                    "text": mask_placeholders(text, where=where),
                }
            )
    return pd.DataFrame(rows, columns=["template_id", "category", "column", "text"])


# ----------------------------------------------------------------------------------------------- the tables


def _metric_row(
    units: list[str],
    tokens: Mapping[str, list[str]],
    lang: str,
    ttr_stop_words: frozenset[str],
    homogenization: Callable[[list[str]], HomogenizationResult],
) -> dict[str, object]:
    """The four metrics of one group of distinct, sorted units (and NGD on Table 2's scale, ``ngd_mean``)."""
    token_lists = [tokens[unit] for unit in units]
    word_lists = [words(unit_tokens, lang) for unit_tokens in token_lists]
    hom = homogenization(units)
    ngd = ngram_diversity(word_lists)
    return {
        "n_units": len(units),
        "ngd": ngd,
        "ngd_mean": ngd / NGRAM_ORDER,
        "ttr": type_token_ratio(word_lists, ttr_stop_words),
        "self_bleu": _self_bleu_of_tokens(token_lists),
        "homogenization": hom.value,
        "homogenization_note": hom.note,
    }


def _average_row(rows: list[dict[str, object]], counts: Sequence[str]) -> dict[str, object]:
    """Table 2's Average: the unweighted mean of the category rows (NaN rows skipped); its ``counts`` columns
    are the categories' totals."""
    frame = pd.DataFrame(rows)
    computed = int(frame["homogenization"].notna().sum())
    note = (
        f"mean of {computed} of {len(frame)} categories"
        if computed
        else "; ".join(sorted(set(frame["homogenization_note"])))  # each says 'not computed: <why>'
    )
    return {
        **{count: int(frame[count].sum()) for count in counts},
        **{metric: float(frame[metric].mean()) for metric in (*METRICS, "ngd_mean")},
        "homogenization_note": note,
    }


def _group_rows(
    groups: pd.DataFrame,
    text: str,
    lang: str,
    ttr_stop_words: frozenset[str],
    homogenization: Callable[[list[str]], HomogenizationResult],
    counts: Mapping[str, Callable[[pd.DataFrame], int]],
) -> list[dict[str, object]]:
    """One row per category of ``groups`` (sorted by name), the Average row and the Overall row (all distinct
    units of ``groups`` together). Units are the distinct values of its ``text`` column, sorted; ``counts``
    gives extra count columns computed from each category's rows."""
    if groups.empty:
        return []
    tokens = {unit: tokenize(unit, lang) for unit in groups[text].unique()}

    def row(part: pd.DataFrame) -> dict[str, object]:
        units = sorted(part[text].unique())
        return {
            **{name: count(part) for name, count in counts.items()},
            **_metric_row(units, tokens, lang, ttr_stop_words, homogenization),
        }

    categories = [
        {"category": str(category), **row(part)}
        for category, part in sorted(groups.groupby("category"), key=lambda item: str(item[0]))
    ]
    average = {"category": "Average", **_average_row(categories, [*counts, "n_units"])}
    return [*categories, average, {"category": "Overall", **row(groups)}]


def _homogenizer(
    scorer: _BertScoreModel | str, model: str | None, num_layers: int, max_pairs: int, seed: int
) -> Callable[[list[str]], HomogenizationResult]:
    """The homogenization of a group of units with an already loaded scorer (or the reason it is not computed)."""
    return partial(
        _homogenization, scorer=scorer, model=model or "", num_layers=num_layers, max_pairs=max_pairs, seed=seed
    )


def _scorer_for(model: str | None, num_layers: int, batch_size: int, device: str) -> _BertScoreModel | str:
    """The loaded model, or why there is none (no model given for the language, or it cannot be loaded)."""
    if model is None:
        return "no homogenization model given for this language"
    return _scorer_or_reason(model, num_layers, batch_size, device)


TEMPLATE_COLUMNS = [
    "category",
    "n_templates",
    "n_units",
    "ngd",
    "ngd_mean",
    "ttr",
    "self_bleu",
    "homogenization",
    "homogenization_note",
]
INSTANCE_COLUMNS = ["config", *(column for column in TEMPLATE_COLUMNS if column != "n_templates")]


def _template_table(
    templates: pd.DataFrame, homogenization: Callable[[list[str]], HomogenizationResult]
) -> pd.DataFrame:
    units = template_units(templates)
    rows = _group_rows(
        units,
        "text",
        "fa",
        stop_words("fa") | {NEUTRAL_TOKEN},
        homogenization,
        {"n_templates": lambda part: int(part["template_id"].nunique())},
    )
    return pd.DataFrame(rows, columns=TEMPLATE_COLUMNS).astype({"n_templates": "int64", "n_units": "int64"})


def template_diversity_table(
    templates: pd.DataFrame,
    *,
    homogenization_model: str | None,
    homogenization_num_layers: int = DEFAULT_HOMOGENIZATION_LAYERS,
    homogenization_max_pairs: int = 5_000,
    homogenization_batch_size: int = 64,
    seed: int = 0,
    device: str = "cpu",
) -> pd.DataFrame:
    """The paper's Table 2 (§3.5, Appendix C) on template texts: one row per category, an 'Average' row (the
    unweighted mean of the category rows) and an 'Overall' row (all distinct template texts).

    Units are :func:`template_units`' distinct masked texts of the category, tokenised with hazm; TTR leaves out
    hazm's stop words and :data:`NEUTRAL_TOKEN` (a slot marker, not a word of the template), NGD and Self-BLEU
    keep both. ``homogenization_model``: a model path or Hub id for BERTScore (FaBERT in the paper), or None.
    Columns: category, n_templates, n_units, ngd (C.3's sum, 0-4), ngd_mean (ngd / 4, the scale of Table 2's
    column), ttr, self_bleu, homogenization, homogenization_note.
    """
    scorer = _scorer_for(homogenization_model, homogenization_num_layers, homogenization_batch_size, device)
    homogenization = _homogenizer(
        scorer, homogenization_model, homogenization_num_layers, homogenization_max_pairs, seed
    )
    return _template_table(templates, homogenization)


def _instance_table(
    examples: pd.DataFrame, homogenizers: Mapping[str, Callable[[list[str]], HomogenizationResult]]
) -> pd.DataFrame:
    missing = {"category", "lang", "variant", "context"} - set(examples.columns)
    if missing:
        raise ValueError(f"diversity: the example table lacks the columns {sorted(missing)}")
    frame = examples.assign(config=example_configs(examples))
    rows = []
    for config in [name for name in CONFIGS if (frame["config"] == name).any()]:
        lang = "en" if config == "en" else "fa"
        part = frame[frame["config"] == config]
        rows += [
            {"config": config, **row}
            for row in _group_rows(part, "context", lang, stop_words(lang), homogenizers[lang], {})
        ]
    return pd.DataFrame(rows, columns=INSTANCE_COLUMNS).astype({"n_units": "int64"})


def diversity_table(
    examples: pd.DataFrame,
    *,
    homogenization_model: str | Mapping[str, str | None] | None,
    homogenization_num_layers: int = DEFAULT_HOMOGENIZATION_LAYERS,
    homogenization_max_pairs: int = 5_000,
    homogenization_batch_size: int = 64,
    seed: int = 0,
    device: str = "cpu",
) -> pd.DataFrame:
    """The instance-level diversity per config: one row per category, an 'Average' row (the unweighted mean of
    the category rows) and an 'Overall' row (all units of the config). Not the paper's Table 2 (see the module).

    ``examples`` is the example table (columns category, lang, variant, context); configs as
    ``pbbq.tasks.schemas.example_configs`` says ('fa', 'fa-names' with all seeds together, 'en'). Units are each
    group's distinct contexts, tokenised once per config (``pbbq.tasks.persian_text.tokenize``).
    ``homogenization_model``: one model for every language, a mapping lang → model (a missing or None entry
    is not computed), or None to skip BERTScore. Columns: config, category, n_units, ngd, ngd_mean, ttr,
    self_bleu, homogenization, homogenization_note.
    """

    def homogenizer(lang: str) -> Callable[[list[str]], HomogenizationResult]:
        model = homogenization_model.get(lang) if isinstance(homogenization_model, Mapping) else homogenization_model
        scorer = _scorer_for(model, homogenization_num_layers, homogenization_batch_size, device)
        return _homogenizer(scorer, model, homogenization_num_layers, homogenization_max_pairs, seed)

    langs = {"en" if config == "en" else "fa" for config in example_configs(examples)} if len(examples) else set()
    return _instance_table(examples, {lang: homogenizer(lang) for lang in langs})


# ----------------------------------------------------------------------------------------------- reporting

_HEADERS = {
    "ngd": "NGD ↑",
    "ngd_mean": "NGD ÷ 4 ↑",
    "ttr": "TTR ↑",
    "self_bleu": "Self-BLEU ↓",
    "homogenization": "BERTScore ↓",
}
_COUNT_HEADERS = {"n_templates": "# templates", "n_units": "# units"}


def _sections(table: pd.DataFrame) -> list[tuple[str | None, pd.DataFrame]]:
    """The table per config (instance level), or whole (template level: no config column)."""
    if "config" in table.columns:
        return [(str(config), part) for config, part in table.groupby("config", sort=False)]
    return [(None, table)]


def table2_markdown(table: pd.DataFrame, title: str) -> str:
    """Markdown laid out like the paper's Table 2, under ``title``: one table (template level) or one per config
    (instance level): Category, the counts, NGD ↑, NGD ÷ 4 ↑, TTR ↑, Self-BLEU ↓, BERTScore ↓ (4 decimals; 'not
    computed' for NaN), Average and Overall in bold, then each distinct BERTScore note with its rows."""
    counts = [column for column in _COUNT_HEADERS if column in table.columns]
    sections = [f"## {title}"]
    for config, part in _sections(table):
        lines = [f"### {config}", ""] if config is not None else []
        headers = ["Category", *(_COUNT_HEADERS[c] for c in counts), *_HEADERS.values()]
        lines += ["| " + " | ".join(headers) + " |", "| --- | " + " | ".join("---:" for _ in headers[1:]) + " |"]
        for row in part.itertuples(index=False):
            cells = [str(row.category), *(str(getattr(row, c)) for c in counts)] + [
                "not computed" if pd.isna(getattr(row, metric)) else f"{getattr(row, metric):.4f}"
                for metric in _HEADERS
            ]
            if row.category in ("Average", "Overall"):
                cells = [f"**{cell}**" for cell in cells]
            lines.append("| " + " | ".join(cells) + " |")
        notes = part.groupby("homogenization_note", sort=False)["category"].agg(", ".join)
        lines += ["", "BERTScore:"] + [f"- {categories}: {note}" for note, categories in notes.items()]
        sections.append("\n".join(lines))
    return "\n\n".join(sections) + "\n"


def plot_metric_bars(table: pd.DataFrame, out_dir: Path, prefix: str = "diversity") -> list[Path]:
    """One PNG per metric (``<prefix>_<metric>.png`` in ``out_dir``): a bar per category (and per config, for the
    instance-level table), the Average and Overall rows last; a NaN draws no bar. Agg backend, no timestamp or
    version in the file, so the same table gives the same bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out_dir.mkdir(parents=True, exist_ok=True)
    series = table if "config" in table.columns else table.assign(config="templates")
    categories = list(dict.fromkeys(series["category"]))
    configs = list(dict.fromkeys(series["config"]))
    level = "instances" if "config" in table.columns else "templates"
    paths = []
    for metric in METRICS:
        wide = series.pivot(index="category", columns="config", values=metric).reindex(categories)
        figure = Figure(figsize=(max(6.0, 0.25 * len(categories) * len(configs) + 2.5), 4.5))
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        width = 0.8 / max(len(configs), 1)  # an empty table draws empty axes
        for k, config in enumerate(configs):
            axes.bar(np.arange(len(categories)) + k * width, wide[config].to_numpy(dtype=float), width, label=config)
        axes.set_xticks(np.arange(len(categories)) + 0.4 - width / 2, categories, rotation=60, ha="right")
        axes.set_ylabel(_HEADERS[metric])
        axes.set_title(f"{_HEADERS[metric]} per category ({level})")
        axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        figure.tight_layout()
        path = out_dir / f"{prefix}_{metric}.png"
        figure.savefig(path, format="png", metadata={"Software": None})
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------------------------- the stage

_METRIC_FIELDS = [
    ("n_units", pa.int64()),
    ("ngd", pa.float64()),
    ("ngd_mean", pa.float64()),
    ("ttr", pa.float64()),
    ("self_bleu", pa.float64()),
    ("homogenization", pa.float64()),
    ("homogenization_note", pa.string()),
]
TABLE2 = pa.schema([("category", pa.string()), ("n_templates", pa.int64()), *_METRIC_FIELDS])
"""The paper's Table 2, on template texts."""
TABLE2_INSTANCES = pa.schema([("config", pa.string()), ("category", pa.string()), *_METRIC_FIELDS])
"""The same metrics on the instantiated contexts, per config."""


@dataclass(frozen=True)
class DiversityParams:
    homogenization_model: str | None = None
    """FaBERT (``sbunlp/fabert``) or any local model path for the Persian texts; None: not computed."""
    homogenization_model_en: str | None = None
    """A model for the English config (FaBERT is Persian); None: not computed."""
    homogenization_num_layers: int = DEFAULT_HOMOGENIZATION_LAYERS
    homogenization_max_pairs: int = 5_000
    """Above this many pairs per group, a seeded sample of pairs is scored (size and seed in the notes)."""
    homogenization_batch_size: int = 64
    seed: int = 0


def _records(table: pd.DataFrame) -> list[dict[str, object]]:
    return table.astype(object).where(table.notna(), None).to_dict(orient="records")


def diversity(examples: pd.DataFrame, templates: pd.DataFrame, params: DiversityParams) -> StageOutput:
    """Table 2 twice: ``table2``, the paper's, on the template texts of ``templates`` (the ``04_disambiguate``
    templates table), and ``table2_instances``, on the contexts of ``examples`` per config; each as parquet, CSV,
    Markdown and a bar chart per metric. Each BERTScore model is loaded once for both tables."""
    scorers = {
        lang: _scorer_for(model, params.homogenization_num_layers, params.homogenization_batch_size, "cpu")
        for lang, model in (("fa", params.homogenization_model), ("en", params.homogenization_model_en))
    }
    models = {"fa": params.homogenization_model, "en": params.homogenization_model_en}
    homogenizers = {
        lang: _homogenizer(
            scorer, models[lang], params.homogenization_num_layers, params.homogenization_max_pairs, params.seed
        )
        for lang, scorer in scorers.items()
    }
    table = _template_table(templates, homogenizers["fa"])
    instances = _instance_table(examples, homogenizers)
    with tempfile.TemporaryDirectory() as scratch:
        charts = {
            path.name: path.read_bytes()
            for path in [
                *plot_metric_bars(table, Path(scratch), "diversity"),
                *plot_metric_bars(instances, Path(scratch), "diversity_instances"),
            ]
        }
    in_review = (templates["disambiguated_source"] == REVIEW_SOURCE) | (
        templates["counter_biased_source"] == REVIEW_SOURCE
    )
    both = pd.concat([table["homogenization"], instances["homogenization"]])
    report = {
        "stage": "diversity",
        "parameters": asdict(params),
        "counts": {
            "in": len(examples),
            "out": len(table) + len(instances),
            "templates": len(templates),
            "templates_used": int((~in_review).sum()),
            "templates_in_review": sorted(templates.loc[in_review, "template_id"]),
            "table2_rows": len(table),
            "table2_instances_rows": len(instances),
        },
        "dropped": {"total": 0, "by_reason": {}},
        "table2": _records(table),
        "table2_instances": _records(instances),
        "homogenization": {"computed_rows": int(both.notna().sum()), "not_computed_rows": int(both.isna().sum())},
    }
    return StageOutput(
        tables={"table2": table, "table2_instances": instances},
        schemas={"table2": TABLE2, "table2_instances": TABLE2_INSTANCES},
        report=report,
        csv=("table2", "table2_instances"),
        files={
            "table2.md": table2_markdown(table, TEMPLATE_TITLE).encode("utf-8"),
            "table2_instances.md": table2_markdown(instances, INSTANCE_TITLE).encode("utf-8"),
            **charts,
        },
    )
