"""A scripted stand-in for a model, answering the sample build's LLM requests from human-written files.

It is the answer function of the fake OpenAI server (``tests/fakes/llm_servers.py``) when the sample's
transcript is recorded (``prompts/transcripts/record_sample.py``) and in the tests that run the build in live
mode. It answers

- a disambiguation request with the ``stand_ins/disambiguations.csv`` answer for its template, assignment
  and attempt (the number of user messages so far);
- a translation request with English composed from ``translations.csv`` (the template's English) and
  ``phrases.csv`` (its entities and lexical variants), in the same order of mention as the Persian;
- a back-translation request with the Persian it came from, except for ``poor_back_translations``
  contexts, which get an unrelated sentence so that the review path is exercised (two contexts of AGE-01-T1).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.artifacts import REPO_ROOT
from tasks.disambiguate import ASSIGNMENTS
from tasks.instantiate import InstantiateParams, instantiate
from tasks.persian_text import normalize_fa

STAND_INS = REPO_ROOT / "prompts" / "transcripts" / "stand_ins"
POOR_BACK_TRANSLATION = "متن ترجمه شده با متن اصلی هیچ ربطی ندارد."
_ARTICLE = re.compile(r"\b([Aa]) (?=[aeiouAEIOU])")
_NEGATIVE = re.compile(r"شخصیت (\{\w+\}) باید")


def _rows(folder: Path, name: str) -> list[dict[str, str]]:
    with (folder / name).open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _fill(text: str, stereo: str, nonstereo: str, lex: str) -> str:
    filled = text.replace("{stereo}", stereo).replace("{nonstereo}", nonstereo).replace("{lex}", lex)
    return _ARTICLE.sub(lambda m: f"{m.group(1)}n ", filled)


def _swap(text: str) -> str:
    return re.sub(r"\{(stereo|nonstereo)\}", lambda m: "{nonstereo}" if m.group(1) == "stereo" else "{stereo}", text)


def _last_answers(disambiguations: dict[tuple[str, str, int], str]) -> dict[tuple[str, str], str]:
    last: dict[tuple[str, str], tuple[int, str]] = {}
    for (template_id, assignment, attempt), answer in disambiguations.items():
        if attempt >= last.get((template_id, assignment), (0, ""))[0]:
            last[(template_id, assignment)] = (attempt, answer)
    return {key: answer for key, (_, answer) in last.items()}


class StandInModel:
    """Answers the sample build's requests (see the module docstring); call it with a request body."""

    def __init__(
        self,
        templates: pd.DataFrame,
        questionnaire: pd.DataFrame,
        overrides: pd.DataFrame,
        unknown_phrases: tuple[str, ...],
        *,
        folder: Path = STAND_INS,
        poor_back_translations: tuple[str, int] = ("AGE-01-T1", 2),
    ) -> None:
        self.templates = templates.set_index("template_id")
        self.disambiguations = {
            (r["template_id"], r["assignment"], int(r["attempt"])): r["answer"]
            for r in _rows(folder, "disambiguations.csv")
        }
        self.english = {r["template_id"]: r for r in _rows(folder, "translations.csv")}
        self.phrases = {normalize_fa(r["fa"]): r["en"] for r in _rows(folder, "phrases.csv")}
        self.contexts: dict[str, list[str]] = {}
        self.translations = self._compose(templates, questionnaire, overrides, unknown_phrases)
        self.back = {}
        for persian, english in sorted(self.translations.items()):
            self.back.setdefault(english, persian)
        template_id, count = poor_back_translations
        for persian in sorted(set(self.contexts.get(template_id, [])))[:count]:
            self.back[self.translations[persian]] = POOR_BACK_TRANSLATION

    def _compose(
        self,
        templates: pd.DataFrame,
        questionnaire: pd.DataFrame,
        overrides: pd.DataFrame,
        unknown_phrases: tuple[str, ...],
    ) -> dict[str, str]:
        """The English of every Persian segment that the examples of any template can hold."""
        final = _last_answers(self.disambiguations) | {
            (r.template_id, r.assignment): r.text for r in overrides.itertuples()
        }
        filled = templates.merge(questionnaire[["stereotype_id", "category"]], on="stereotype_id")
        for assignment in ASSIGNMENTS:
            column = f"disambiguated_{assignment}_fa"
            filled[column] = [
                text or normalize_fa(final.get((t, assignment), ""))
                for t, text in zip(filled["template_id"], filled[column], strict=True)
            ]
        examples = instantiate(filled, InstantiateParams(unknown_phrases))["examples"]
        translations: dict[str, str] = {}
        for row in examples.itertuples():
            english = self.english[row.template_id]
            written = self.templates.loc[row.template_id, "ambiguous_fa"]
            ambiguous = english["ambiguous_en"]
            if (row.entity_order == "stereo_first") != (written.index("{stereo}") < written.index("{nonstereo}")):
                ambiguous = _swap(ambiguous)
            fillers = (self.phrases[row.stereo_entity], self.phrases[row.nonstereo_entity])
            lex = self.phrases[row.lexical_variant] if row.lexical_variant else ""
            context = _fill(ambiguous, *fillers, lex)
            if row.context_condition == "disambig":
                context += " " + _fill(english[f"disambiguated_{row.assignment}_en"], *fillers, lex)
            polarity = "negative" if row.question_polarity == "neg" else "nonnegative"
            translations[row.context] = context
            self.contexts.setdefault(row.template_id, []).append(row.context)
            translations[row.question] = english[f"question_{polarity}_en"]
            translations[row.stereo_entity] = fillers[0]
            translations[row.nonstereo_entity] = fillers[1]
        return translations

    def __call__(self, body: dict[str, Any]) -> str:
        messages = [m["content"] for m in body["messages"] if m["role"] == "user"]
        first = messages[0]
        if first.startswith("Translate the Persian"):
            return self.translations[normalize_fa(first.rsplit(":\n", 1)[1].strip())]
        if first.startswith("Translate the English"):
            return self.back[first.rsplit(":\n", 1)[1].strip()]
        match = _NEGATIVE.search(first)
        if match is None:
            raise KeyError(f"the stand-in model has no answer for: {first[:200]}")
        assignment = next(a for a, (negative, _) in ASSIGNMENTS.items() if negative == match.group(1))
        text = normalize_fa(first)
        for template_id, template in self.templates.iterrows():
            if template.ambiguous_fa in text:
                return self.disambiguations[(template_id, assignment, len(messages))]
        raise KeyError(f"the stand-in model knows no template in: {first[:200]}")
