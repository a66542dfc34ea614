"""Small name tables and examples for the names stage's tests."""

from __future__ import annotations

import pandas as pd

from pbbq.tasks.core.schemas import EXAMPLE
from pbbq.tasks.names.tables import ERAS, NAME_COLUMNS

UNKNOWN = "نمی‌توان تشخیص داد"
"""The 'unknown' option of :func:`name_example`."""


def pin_table() -> pd.DataFrame:
    """Two groups (ترک with the alias آذری, and فارس), two names per gender and era: 'ت-m-pre1970-1'."""
    rows = [
        ("fa", group, aliases, gender, era, f"{group[0]}-{gender[0]}-{era}-{k}", "x", "")
        for group, aliases in (("ترک", "آذری"), ("فارس", ""))
        for gender in ("female", "male")
        for era in ERAS
        for k in range(2)
    ]
    return pd.DataFrame(rows, columns=NAME_COLUMNS)


def name_example(example_id: str, stereo: str, nonstereo: str, context: str | None = None) -> dict:
    """An example of template ``<example_id up to its last '-'>``, no lexical variant."""
    return {
        "example_id": example_id,
        "template_id": example_id.rsplit("-", 1)[0],
        "lexical_variant": "",
        "category": "Ethnicity",
        "lang": "fa",
        "stereo_entity": stereo,
        "nonstereo_entity": nonstereo,
        "context": context or f"یک {stereo} و یک {nonstereo} آمدند.",
        "question": "چه کسی آمد؟",
        "ans0": stereo,
        "ans1": UNKNOWN,
        "ans2": nonstereo,
        "label": 1,
        "answer_info": {"ans0": [stereo, "ترک‌ها"], "ans1": [UNKNOWN, "unknown"], "ans2": [nonstereo, "فارس‌ها"]},
        "answer_roles": {"ans0": "stereotyped", "ans1": "unknown", "ans2": "non-stereotyped"},
        "llm_request_ids": [],
    }


def example_frame(*examples: dict) -> pd.DataFrame:
    return pd.DataFrame(list(examples)).reindex(columns=EXAMPLE.names)
