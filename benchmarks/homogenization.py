"""Benchmark: batched BERTScore homogenization vs bert_score.score on the same pairs.

Run from the repository root: ``python -m benchmarks.homogenization [--pairs 1000]``. Needs the homogenization
extra (torch, transformers, bert-score, tokenizers). The model is a tiny random BERT built here (also used by
tests/test_diversity.py), so nothing is downloaded.
"""

import argparse
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from pbbq.tasks.diversity.homogenization import _pairs, homogenization_bertscore

TINY_LAYERS = 2
REPEATS = 3


def build_tiny_bert(sentences: Sequence[str], out_dir: Path, seed: int = 0) -> Path:
    """Save to ``out_dir`` a tiny randomly initialised BERT (hidden 64, 2 layers, 2 heads; torch.manual_seed
    ``seed``) with a WordPiece vocabulary trained by ``tokenizers`` on ``sentences``; return ``out_dir``.

    The trainer breaks ties between merges in the order of Rust's randomly seeded hash maps, so a vocabulary
    with merges changes from run to run; training stops at the alphabet (characters and ##characters), which
    is the same every run, and ids are assigned in sorted order, so the same sentences give the same model.
    """
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, BertTokenizerFast

    word_piece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    word_piece.normalizer = normalizers.BertNormalizer(lowercase=True)
    word_piece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    word_piece.train_from_iterator(sentences, trainers.WordPieceTrainer(vocab_size=1, special_tokens=special))
    pieces = special + sorted(set(word_piece.get_vocab()) - set(special))
    vocab = {piece: index for index, piece in enumerate(pieces)}
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        num_hidden_layers=TINY_LAYERS,
        num_attention_heads=2,
        intermediate_size=128,
    )
    # transformers 5 ignores vocab_file=; the vocabulary is passed as a dict
    tokenizer = BertTokenizerFast(vocab=vocab, model_max_length=config.max_position_embeddings)
    tokenizer.save_pretrained(out_dir)
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(out_dir)
    return out_dir


def synthetic_persian(n: int, seed: int) -> list[str]:
    """``n`` distinct Persian-looking sentences of 5-15 words from a 60-word vocabulary."""
    rng = np.random.default_rng(seed)
    letters = list("ابپتجچحدرزسشعفکگلمنوهی")
    vocab = ["".join(rng.choice(letters, size=rng.integers(2, 6))) for _ in range(60)]
    sentences = {" ".join(rng.choice(vocab, size=rng.integers(5, 16))) for _ in range(2 * n)}
    return sorted(sentences)[:n]


def best_time(run: Callable[[], float]) -> tuple[float, float]:
    """The value of ``run`` and its best wall time over REPEATS runs after one warm-up run (imports, caches)."""
    value = run()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return value, min(times)


def main() -> None:
    """Time both on the same pairs and print a table."""
    from bert_score import score

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--sentences", type=int, default=200)
    args = parser.parse_args()
    sentences = synthetic_persian(args.sentences, seed=0)
    first, second = _pairs(len(sentences), args.pairs, seed=0)
    with tempfile.TemporaryDirectory() as folder:
        model = str(build_tiny_bert(sentences, Path(folder)))

        def ours() -> float:
            return homogenization_bertscore(
                sentences, model, num_layers=TINY_LAYERS, max_pairs=args.pairs, seed=0
            ).value

        def reference() -> float:
            cands, refs = [sentences[i] for i in first], [sentences[j] for j in second]
            f1 = score(cands, refs, model_type=model, num_layers=TINY_LAYERS, idf=False, device="cpu")[2]
            return float(f1.double().mean())

        (ours_value, ours_time), (reference_value, reference_time) = best_time(ours), best_time(reference)
    print(f"{len(first)} pairs of {len(sentences)} sentences, tiny BERT (hidden 64, {TINY_LAYERS} layers), cpu,")
    print(f"best of {REPEATS} warm runs each (model loading included in both)")
    print(f"| {'version':<22} | {'mean F1':>10} | {'time s':>8} |")
    print(f"| {'-' * 22} | {'-' * 10} | {'-' * 8} |")
    print(f"| {'batched (ours)':<22} | {ours_value:>10.6f} | {ours_time:>8.3f} |")
    print(f"| {'bert_score.score':<22} | {reference_value:>10.6f} | {reference_time:>8.3f} |")
    print(f"|diff| = {abs(ours_value - reference_value):.2e}, speed-up = {reference_time / ours_time:.1f}x")


if __name__ == "__main__":
    main()
