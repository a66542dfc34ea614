"""The rules a translation must pass (:func:`translation_failures`, :func:`entity_gender_failures`) and the group
terms a back-translation must keep (:func:`lost_group_terms`), each broken rule a :class:`Failure` with the
sentence that names it to the model in the retry."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from .glossary import Glossary, rendered
from .pair import PERSIAN_ENGLISH, Pair

FAILURES: dict[str, str] = {
    "empty": "The answer is empty.",
    "not_target": "The answer has {source} letters: translate all of it into {target}.",
    "not_target_words": "The answer leaves {source} words untranslated ({words}): translate all of it into {target}.",
    "not_target_text": "The answer reads as {source}, not {target}: translate all of it into {target}.",
    "glossary": 'It does not name {fa} "{term}", as the glossary does.',
    "entity_missing": 'It does not hold the phrase "{phrase}" exactly as given.',
    "entity_gender": "{detail}",
    "pronoun_gender": "{detail}",  # the target language's gender rules (Language.gender_failures): English's
    "singular_they": "{detail}",
    "verb_gender": "{detail}",  # Urdu's
    "group_term_lost": "The back-translation does not name {fa} ({term}).",
}
"""Every rule a translation can break, with the English sentence that names it in the follow-up message (a lost
group term is found in the back-translation, after the last attempt: it names nothing to the model). A text not in
the target language is recorded as ``not_<target name>`` (``not_english``, ``not_urdu``, ``not_turkish``), its
message saying why (:meth:`~pbbq.tasks.translate.pair.Pair.foreign_reason`): the source's letters, its words left
untranslated, or a text that reads as the source."""

_PUNCTUATION = re.compile(r"[^\w\u200c\s]")


class Failure(NamedTuple):
    """A broken rule: its code (a key of :data:`FAILURES`) and the sentence that names it to the model."""

    code: str
    message: str


def _failure(code: str, **details: str) -> Failure:
    return Failure(code, FAILURES[code].format(**details))


def entity_gender_failures(source_text: str, translated: str, pair: Pair = PERSIAN_ENGLISH) -> list[Failure]:
    """A translated entity phrase must give the gender its Persian gives, and none it does not
    ('جوان' is a young person, not a young man): both by their language's ``entity_gender``, the target's form for
    anyone aside (:meth:`~pbbq.tasks.text.languages.Language.keeps_gender`)."""
    given, read = pair.source.entity_gender(source_text), pair.target.entity_gender(translated)
    if pair.target.keeps_gender(translated, given):
        return []
    words = pair.gender_words
    detail = (
        f'The {pair.source.name} phrase names someone {words[given]}, but "{translated}" names someone '
        f"{words[read]}: keep the {pair.source.name}'s gender."
    )
    return [_failure("entity_gender", detail=detail)]


def translation_failures(
    kind: str,
    source_text: str,
    translated: str,
    entities: Mapping[str, str],
    glossary: Iterable[tuple[str, str]],
    pair: Pair = PERSIAN_ENGLISH,
) -> list[Failure]:
    """The rules one translation breaks (empty: it is accepted); see :mod:`pbbq.tasks.translate`. ``entities``
    maps the segment's source entities to their translation, ``glossary`` holds its ``(term_fa, rendering)``. The
    letters are read as the model wrote them; every other rule on the text normalised by the target's ``normalize``."""
    if not translated.strip():
        return [_failure("empty")]
    failures = []
    reason = pair.foreign_reason(translated)
    if reason is not None:
        names = {"source": pair.source.name, "target": pair.target.name}
        if reason == "letters":
            message = _failure("not_target", **names).message
        elif reason == "words":
            words = ", ".join(f'"{word}"' for word in pair.untranslated_words(translated))
            message = _failure("not_target_words", words=words, **names).message
        else:
            message = _failure("not_target_text", **names).message
        failures.append(Failure(pair.not_target, message))
    target = pair.target
    text = target.normalize(translated)
    failures += [_failure("glossary", fa=fa, term=term) for fa, term in glossary if not rendered(text, term, target)]
    if kind == "entity":
        failures += entity_gender_failures(source_text, text, pair)
    if kind == "context":
        failures += [
            _failure("entity_missing", phrase=phrase)
            for phrase in entities.values()
            if not target.mention(phrase).search(text)
        ]
    if kind in ("context", "question"):
        failures += [Failure(*found) for found in target.gender_failures(text, list(entities.values()), kind)]
    return failures


def lost_group_terms(entries: Iterable[tuple[str, str]], back: str, glossary: Glossary) -> list[Failure]:
    """The glossary entries of a segment whose group its back-translation does not name: by the term itself or by
    another term of the same rendering ('آذری' for 'ترک'), whatever the chrF."""
    entries = list(entries)
    if not entries:
        return []  # a segment without group terms has none to lose
    named = {rendering for _, rendering in glossary.terms_in(_PUNCTUATION.sub(" ", back))}
    return [_failure("group_term_lost", fa=fa, term=term) for fa, term in entries if term not in named]
