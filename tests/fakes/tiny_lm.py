"""A tiny random causal language model on disk, for running lm-evaluation-harness's ``hf`` backend offline.

GPT-2 architecture (2 layers, 2 heads, width 32, ``torch.manual_seed(seed)``) over a byte-level tokenizer with no
merges: every UTF-8 byte is one token, so any Persian or English text encodes, and the same seed gives the same
model and the same log-likelihoods. Nothing is downloaded.

    python -m tests.fakes.tiny_lm OUT_DIR      # then: pbbq evaluate --model hf:pretrained=OUT_DIR ...
"""

from __future__ import annotations

import sys
from pathlib import Path

EOS = "<|endoftext|>"
MAX_POSITIONS = 4096


def build_tiny_causal_lm(out_dir: Path, seed: int = 0) -> Path:
    """Save the tiny model and its tokenizer to ``out_dir`` (created) and return it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {piece: index for index, piece in enumerate(alphabet)}
    vocab[EOS] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([EOS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token=EOS, bos_token=EOS, pad_token=EOS, model_max_length=MAX_POSITIONS
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    config = GPT2Config(
        vocab_size=len(vocab),
        n_positions=MAX_POSITIONS,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=vocab[EOS],
        eos_token_id=vocab[EOS],
    )
    torch.manual_seed(seed)
    GPT2LMHeadModel(config).save_pretrained(out_dir)
    return out_dir


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.fakes.tiny_lm OUT_DIR")
    print(build_tiny_causal_lm(Path(sys.argv[1])))
