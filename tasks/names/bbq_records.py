"""BBQ's own records as name-proxy input (``pbbq names``, Obscured but Not Erased §4.1.1): BBQ JSONL read and
checked, turned into the example table the names stage reads (roles from ``answer_info`` and the stereotyped
groups), and the stage's variants turned back into BBQ records. Only the CLI uses it; the build does not."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.artifacts import count_reasons
from ..core.inputs import InputError
from ..core.schemas import EXAMPLE, OPTIONS
from .prepare import TEXT_FIELDS

BBQ_KEYS = (
    "example_id",
    "question_index",
    "question_polarity",
    "context_condition",
    "category",
    "answer_info",
    "additional_metadata",
    *TEXT_FIELDS,
    "label",
)


def read_bbq_jsonl(path: Path) -> list[dict[str, Any]]:
    """BBQ records, one JSON object a line; a line that is not one names its number."""
    if not path.is_file():
        raise InputError(path, None, "file not found")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, number, f"not a JSON object ({exc.msg})") from None
        missing = [key for key in BBQ_KEYS if key not in record]
        if missing:
            raise InputError(path, number, f"missing key(s) {', '.join(missing)}")
        records.append(record)
    return records


def _bbq_assignment(record: Mapping[str, Any], target: int) -> str:
    """BBQ's disambiguated examples as PBBQ's assignments: biased when the stereotyped entity answers the negative
    question (or the other one the non-negative)."""
    if record["context_condition"] != "disambig":
        return "none"
    stereotyped_answers = (record["label"] == target) == (record["question_polarity"] == "neg")
    return "biased" if stereotyped_answers else "counter_biased"


def bbq_examples(records: Sequence[Mapping[str, Any]], lang: str) -> tuple[pd.DataFrame, list[dict[str, str]]]:
    """BBQ records as example rows: the answer labeled 'unknown' keeps that role, the one whose label is among
    the record's ``stereotyped_groups`` is stereotyped, the other non-stereotyped (``answer_roles``). As in every
    example row, ``answer_info`` holds each option's text and its group tag (here BBQ's label of the entity,
    'British'; ``unknown``), and ``additional_metadata`` BBQ's own. A record without exactly one stereotyped
    answer is returned as rejected (it has no roles to carry over)."""
    rows, rejected = [], []
    for record in records:
        info = record["answer_info"]
        metadata = record["additional_metadata"]
        stereotyped = set(metadata.get("stereotyped_groups") or [])
        entity_options = [f"ans{i}" for i in range(3) if info[f"ans{i}"][1] != "unknown"]
        marked = [option for option in entity_options if info[option][0] in stereotyped]
        if len(entity_options) != 2 or len(marked) != 1:
            rejected.append({"example_id": str(record["example_id"]), "reason": "no_single_stereotyped_answer"})
            continue
        stereo = marked[0]
        other = next(option for option in entity_options if option != stereo)
        roles = dict.fromkeys(OPTIONS, "unknown") | {stereo: "stereotyped", other: "non-stereotyped"}
        tags = {option: info[option][0] if option in entity_options else "unknown" for option in OPTIONS}
        target = int(stereo[-1])
        first, second = (record["context"].find(info[o][0]) for o in (stereo, other))
        rows.append(
            {
                "example_id": str(record["example_id"]),
                "template_id": f"{record['category']}-{record['question_index']}",
                "stereotype_id": "",
                "category": record["category"],
                "question_index": str(record["question_index"]),
                "question_polarity": record["question_polarity"],
                "context_condition": record["context_condition"],
                **{field: record[field] for field in TEXT_FIELDS},
                "label": int(record["label"]),
                "answer_info": {option: [record[option], tags[option]] for option in OPTIONS},
                "additional_metadata": {
                    "subcategory": str(metadata.get("subcategory", "None")),
                    "stereotyped_groups": sorted(stereotyped),
                    "version": str(metadata.get("version", "None")),
                    "source": str(metadata.get("source", "")),
                },
                "answer_roles": roles,
                "target_loc": target,
                "assignment": _bbq_assignment(record, target),
                "entity_order": "stereo_first" if 0 <= first < second or second < 0 else "nonstereo_first",
                "stereo_entity": info[stereo][0],
                "nonstereo_entity": info[other][0],
                "lexical_variant": "",
                "lang": lang,
                "variant": "original",
                "source_example_id": None,
                "llm_request_ids": [],
            }
        )
    return pd.DataFrame(rows, columns=EXAMPLE.names), rejected


def bbq_variants(records: Sequence[Mapping[str, Any]], variants: pd.DataFrame) -> list[dict[str, Any]]:
    """Each variant as a BBQ record: its source record with the new texts and id, ``variant`` and
    ``source_example_id`` (the source's own id, as BBQ wrote it). BBQ's ``answer_info`` stays as the source has
    it: its first item is not the option text but the entity's label ('British'), which the name stands for and
    by which lm-evaluation-harness's BBQ code finds the stereotyped answer."""
    sources = {str(record["example_id"]): record for record in records}
    out = []
    for row in variants.itertuples():
        source = sources[row.source_example_id]
        record = {**source, **{field: getattr(row, field) for field in TEXT_FIELDS}}
        record.update(example_id=row.example_id, variant=row.variant, source_example_id=source["example_id"])
        out.append(record)
    return out


def with_rejected(
    report: Mapping[str, Any], unmapped: pd.DataFrame, rejected: Sequence[Mapping[str, str]], n_records: int
) -> dict[str, Any]:
    """The stage's report for a BBQ file: the records that had no roles (:func:`bbq_examples`) counted in, and
    every record not covered listed, a mention a line: the stage's ``unmapped`` table (each entity with the
    example's reason and detail), then the rejected records."""
    rows = unmapped[["example_id", "reason", "entities", "detail"]].itertuples(index=False)
    listed = [
        {"example_id": example_id, "reason": reason, "entity": entity, "detail": detail}
        for example_id, reason, entities, detail in rows
        for entity in entities
    ]
    listed += [{**r, "entity": "", "detail": ""} for r in rejected]
    by_example = {d["example_id"]: d["reason"] for d in listed}
    return {
        **report,
        "counts": {**report["counts"], "in": n_records},
        "not_covered": {"total": len(by_example), "by_reason": count_reasons(pd.Series(list(by_example.values())))},
        "not_covered_examples": listed,
        "mentions_by_reason": count_reasons(pd.Series([d["reason"] for d in listed], dtype="object")),
    }
