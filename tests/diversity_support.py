"""What the diversity tests share: a templates table and an example table worked by hand, sacrebleu's Self-BLEU
by its definition, and the tiny BERT the homogenization tests score with."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
from sacrebleu import sentence_bleu

from pbbq.tasks.diversity import DiversityParams, _homogenizers, _instance_table
from pbbq.tasks.diversity.ngrams import TOKENS_AT_ONCE, code_token_lists, ngram_diversity_of_units

SENTENCES = [
    "پدر علی دیروز به مدرسه رفت",
    "مادر زهرا امروز به بازار رفت",
    "مرد جوان کارمند دولت است",
    "زن پیر در روستا زندگی می\u200cکند",
    "پسر کوچک با دوستش بازی کرد",
    "دختر دانشجو کتاب تازه‌ای خرید",
    "پدر علی دیروز به مدرسه رفت و برگشت",
    "the nurse said the doctor was late",
    "a young man works for the government",
    "an old woman lives in the village",
]
"""Texts to score homogenization on, and the vocabulary of :func:`tiny_bert`."""


def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random BERT saved on disk, its vocabulary from :data:`SENTENCES` (skipped only when the
    homogenization extra is not installed, or outside the repository: mutation testing's scratch copy holds no
    benchmarks/)."""
    for module in ("torch", "transformers", "tokenizers", "bert_score"):
        pytest.importorskip(module)
    build_tiny_bert = pytest.importorskip("benchmarks.homogenization").build_tiny_bert

    return str(build_tiny_bert(SENTENCES, tmp_path_factory.mktemp("tiny_bert")))


def reference_bleu_scores(hypotheses: list[str], tokenize_mode: str) -> np.ndarray:
    """The definition of Self-BLEU's scores: sacrebleu's sentence_bleu of each sentence against all the others."""
    return np.array(
        [
            sentence_bleu(h, hypotheses[:i] + hypotheses[i + 1 :], tokenize=tokenize_mode).score
            for i, h in enumerate(hypotheses)
        ]
    )


def template_row(
    template_id: str,
    category: str,
    ambiguous: str,
    biased: str,
    counter: str,
    *,
    source: str = "llm",
    counter_source: str = "mirror",
) -> dict[str, str]:
    """A row of the 04_disambiguate templates table, with the columns the diversity stage reads."""
    return {
        "template_id": template_id,
        "stereotype_id": template_id[:-3],
        "category": category,
        "ambiguous_fa": ambiguous,
        "disambiguated_fa": biased,
        "disambiguated_counter_biased_fa": counter,
        "disambiguated_source": source,
        "counter_biased_source": counter_source,
    }


def make_templates() -> pd.DataFrame:
    """Age: one template whose counter-biased text is the mirror (one unit once masked) and one in review
    (left out, its stray placeholder never read); Gender: a mirror exception (3 units); Religion: texts equal
    to Age's and Gender's (the Overall row counts each text once)."""
    return pd.DataFrame(
        [
            template_row(
                "AGE-01-T1",
                "Age",
                "{stereo} و {nonstereo} در پارک بودند",
                "{stereo} در پارک خندید",
                "{nonstereo} در پارک خندید",
            ),
            template_row("AGE-02-T1", "Age", "{stereo} و {nonstereo}", "{Nonstereo} رفت", "", source="review"),
            template_row(
                "GEN-01-T1",
                "Gender",
                "{stereo} کتاب خرید",
                "{stereo} دوید",
                "{nonstereo} نشستند",
                source="human",
                counter_source="human",
            ),
            template_row(
                "REL-01-T1", "Religion", "{nonstereo} و {stereo} در پارک بودند", "{stereo} دوید", "{nonstereo} دوید"
            ),
            template_row(
                "REL-02-T1", "Religion", "{stereo} آمد", "{stereo} ماند", "{nonstereo} ماند", counter_source="review"
            ),
        ]
    )


def make_examples() -> pd.DataFrame:
    """An example table: 2 categories; each context twice (negative and non-negative question); Persian
    originals, two name-proxy seeds and English translations."""
    fa = {
        "Age": ["پیرمرد و جوان در پارک بودند.", "پیرمرد و جوان در بازار بودند.", "جوان و پیرمرد در پارک بودند."],
        "Gender": ["مرد و زن در اداره کار می‌کنند.", "زن و مرد در اداره کار می‌کنند."],
    }
    names = {"Age": ["علی و رضا در پارک بودند."], "Gender": ["علی و مریم در اداره کار می‌کنند."]}
    en = {"Age": ["An old man and a young man were in the park."], "Gender": ["A man and a woman work there."]}
    rows = []
    for lang, variants in (("fa", {"original": fa, "names-7271": names, "names-861": names}), ("en", {"x": en})):
        for variant, by_category in variants.items():
            for category, contexts in by_category.items():
                for context in contexts:
                    for polarity in ("neg", "nonneg"):
                        rows.append(
                            {
                                "category": category,
                                "lang": lang,
                                "variant": "original" if lang == "en" else variant,
                                "context": context,
                                "context_condition": "ambig",
                                "question_polarity": polarity,
                            }
                        )
    return pd.DataFrame(rows)


def diversity_table(
    examples: pd.DataFrame, params: DiversityParams | None = None, *, device: str = "cpu"
) -> pd.DataFrame:
    """The instance-level diversity per config, as the diversity stage makes its ``table2_instances``: one row per
    category, an 'Average' row and an 'Overall' row of each config (``examples``: category, lang, variant,
    context). BERTScore only when ``params`` names a model for the configs' language."""
    langs = sorted(set(examples["lang"])) if len(examples) else []
    return _instance_table(examples, _homogenizers(params or DiversityParams(), langs, device))


def ngram_diversity(token_lists: Sequence[Sequence[str]], tokens_at_once: int = TOKENS_AT_ONCE) -> float:
    """N-gram diversity (Appendix C.3) of units given as token lists: ``ngram_diversity_of_units`` of their codes."""
    coded = code_token_lists(token_lists)
    return ngram_diversity_of_units(coded, np.arange(len(coded)), tokens_at_once)


def type_token_ratio(token_lists: Sequence[Sequence[str]], stop_words: frozenset[str]) -> float:
    """Type-token ratio (Appendix C.2) by its definition, on words: #unique / #all of the units' words, stop words
    removed; NaN when no word is left."""
    kept = [token for tokens in token_lists for token in tokens if token not in stop_words]
    return len(set(kept)) / len(kept) if kept else math.nan
