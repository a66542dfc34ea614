"""Benchmark: exact Self-BLEU from n-gram tables vs n² sacrebleu sentence_bleu calls, at the paper's scale.

Run from the repository root: ``python -m benchmarks.self_bleu [--n 2000] [--big-n 38000]``. Sentences are
seeded synthetic Persian-looking text: 15-30 words drawn from a 3,000-word vocabulary with Zipf-like
frequencies (p ∝ 1 / rank^1.1), so n-grams repeat as in real text.
"""

import argparse
import time

import numpy as np
from sacrebleu import sentence_bleu

from pbbq.tasks.diversity.self_bleu import self_bleu
from pbbq.tasks.text.languages.fa import tokenize_fa

LETTERS = list("آابپتثجچحخدذرزژسشصضطظعغفقکگلمنوهی")


def synthetic_sentences(n: int, seed: int, vocab_size: int = 3000) -> list[str]:
    """``n`` sentences of 15-30 words, Zipf-like word frequencies, ending with a full stop."""
    rng = np.random.default_rng(seed)
    vocab = np.array(["".join(rng.choice(LETTERS, size=rng.integers(2, 8))) for _ in range(vocab_size)])
    weights = 1.0 / np.arange(1, vocab_size + 1) ** 1.1
    lengths = rng.integers(15, 31, size=n)
    picks = rng.choice(vocab_size, size=int(lengths.sum()), p=weights / weights.sum())
    words = np.split(vocab[picks], np.cumsum(lengths)[:-1])
    return [" ".join(sentence) + "." for sentence in words]


def reference_self_bleu(sentences: list[str]) -> tuple[float, float]:
    """The definition, n² work: the mean of sacrebleu's sentence_bleu of each sentence against all others,
    on the same hazm tokens (joined by spaces, tokenize='none'), with its wall time; tokenising is done
    before timing starts."""
    joined = [" ".join(tokenize_fa(sentence)) for sentence in sentences]
    start = time.perf_counter()
    scores = [
        sentence_bleu(hypothesis, joined[:i] + joined[i + 1 :], tokenize="none").score
        for i, hypothesis in enumerate(joined)
    ]
    return sum(scores) / len(scores) / 100, time.perf_counter() - start


def timed_self_bleu(sentences: list[str]) -> tuple[float, float]:
    """Self-BLEU with its wall time, tokenisation with hazm included."""
    start = time.perf_counter()
    value = self_bleu(sentences, tokenize=tokenize_fa)
    return value, time.perf_counter() - start


def main() -> None:
    """Print the comparison table and the large run."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000, help="sentences for the comparison with sacrebleu")
    parser.add_argument("--big-n", type=int, default=38000, help="sentences for the fast version alone")
    args = parser.parse_args()
    tokenize_fa("گرم کردن")  # build hazm's tokenizer before any timing

    sentences = synthetic_sentences(args.n, seed=0)
    fast, fast_seconds = timed_self_bleu(sentences)
    reference, reference_seconds = reference_self_bleu(sentences)
    print(f"Self-BLEU of {args.n} synthetic Persian sentences (15-30 words, 3,000-word Zipf vocabulary)")
    print(f"| {'version':<28} | {'Self-BLEU':>18} | {'time s':>9} |")
    print(f"| {'-' * 28} | {'-' * 18} | {'-' * 9} |")
    print(f"| {'n-gram tables (ours)':<28} | {fast:>18.15f} | {fast_seconds:>9.3f} |")
    print(f"| {'sacrebleu sentence_bleu, n²':<28} | {reference:>18.15f} | {reference_seconds:>9.3f} |")
    print(f"|diff| = {abs(fast - reference):.1e}, speed-up = {reference_seconds / fast_seconds:,.0f}x")

    big = synthetic_sentences(args.big_n, seed=1)
    value, seconds = timed_self_bleu(big)
    print(f"\n{args.big_n} sentences, n-gram tables alone: Self-BLEU = {value:.6f} in {seconds:.2f} s")


if __name__ == "__main__":
    main()
