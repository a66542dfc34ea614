"""Which of two languages a text is in: lingua's language identifier (``lingua-language-detector``), restricted
to the two, which ships its own n-gram models (75 languages) and is built for short text.

Chosen over py3langid (a 4.5 MB naive Bayes model: equal on sentences, but a word of fewer than four letters gets
no evidence, 0.5 for 'if', 'the', 'at', so it cannot tell an untranslated function word), pycld2 (no answer for a
third of short phrases) and fasttext-langdetect (it downloads its model at run time, which these machines cannot):
docs/languages.md has the comparison. The models of a pair are loaded once, the first time it is asked.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from ...imports import one_import_at_a_time

if TYPE_CHECKING:
    from lingua import LanguageDetector


@cache
def _detector(first: str, second: str) -> LanguageDetector | None:
    """lingua's detector of two ISO 639-1 codes, or None if it does not know one of them."""
    with one_import_at_a_time():
        from lingua import IsoCode639_1, LanguageDetectorBuilder

    try:
        codes = [IsoCode639_1.from_str(code) for code in (first, second)]
    except ValueError:
        return None
    return LanguageDetectorBuilder.from_iso_codes_639_1(*codes).build()


def knows(first: str | None, second: str | None) -> bool:
    """Whether the identifier can tell these two ISO 639-1 codes apart."""
    return first is not None and second is not None and first != second and _detector(first, second) is not None


def confidence(text: str, code: str, other: str) -> float:
    """How sure the identifier is that ``text`` is in ``code`` rather than ``other`` (0 to 1; both must be
    :func:`known <knows>`)."""
    detector = _detector(code, other)
    assert detector is not None, (code, other)
    with one_import_at_a_time():
        from lingua import IsoCode639_1, Language

    return detector.compute_language_confidence(text, Language.from_iso_code_639_1(IsoCode639_1.from_str(code)))
