"""The group glossary: one fixed name in each target language for each Persian term that names a group, so a group
reads the same in every example of that language.

An LLM left alone renders 'مرد ترک' (an Iranian Azerbaijani) as "Turkish man", a wrong nationality, while 'زن
آذری', the same group, becomes "Azeri woman": one group, two names. ``annotations/glossary.csv`` fixes the
rendering of every group term that the entities and lexical variants use (ethnicities, cities and their
adjectives, nationalities, political camps, religions, sexual orientations, institutions whose name matters), one
column per target language (``term_en``, ``term_ur``: the language's ``glossary_column``); an English source (the
adaptation path's BBQ groups) has its own file, ``term_en`` and its targets' columns (:func:`load_english_glossary`),
its terms found as whole words in any case; the translation stage
gives the model the entries of each segment and requires their renderings in its translation
(:mod:`pbbq.tasks.translate`).

A term occurs in a phrase as whole words (a Persian plural '‌ها'/'‌های' attached to its last word counts), so
'ترک' is found in 'مرد ترک' but not in 'ترکمن' or 'ترکیه‌ای'. An English rendering occurs in a text as whole
words, case-insensitively, optionally with a plural ``s``; an Urdu rendering at the start of a word, whatever
ending follows (آذربائیجانی, آذربائیجانیوں: Urdu inflects its nouns and adjectives by suffix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import pandas as pd

from ..core.inputs import InputError, read_csv_checked, require_filled, require_none, spreadsheet_row
from ..text.languages import LANGUAGES, Language, language
from ..text.languages.fa import ZWNJ, normalize_fa

SOURCE = language("fa")
"""The language translated from: the templates' and the examples' (PBBQ is built in Persian)."""
TARGET = language("en")
"""The first target language: the glossary's required column, and the translation the default build makes."""
GLOSSARY_COLUMNS = [SOURCE.glossary_column, TARGET.glossary_column, "note"]


def other_targets() -> tuple[Language, ...]:
    """The languages whose glossary column is optional (``term_ur``): filled in every row when present; asked at
    load, since a build may add languages (``[languages] modules``)."""
    return tuple(lang for lang in LANGUAGES.values() if lang not in (SOURCE, TARGET))


_NOT_PERSIAN_TERM = re.compile(rf"[^\u0600-\u06ff{ZWNJ} ]")
_PLURALS = (f"{ZWNJ}ها", f"{ZWNJ}های")


def load_glossary(path: Path, templates: pd.DataFrame | None = None) -> pd.DataFrame:
    """``term_fa, term_en, note`` and any other target's column (``term_ur``): one row per Persian group term,
    normalised (each column by its language), sorted as in the file.

    Every term and rendering is filled; a term is Persian words only and appears once; an English rendering has no
    Persian letter; two spellings of one rendering that differ only in case are an error (one group, one name).
    Given the loaded ``templates``, two terms that a template sets against each other may not share a rendering
    (:func:`check_opposed_terms`).
    """
    raw = read_csv_checked(path, GLOSSARY_COLUMNS)
    others = [lang for lang in other_targets() if lang.glossary_column in raw.columns]
    frame = raw[[*GLOSSARY_COLUMNS, *(lang.glossary_column for lang in others)]]
    if frame.empty:
        raise InputError(path, None, "no glossary entries")
    frame["term_fa"] = frame["term_fa"].map(normalize_fa)  # first: a cell of bidi marks alone is empty
    for lang in others:
        frame[lang.glossary_column] = frame[lang.glossary_column].map(lang.normalize)
    require_filled(frame, ["term_fa", "term_en", *(lang.glossary_column for lang in others)], path)
    require_none(
        path,
        frame["term_fa"].str.contains(_NOT_PERSIAN_TERM),
        lambda i: f"term_fa {frame.at[i, 'term_fa']!r} has characters other than Persian letters and spaces",
    )
    duplicated = frame["term_fa"].duplicated()
    require_none(
        path,
        duplicated,
        lambda i: (
            f"term_fa {frame.at[i, 'term_fa']!r} appears twice (first in row "
            f"{int(frame.index[frame['term_fa'] == frame.at[i, 'term_fa']][0]) + 2})"
        ),
    )
    require_none(
        path,
        frame["term_en"].str.contains(SOURCE.script),
        lambda i: f"term_en {frame.at[i, 'term_en']!r} of {frame.at[i, 'term_fa']!r} has Persian letters",
    )
    first_spelling = frame.groupby(frame["term_en"].str.lower())["term_en"].transform("first")
    require_none(
        path,
        first_spelling != frame["term_en"],
        lambda i: (
            f"term_en {frame.at[i, 'term_en']!r} is spelled {first_spelling[i]!r} in an earlier row: "
            "one group, one English name"
        ),
    )
    frame = frame.reset_index(drop=True)
    if templates is not None:
        check_opposed_terms(frame, path, templates)
    return frame


def load_english_glossary(path: Path) -> pd.DataFrame:
    """``term_en, note`` and each target's column (``term_ur``): the glossary of an English source (the adaptation
    path's BBQ groups), one row per English group term, sorted as in the file. Every cell of a term or rendering is
    filled, and a term appears once, whatever its case."""
    raw = read_csv_checked(path, [TARGET.glossary_column, "note"])
    targets = [lang for lang in other_targets() if lang.glossary_column in raw.columns]
    frame = raw[[TARGET.glossary_column, "note", *(lang.glossary_column for lang in targets)]]
    if frame.empty:
        raise InputError(path, None, "no glossary entries")
    for lang in targets:
        frame[lang.glossary_column] = frame[lang.glossary_column].map(lang.normalize)
    require_filled(frame, [TARGET.glossary_column, *(lang.glossary_column for lang in targets)], path)
    terms = frame[TARGET.glossary_column].str.lower()
    require_none(path, terms.duplicated(), lambda i: f"term_en {frame.at[i, 'term_en']!r} appears twice")
    return frame.reset_index(drop=True)


def check_opposed_terms(glossary: pd.DataFrame, path: Path, templates: pd.DataFrame) -> None:
    """Refuse two Persian terms with one English name when a template's stereotyped entity holds one and its
    non-stereotyped entity the other (PBBQ §3.3: the two answer options are different groups): the translated
    example would name both entities alike. Two terms of one group (``ترک`` and ``آذری``) may share a name as long
    as no template opposes them."""
    lookup = Glossary(glossary)
    rows = {fa: spreadsheet_row(index) for index, fa in glossary["term_fa"].items()}
    for template in templates.itertuples():
        stereo = [(fa, en, e) for e in template.stereo_entities for fa, en in lookup.terms_in(e)]
        nonstereo = [(fa, en, e) for e in template.nonstereo_entities for fa, en in lookup.terms_in(e)]
        for fa, en, entity in stereo:
            for other, other_en, other_entity in nonstereo:
                if fa != other and en == other_en:
                    first, second = sorted((fa, other), key=rows.__getitem__)
                    raise InputError(
                        path,
                        rows[second],
                        f"term_en {en!r} of {second!r} is also that of {first!r} (row {rows[first]}), and template "
                        f"{template.template_id} sets {entity!r} against {other_entity!r}: its English would name "
                        "both entities alike",
                    )


def _words(phrase: str) -> list[str]:
    return normalize_fa(phrase).split()


@dataclass(frozen=True)
class Glossary:
    """Lookup over a loaded glossary table (:func:`load_glossary`, :func:`load_english_glossary`): each term of the
    ``source`` language's column (``term_fa``, ``term_en``) and its rendering in ``target``."""

    table: pd.DataFrame
    target: Language = TARGET
    source: Language = SOURCE

    @cached_property
    def _terms(self) -> list[tuple[tuple[str, ...], str, str]]:
        """(term words, term, its rendering), longest terms first so a longer term is listed before its parts."""
        for lang in (self.source, self.target):
            if lang.glossary_column not in self.table.columns:
                raise ValueError(f"the glossary has no column {lang.glossary_column} ({lang.name} names)")
        terms = [
            (tuple(_words(term)), term, rendering)
            for term, rendering in zip(
                self.table[self.source.glossary_column], self.table[self.target.glossary_column], strict=True
            )
        ]
        return sorted(terms, key=lambda term: (-len(term[0]), term[1]))

    @cached_property
    def _by_first_word(self) -> dict[str, list[int]]:
        """The index in :attr:`_terms` of every term by the word it starts with (a one-word term also by its
        plural forms), so a phrase is looked up word by word, not term by term."""
        index: dict[str, list[int]] = {}
        for number, (term, _, _) in enumerate(self._terms):
            forms = [term[0], *(term[0] + plural for plural in _PLURALS)] if len(term) == 1 else [term[0]]
            for form in forms:
                index.setdefault(form, []).append(number)
        return index

    def terms_in(self, phrase: str) -> list[tuple[str, str]]:
        """(term, rendering) of every glossary term in a phrase of the source language, in the order of the
        glossary's longest-first listing. A Persian term's last word may carry a plural suffix; an English term is
        found as :func:`rendered` finds a rendering (whole words, any case, a plural ``s``)."""
        if self.source != SOURCE:
            return [(term, rendering) for _, term, rendering in self._terms if rendered(phrase, term, self.source)]
        words = _words(phrase)
        found: set[int] = set()
        for start, word in enumerate(words):
            for number in self._by_first_word.get(word, ()):
                term = self._terms[number][0]
                window = words[start : start + len(term)]
                if len(window) == len(term) and window[:-1] == list(term[:-1]) and _same_word(window[-1], term[-1]):
                    found.add(number)
        return [(self._terms[number][1], self._terms[number][2]) for number in sorted(found)]


def _same_word(word: str, term_word: str) -> bool:
    """A text's word is a term's word, or its plural."""
    return word == term_word or any(word == term_word + plural for plural in _PLURALS)


def rendered(text: str, term: str, target: Language = TARGET) -> bool:
    """Whether a translation holds a glossary rendering: in English as whole words (case-insensitive, plural ``s``
    too); in a language written without case (Urdu) or one that adds endings (Turkish, ``Language.suffixing``) at
    the start of a word, whatever ending its inflection adds."""
    return _rendering(term, target.cased and not target.suffixing).search(text) is not None


@cache
def _rendering(term: str, cased: bool) -> re.Pattern[str]:
    """:func:`rendered`'s pattern of a term, compiled once: every segment naming a group looks for its rendering."""
    ending = r"(?:s|es)?(?![\w-])" if cased else ""
    return re.compile(r"(?<![\w-])" + re.escape(term) + ending, flags=re.IGNORECASE)
