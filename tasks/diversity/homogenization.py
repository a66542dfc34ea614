"""Homogenization (PBBQ Appendix C.4; Padmakumar & He, 2023), the fourth metric of Table 2 (§3.5): the mean
BERTScore F1 over pairs of distinct units, with FaBERT as in the paper or any local model.

The engine reuses bert-score's own loaders and encoding and scores every pair from embeddings computed once per
distinct text; above a number of pairs it scores a seeded sample of them. The only module that imports torch,
transformers and bert-score, lazily, inside its functions: without the homogenization extra (or the model on
disk) a result says why it was not computed, and the other metrics run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..imports import one_import_at_a_time

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

DEFAULT_HOMOGENIZATION_MODEL = "sbunlp/fabert"  # FaBERT (Masumi et al., 2025), as in §3.5
# bert-score's layer for the BERT-base models it knows (bert-base-uncased, bert-base-multilingual-cased); FaBERT
# is a BERT-base and the paper names no layer, so this is our choice, a parameter of the flow.
DEFAULT_HOMOGENIZATION_LAYERS = 9


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
class BertScoreModel:
    """A model and tokenizer loaded the way bert-score loads them, with the batch size and device."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    batch_size: int
    device: str


def _load_bertscore_model(model_path: str, num_layers: int, batch_size: int, device: str) -> BertScoreModel:
    """Load ``model_path`` (a local folder, or a Hub id already in the local cache: never downloaded) with
    bert-score's own loaders: its tokenizer choice (slow tokenizer) and its cut to the first ``num_layers``."""
    with one_import_at_a_time():
        from bert_score.utils import get_model, get_tokenizer
        from huggingface_hub import snapshot_download

    folder = model_path if Path(model_path).is_dir() else snapshot_download(model_path, local_files_only=True)
    model = get_model(str(folder), num_layers).to(device)
    return BertScoreModel(model, get_tokenizer(str(folder), use_fast=False), batch_size, device)


def _embed(
    texts: Sequence[str], scorer: BertScoreModel
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Embed each text once, as bert-score does: its encoding (special tokens kept), one forward pass of the
    cut model, unit-normalised token vectors. Returns the vectors of all texts packed one after the other,
    each text's offset and length, and each token's weight: 1 / #tokens for a word piece, 0 for [CLS] and [SEP]
    (bert-score's idf=False weights, normalised per text). Texts are batched by length to limit padding."""
    with one_import_at_a_time():
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
    with one_import_at_a_time():
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
    with one_import_at_a_time():
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


def homogenization_with_scorer(
    sentences: Sequence[str], scorer: BertScoreModel | str, *, model: str, num_layers: int, max_pairs: int, seed: int
) -> HomogenizationResult:
    """The homogenization of ``sentences`` with a scorer from :func:`load_scorer` (one load serves many groups),
    or not computed with ``scorer`` as the reason when it is a string."""
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
    picked = np.asarray([sentences[i] for i in used.tolist()], dtype=object)  # only the texts of pairs scored
    distinct, text_index = np.unique(picked, return_inverse=True)
    embedded = _embed(distinct.tolist(), scorer)  # each distinct text once
    text_of = text_index[inverse]
    f1 = _pair_f1(embedded, text_of[: len(first)], text_of[len(first) :], scorer.batch_size)
    return result(float(f1.mean()), "", len(first))


def load_scorer(model_path: str, num_layers: int, batch_size: int, device: str) -> BertScoreModel | str:
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
    scorer = load_scorer(model_path, num_layers, batch_size, device)
    return homogenization_with_scorer(
        sentences, scorer, model=model_path, num_layers=num_layers, max_pairs=max_pairs, seed=seed
    )
