"""A scripted stand-in for a model translating the adaptation sample's English instances into Urdu (PakBBQ §3.3),
from human-written files (``prompts/transcripts/stand_ins/adapt/``; its README says how they are written).

Called with a request body (OpenAI chat messages, as the fake server passes them), it answers

- a translation request (English inside ``<english_text>``): a context or a question is matched against the
  adapted templates' English (every template the sample sheet builds: DT, TM, NA), with their slots ``{{NAME1}}``,
  ``{{NAME2}}``, ``{{WORD1}}`` as captures and BBQ's 'a' → 'an' allowed; its Urdu is the template's
  ``translations.ur.csv`` text with the slots filled (:func:`fill_urdu`), a question's ``NAMES`` slots in the
  feminine when its request says both people are women (:data:`pbbq.tasks.translate.requests.AGREEMENT_INSTRUCTIONS`).
  Any other segment (an entity phrase,
  with or without BBQ's article, a group name, a lexical variant as ``WORD1: house`` or bare, an 'unknown'
  phrasing) is looked up in ``phrases.ur.csv``. A follow-up (retry) gets the same answer;
- a back-translation request (Urdu inside ``<urdu_text>``) with the English it was answered for. Two English
  phrases may have one Urdu (the entity phrases "Hindu one" and "Hindu person" are both «ہندو شخص»): the first
  of them in alphabetical order is given back, whatever order the concurrent requests came in.

:func:`sample_examples` builds the sample's English examples with the adaptation stages' own functions, and
:func:`distinct_segments` lists what a translation of them asks for.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pandas as pd

from pbbq.tasks.adapt import adapt, adapt_instantiate
from pbbq.tasks.adapt.bbq_format import load_bbq_vocabulary
from pbbq.tasks.adapt.generate import AdaptInstantiateParams, fill
from pbbq.tasks.adapt.sheet import apply_classes, load_reviewed_sheet
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.inputs import load_ratings
from pbbq.tasks.core.schemas import OPTIONS
from pbbq.tasks.kappa_gate import GateParams
from pbbq.tasks.text.languages import language
from pbbq.tasks.translate.requests import AGREEMENT_INSTRUCTIONS
from tests.adapt_support import SAMPLE_RATINGS as RATINGS
from tests.adapt_support import SAMPLE_SHEET as SHEET
from tests.adapt_support import SAMPLE_VOCABULARY as VOCABULARY
from tests.fakes.stand_in_model import _tagged

STAND_INS = REPO_ROOT / "prompts" / "transcripts" / "stand_ins" / "adapt"
URDU_FIELDS = {
    field: f"{field}_ur" for field in ("ambiguous", "disambiguating", "question_negative", "question_non_negative")
}
"""A template's English field → its column in ``translations.ur.csv`` (the field's name with ``_ur``)."""
PERSONS = ("NAME1", "NAME2")
_SLOT = re.compile(r"\{\{(NAME[12]|WORD[12])\}\}")
_URDU_SLOT = re.compile(r"\{(NAME[12]|NAMES|WORD[12])(?::([^{}|]*)\|([^{}|]*))?\}")
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_LEXICAL = re.compile(r"^WORD[12]:\s*(.+)$")


def sample_examples(*, gated: bool = True) -> pd.DataFrame:
    """The sample's English examples (``05_instantiate``): of the templates through the annotation gate, or with
    ``gated=False`` of every template the sheet builds (the gate's two stopped ones too)."""
    sheet = load_reviewed_sheet(SHEET)
    if gated:
        templates = adapt(sheet, load_ratings(RATINGS, sheet["template_id"]), GateParams())["gated"]
    else:
        templates = apply_classes(sheet)[0]
    vocabulary = load_bbq_vocabulary(VOCABULARY)
    return adapt_instantiate(templates, vocabulary, AdaptInstantiateParams())["examples"]


def bare(option: str) -> str:
    """An English option without BBQ's article: the entity phrase ("The Afghan friend" → "Afghan friend")."""
    return _ARTICLE.sub("", option.strip())


def distinct_segments(examples: pd.DataFrame) -> pd.DataFrame:
    """``kind, en``: every distinct segment a translation of the examples asks for, sorted: ``entity`` (an entity
    option without its article), ``group`` (a group an option is tagged with, which fills a ``NAME`` slot),
    ``lex`` (a lexical variant's word), ``unknown`` (an 'unknown' phrasing), ``question`` and ``context``."""
    rows: list[tuple[str, str]] = []
    for row in examples.to_dict(orient="records"):
        for option in OPTIONS:
            unknown = row["answer_roles"][option] == "unknown"
            rows.append(("unknown", row[option]) if unknown else ("entity", bare(row[option])))
        rows += [("group", row["stereo_entity"]), ("group", row["nonstereo_entity"])]
        rows += [("lex", word) for word in lexical_words(row["lexical_variant"])]
        rows += [("question", row["question"]), ("context", row["context"])]
    return pd.DataFrame(sorted(set(rows)), columns=["kind", "en"])


def lexical_words(variant: str) -> list[str]:
    """The words of a lexical variant as the examples write it (``WORD1: house; WORD2: …``)."""
    return [match.group(1).strip() for part in variant.split(";") if (match := _LEXICAL.match(part.strip()))]


def fill_urdu(text: str, fillers: dict[str, str], feminine: dict[str, bool]) -> str:
    """An Urdu template text with its slots filled: ``{NAME1}``, ``{WORD1}``, … by the slot's Urdu (``fillers``);
    an agreement slot ``{SLOT:masculine|feminine}`` by the form ``feminine[SLOT]`` asks for (``NAME1``, ``NAME2``:
    that person; ``NAMES``: both; ``WORD1``: the word's grammatical gender). A slot it has no value for is a
    KeyError."""

    def slot(match: re.Match[str]) -> str:
        name, masculine, feminine_form = match.groups()
        if masculine is None:
            return fillers[name]
        return feminine_form if feminine[name] else masculine

    return _URDU_SLOT.sub(slot, text)


def _literal(text: str) -> str:
    """A template's literal text as a pattern, 'a' also matching BBQ's 'an' (its ``do_slotting`` writes 'an'
    before a filled group that starts with a vowel)."""
    pieces = re.split(r"(?<!\w)([aA])(?= )", text)
    return "".join(re.escape(piece) if index % 2 == 0 else piece + "n?" for index, piece in enumerate(pieces))


def template_pattern(*texts: str) -> re.Pattern[str]:
    """The English of template texts joined by a space as a pattern: each slot a capture, its later mentions the
    same text."""
    text = " ".join(" ".join(part.split()) for part in texts)
    pattern, seen, position = [], set(), 0
    for match in _SLOT.finditer(text):
        slot = match.group(1)
        pattern += [_literal(text[position : match.start()]), f"(?P={slot})" if slot in seen else f"(?P<{slot}>.+?)"]
        seen.add(slot)
        position = match.end()
    return re.compile("".join([*pattern, _literal(text[position:])]))


def _rows(folder: Path, name: str) -> list[dict[str, str]]:
    with (folder / name).open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


class StandInAdapt:
    """Answers the adaptation sample's English → Urdu translation and Urdu → English back-translation requests (see
    the module docstring); call it with a request body."""

    def __init__(self, folder: Path = STAND_INS) -> None:
        self.templates = apply_classes(load_reviewed_sheet(SHEET))[0].set_index("template_id")
        self.urdu = {row["template_id"]: row for row in _rows(folder, "translations.ur.csv")}
        missing = sorted(set(self.templates.index) - set(self.urdu))
        if missing:
            raise ValueError(f"translations.ur.csv has no Urdu for the adapted templates {missing}")
        self.phrases: dict[str, str] = {}
        self.lexical_gender: dict[str, str] = {}
        for row in _rows(folder, "phrases.ur.csv"):
            if self.phrases.setdefault(row["en"], row["ur"]) != row["ur"]:
                raise ValueError(f"phrases.ur.csv gives {row['en']!r} two Urdu texts")
            if row["kind"] == "lex":
                self.lexical_gender[row["en"]] = row["gender"]
        self.patterns = [
            (template_id, fields, template_pattern(*(template[field] for field in fields)))
            for template_id, template in self.templates.iterrows()
            for fields in (
                ("ambiguous",),
                ("ambiguous", "disambiguating"),
                ("question_negative",),
                ("question_non_negative",),
            )
        ]
        self.answered: dict[str, str] = {}
        """Every Urdu answer → the English it was answered for (the first in alphabetical order, when two English
        share one Urdu)."""

    def translate(self, english: str, women: bool = False) -> str:
        """The Urdu of one English segment (``women``: a question about two women); a KeyError names a segment no
        template or phrase gives."""
        english = " ".join(english.split())
        urdu = self._composed(english, women) or self._phrase(english)
        if urdu is None:
            raise KeyError(f"the adaptation stand-in has no Urdu for: {english[:200]!r}")
        self.answered[urdu] = min(english, self.answered.get(urdu, english))
        return urdu

    def _phrase(self, english: str) -> str | None:
        words = lexical_words(english)
        if words:
            return " ".join(self.phrases[word] for word in words)
        return self.phrases.get(english) or self.phrases.get(bare(english))

    def _composed(self, english: str, women: bool) -> str | None:
        for template_id, fields, pattern in self.patterns:
            match = pattern.fullmatch(english)
            if match:
                slots = match.groupdict()
                text = " ".join(self.urdu[template_id][URDU_FIELDS[field]] for field in fields)
                return fill_urdu(
                    text,
                    {slot: self.phrases[value] for slot, value in slots.items()},
                    self._feminine(template_id, slots) | ({"NAMES": women} if fields[0].startswith("question") else {}),
                )
        return None

    def _feminine(self, template_id: str, slots: dict[str, str]) -> dict[str, bool]:
        """Which agreement slots take the feminine: a person whose English entity phrase (the answer naming that
        slot, filled) is female (English's ``entity_gender``; the masculine is Urdu's form for anyone
        else), both persons for ``NAMES``, a lexical word whose Urdu is feminine."""
        template = self.templates.loc[template_id]
        names = (slots.get("NAME1", ""), slots.get("NAME2", ""))
        words = {slot: value for slot, value in slots.items() if slot.startswith("WORD")}
        feminine: dict[str, bool] = {}
        for answer in (template.answer_negative, template.answer_non_negative):
            [person] = [slot for slot in PERSONS if "{{" + slot + "}}" in answer]
            phrase = bare(fill(answer, *names, words))
            feminine[person] = language("en").entity_gender(phrase) == "female"
        feminine["NAMES"] = all(feminine[person] for person in PERSONS)
        feminine.update({slot: self.lexical_gender[value] == "f" for slot, value in words.items()})
        return feminine

    def __call__(self, body: dict[str, Any]) -> str:
        users = [message["content"] for message in body["messages"] if message["role"] == "user"]
        english = _tagged("english_text", users[0])
        if english is not None:
            system = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
            return self.translate(english, AGREEMENT_INSTRUCTIONS["feminine"] in system)
        urdu = _tagged("urdu_text", users[0])
        if urdu is None:
            raise KeyError(f"the adaptation stand-in has no answer for: {users[0][:200]}")
        return self.answered[" ".join(urdu.split())]
