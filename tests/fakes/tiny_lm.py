"""A tiny random causal language model on disk, for running lm-evaluation-harness's ``hf`` backend offline.

GPT-2 architecture (2 layers, 2 heads, width 32, ``torch.manual_seed(seed)``) over a byte-level tokenizer with no
merges: every UTF-8 byte is one token, so any Persian or English text encodes, and the same seed gives the same
model and the same log-likelihoods. Nothing is downloaded.

    python -m tests.fakes.tiny_lm OUT_DIR      # then: pbbq evaluate --model hf:pretrained=OUT_DIR ...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def lm_eval_results(
    model: Path, tasks: str, include_path: Path, folder: Path, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``lm_eval`` unmodified, as a user runs it (a fresh process in ``folder``, without this project on its
    ``PYTHONPATH``, ``env`` added): the ``tasks`` found under ``include_path``, 12 examples each, with the ``hf``
    model at ``model``. Its results per task, each checked to hold an accuracy in [0, 1] and a bounded
    ambiguous-context bias score in [-1, 1]."""
    command = [
        sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
        "--device", "cpu", "--tasks", tasks, "--include_path", str(include_path), "--limit", "12",
        "--output_path", str(folder / "results"),
    ]  # fmt: skip
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"} | dict(env or {})
    done = subprocess.run(
        command, cwd=folder, env=environment, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [results_file] = list((folder / "results").rglob("results_*.json"))
    results: dict[str, Any] = json.loads(results_file.read_text(encoding="utf-8"))["results"]
    for task in results.values():
        assert 0.0 <= task["acc,none"] <= 1.0 and -1.0 <= task["beta_amb_bounded,none"] <= 1.0
    return results


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.fakes.tiny_lm OUT_DIR")
    print(build_tiny_causal_lm(Path(sys.argv[1])))
