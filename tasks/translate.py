"""Translation fa → en of generated instances, not templates (PakBBQ §3.3: placeholders break in translation).

Each distinct Persian segment is translated once, since contexts, questions and options recur across
examples: entity phrases first (as bare noun phrases), then questions, then contexts, each context with a
glossary of the entity phrases it holds so that the English options occur in the English context. The
'unknown' phrasings are not translated: they map to a fixed English list (``annotations/unknown_phrases.csv``).
Every English segment is translated back to Persian and scored with chrF (sacrebleu) against the original;
a segment under ``min_chrf`` is flagged for review, and ``keep_flagged`` decides whether its examples stay.
English examples keep the Persian example's id stem (``<id>-en``) and point to it in ``source_example_id``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from string import Template

import pandas as pd
import pyarrow as pa
from sacrebleu.metrics import CHRF

from tasks.artifacts import REPO_ROOT, StageOutput, count_reasons, sha256_bytes
from tasks.caching import stage_task
from tasks.llm import LLMClient, LLMConfig, LLMRequest, open_llm
from tasks.persian_text import normalize_fa
from tasks.schemas import EXAMPLE

STAGE = "translate"
PROMPT_FILE = REPO_ROOT / "prompts" / "translate.fa-en.txt"
BACK_PROMPT_FILE = REPO_ROOT / "prompts" / "back_translate.en-fa.txt"
KIND_INSTRUCTIONS = {
    "entity": "It is a noun phrase naming a person or a group: translate it as a bare noun phrase, without an article.",
    "question": "It is a question about one of two people: keep it a question.",
    "context": "It is a short story about two people. Render these phrases exactly as given:\n$glossary",
}
SEGMENT = pa.schema(
    [
        ("segment_id", pa.string()),
        ("kind", pa.string()),
        ("text_fa", pa.string()),
        ("text_en", pa.string()),
        ("back_fa", pa.string()),
        ("chrf", pa.float64()),
        ("flagged", pa.bool_()),
        ("request_ids", pa.list_(pa.string())),
    ]
)
EXAMPLE_DROPPED = EXAMPLE.append(pa.field("reason", pa.string()))
_ARTICLE = re.compile(r"^(the|a|an)\s+", re.IGNORECASE)


@dataclass(frozen=True)
class TranslateParams:
    min_chrf: float = 40.0
    """Back-translation chrF (0–100) under which a segment is flagged for review."""
    keep_flagged: bool = False
    """Keep the examples of flagged segments in the dataset (they are reported either way)."""


@dataclass(frozen=True)
class TranslatePrompts:
    forward: str
    back: str

    @classmethod
    def load(cls, forward: Path = PROMPT_FILE, back: Path = BACK_PROMPT_FILE) -> TranslatePrompts:
        return cls(forward.read_text(encoding="utf-8"), back.read_text(encoding="utf-8"))

    @property
    def sha256(self) -> str:
        return sha256_bytes((self.forward + "\0" + self.back).encode("utf-8"))


def _segment_id(kind: str, text: str) -> str:
    return f"{kind}-{sha256_bytes(text.encode('utf-8'))[:12]}"


def segments(examples: pd.DataFrame) -> pd.DataFrame:
    """The distinct Persian segments of the examples: entity phrases, questions and contexts, each with the
    entity phrases a context holds (its glossary)."""
    entities = sorted(set(examples["stereo_entity"]) | set(examples["nonstereo_entity"]))
    contexts = examples.groupby("context", sort=True).agg(
        stereo=("stereo_entity", "first"), nonstereo=("nonstereo_entity", "first")
    )
    rows = [{"kind": "entity", "text_fa": text, "glossary": ()} for text in entities]
    rows += [{"kind": "question", "text_fa": text, "glossary": ()} for text in sorted(set(examples["question"]))]
    rows += [
        {"kind": "context", "text_fa": text, "glossary": (row.stereo, row.nonstereo)}
        for text, row in contexts.iterrows()
    ]
    frame = pd.DataFrame(rows, columns=["kind", "text_fa", "glossary"])
    frame.insert(0, "segment_id", [_segment_id(k, t) for k, t in zip(frame["kind"], frame["text_fa"], strict=True)])
    return frame


def _request(kind: str, text: str, instructions: str, prompt: str, prompt_hash: str, what: str) -> LLMRequest:
    return LLMRequest(
        messages=(("user", Template(prompt).substitute(kind=kind, text=text, instructions=instructions)),),
        prompt_hash=prompt_hash,
        stage=STAGE,
        context=what,
    )


def translate_segments(
    table: pd.DataFrame, prompts: TranslatePrompts, client: LLMClient, params: TranslateParams
) -> pd.DataFrame:
    """English and back-translated Persian of every segment, its chrF and whether it is flagged.

    Entities go first: a context's glossary holds its entities' English, so the context asks for them."""
    english: dict[str, str] = {}
    request_ids: dict[str, list[str]] = {}
    for kinds in (("entity",), ("question", "context")):
        batch = table[table["kind"].isin(kinds)]
        requests = []
        for row in batch.itertuples():
            glossary = "\n".join(f"{fa} → {english[fa]}" for fa in row.glossary)
            instructions = Template(KIND_INSTRUCTIONS[row.kind]).safe_substitute(glossary=glossary)
            requests.append(
                _request(row.kind, row.text_fa, instructions, prompts.forward, prompts.sha256, f"{row.segment_id}")
            )
        for row, answer in zip(batch.itertuples(), client.complete_many(requests), strict=True):
            english[row.text_fa] = " ".join(answer.text.split())
            request_ids[row.segment_id] = [answer.request_id]
    back_requests = [
        _request("text", english[text], "", prompts.back, prompts.sha256, f"back {segment}")
        for segment, text in zip(table["segment_id"], table["text_fa"], strict=True)
    ]
    chrf = CHRF()
    rows = []
    for row, answer in zip(table.itertuples(), client.complete_many(back_requests), strict=True):
        back = normalize_fa(answer.text)
        score = chrf.sentence_score(back, [row.text_fa]).score
        rows.append(
            {
                "segment_id": row.segment_id,
                "kind": row.kind,
                "text_fa": row.text_fa,
                "text_en": english[row.text_fa],
                "back_fa": back,
                "chrf": score,
                "flagged": score < params.min_chrf,
                "request_ids": [*request_ids[row.segment_id], answer.request_id],
            }
        )
    return pd.DataFrame(rows, columns=SEGMENT.names)


def _contains(context: str, option: str) -> bool:
    core = _ARTICLE.sub("", option.strip()).lower()
    return bool(core) and core in context.lower()


def english_examples(
    examples: pd.DataFrame, translated: pd.DataFrame, unknown_phrases: pd.DataFrame, params: TranslateParams
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """English examples aligned with the Persian ones, and those dropped with their reason.

    An example is dropped when an entity option's English does not occur in the English context
    (``option_not_in_context``), or, unless ``keep_flagged``, when one of its segments is flagged."""
    english = dict(zip(translated["text_fa"], translated["text_en"], strict=True))
    flagged = set(translated.loc[translated["flagged"], "text_fa"])
    ids = dict(zip(translated["text_fa"], translated["request_ids"], strict=True))
    unknown = dict(zip(unknown_phrases["phrase_fa"], unknown_phrases["phrase_en"], strict=True))
    rows, reasons = [], []
    for row in examples.to_dict(orient="records"):
        context = english[row["context"]]
        options = {}
        for i in range(3):
            role = row["answer_info"][f"ans{i}"]
            options[f"ans{i}"] = unknown[row[f"ans{i}"]] if role == "unknown" else english[row[f"ans{i}"]]
        entity_options = [options[f"ans{i}"] for i in range(3) if row["answer_info"][f"ans{i}"] != "unknown"]
        segments_fa = [row["context"], row["question"], row["stereo_entity"], row["nonstereo_entity"]]
        reason = ""
        if not all(_contains(context, option) for option in entity_options):
            reason = "option_not_in_context"
        elif not params.keep_flagged and flagged.intersection(segments_fa):
            reason = "flagged_translation"
        rows.append(
            row
            | options
            | {
                "example_id": f"{row['example_id']}-en",
                "context": context,
                "question": english[row["question"]],
                "stereo_entity": english[row["stereo_entity"]],
                "nonstereo_entity": english[row["nonstereo_entity"]],
                "lang": "en",
                "source_example_id": row["example_id"],
                "llm_request_ids": sorted({*row["llm_request_ids"], *(r for s in segments_fa for r in ids[s])}),
            }
        )
        reasons.append(reason)
    frame = pd.DataFrame(rows, columns=EXAMPLE.names)
    reason_series = pd.Series(reasons, index=frame.index)
    kept = frame[reason_series == ""].reset_index(drop=True)
    dropped = frame[reason_series != ""].assign(reason=reason_series[reason_series != ""])
    return kept, dropped


def translate(
    examples: pd.DataFrame,
    unknown_phrases: pd.DataFrame,
    prompts: TranslatePrompts,
    client: LLMClient,
    params: TranslateParams,
) -> StageOutput:
    """The English config of the Persian original examples, with the segment table and what was dropped."""
    originals = examples[(examples["lang"] == "fa") & (examples["variant"] == "original")]
    phrasings = {
        text
        for i in range(3)
        for text, info in zip(originals[f"ans{i}"], originals["answer_info"], strict=True)
        if info[f"ans{i}"] == "unknown"
    }
    unmapped = sorted(phrasings - set(unknown_phrases["phrase_fa"]))
    if unmapped:
        raise ValueError(f"'unknown' phrasing(s) with no English in the phrase list: {unmapped}")
    translated = translate_segments(segments(originals), prompts, client, params)
    kept, dropped = english_examples(originals, translated, unknown_phrases, params)
    review = translated[translated["flagged"]]
    report = {
        "stage": STAGE,
        "parameters": asdict(params),
        "prompt_sha256": prompts.sha256,
        "counts": {"in": len(originals), "out": len(kept), "segments": len(translated), "flagged": len(review)},
        "segments_by_kind": {str(k): int(v) for k, v in sorted(translated["kind"].value_counts().items())},
        "dropped": {"total": len(dropped), "by_reason": count_reasons(dropped["reason"])},
        "drops": [
            {"example_id": e, "reason": r} for e, r in zip(dropped["example_id"], dropped["reason"], strict=True)
        ],
        "flagged_segments": review[["segment_id", "kind", "chrf"]].to_dict(orient="records"),
        "llm": client.usage(STAGE).as_dict(),
    }
    return StageOutput(
        tables={"examples": kept, "segments": translated, "review": review, "dropped": dropped},
        schemas={"examples": EXAMPLE, "segments": SEGMENT, "review": SEGMENT, "dropped": EXAMPLE_DROPPED},
        report=report,
        csv=("review",),
    )


def translate_stage(
    examples: pd.DataFrame,
    unknown_phrases: pd.DataFrame,
    prompts: TranslatePrompts,
    llm: LLMConfig,
    transcript: Path | None,
    params: TranslateParams,
) -> StageOutput:
    """The stage as the flow runs it: opens the LLM client from configuration, then :func:`translate`."""
    return translate(examples, unknown_phrases, prompts, open_llm(llm, transcript), params)


translate_task = stage_task(translate_stage)
