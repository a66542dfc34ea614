"""The one Persian text pipeline: normalisation, tokenisation and stop words (docs/architecture.md §7).

Every loader normalises every Persian text field once with :func:`normalize_fa`; nothing later normalises again.
The diversity metrics (PBBQ paper §3.5, Appendix C) tokenise with :func:`tokenize` and count words with
:func:`words`. hazm is imported lazily, so a loader that only normalises does not pay for importing it.
"""

import re
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hazm import WordTokenizer
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

# Persian text is normalised with one translate table and two compiled regexes, not hazm's Normalizer: its
# options cannot do what §7 asks without also rewriting words (``correct_spacing`` re-tokenises and joins
# affixes, ``seperate_mi`` inserts half-spaces, ``persian_style`` changes quotes and ``persian_numbers`` turns
# ASCII digits into Persian ones), and its letter table is always applied. Letters hazm's table also leaves
# alone stay as they are: ة (teh marbuta), ۀ (heh with yeh above), hamza forms.
ZWNJ = "\u200c"

_LETTERS = {
    "\u064a": "\u06cc",  # ي Arabic yeh -> ی Farsi yeh
    "\u0649": "\u06cc",  # ى Arabic alef maksura -> ی Farsi yeh
    "\u0643": "\u06a9",  # ك Arabic kaf -> ک keheh
}
# Arabic-Indic ٠-٩ and extended Arabic-Indic (Persian) ۰-۹ both become ASCII 0-9: the fa and en configs then
# carry the very same numerals (ages, years, counts), so the translation checks compare equal strings, BBQ tooling
# and regexes written as [0-9] read them, and a count-based metric never sees ۳۰ and 30 as two words. (TARAZ
# §5.2 unifies on Persian digits instead; either canonical form serves matching, ASCII also serves the en side.)
_DIGITS = {chr(base + i): str(i) for base in (0x0660, 0x06F0) for i in range(10)}
# Diacritics: tanwin fathatan, dammatan, kasratan, fatha, damma, kasra, shadda, sukun (U+064B-U+0652), the
# superscript alef (U+0670) and the tatweel (U+0640), which only stretches a letter.
_DELETED = [chr(c) for c in range(0x064B, 0x0653)] + ["\u0670", "\u0640"]
# Invisible format characters: the zero-width joiner (Persian letters join by default, so it changes nothing a
# reader sees), the BOM / zero-width no-break space, the word joiner, the soft hyphen and the bidi marks and
# embeddings that copy-paste leaves behind (LRM, RLM, ALM, LRE..RLO, LRI..PDI).
_DELETED += ["\u200d", "\ufeff", "\u2060", "\u00ad", "\u200e", "\u200f", "\u061c"]
_DELETED += [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)]
# The zero-width space breaks cursive joining as the ZWNJ does; in Persian text it stands for a half-space.
_TRANSLATION = str.maketrans({**_LETTERS, **_DIGITS, **dict.fromkeys(_DELETED), "\u200b": ZWNJ})
# A run of whitespace and ZWNJs holding any whitespace becomes one space (a ZWNJ next to a space is useless).
_SPACE_RUN = re.compile(r"\u200c*\s[\s\u200c]*")
_ZWNJ_RUN = re.compile(r"\u200c{2,}")


def normalize_fa(text: str) -> str:
    """Normalise a Persian text field once, at load (docs/architecture.md §7; the rules TARAZ §5.2 lists, but
    ASCII digits).

    Arabic ي/ى → ی and ك → ک; Arabic-Indic and Persian digits → ASCII 0-9; Arabic diacritics, superscript
    alef and tatweel removed; ZWJ, BOM, word joiner, soft hyphen and bidi marks removed and the zero-width space
    turned into a ZWNJ; repeated ZWNJs collapsed to one, a ZWNJ next to whitespace or at either end dropped;
    every run of whitespace (newlines included) collapsed to one space; the result stripped. Idempotent.
    """
    text = _SPACE_RUN.sub(" ", text.translate(_TRANSLATION))
    return _ZWNJ_RUN.sub(ZWNJ, text).strip(" " + ZWNJ)


# hazm's tokenizer splits off Persian punctuation, ? ! . : brackets and quotes, but leaves ASCII , ; and the
# ellipsis character stuck to the word before them; they are spaced out first so 'علی,' is the word 'علی'.
_UNSPLIT_PUNCTUATION = re.compile(r"[,;…]")
# A token made only of non-word characters (punctuation, symbols, emoji, a lone underscore) is not a word.
_NON_WORD = re.compile(r"[\W_]+")


@cache
def _hazm_tokenizer() -> "WordTokenizer":
    """The one hazm WordTokenizer, built once (building one reads hazm's word list; ``word_tokenize`` does
    that on every call). ``join_verb_parts=False`` keeps the text's words: the default joins verb parts into
    new tokens such as 'گفته_شده_است'. The replace_* options stay off, so links and numbers stay as written."""
    from hazm import WordTokenizer

    return WordTokenizer(join_verb_parts=False)


@cache
def _tokenizer_13a() -> "Tokenizer13a":
    """sacrebleu's default BLEU tokenizer (mteval-v13a), built once."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return Tokenizer13a()


def tokenize_fa(text: str) -> list[str]:
    """Tokens of a normalised Persian text with hazm's WordTokenizer, punctuation tokens included.

    Words keep their ZWNJ (می‌رود is one token). No token holds whitespace, so joining with spaces and
    splitting again gives the same tokens (what sacrebleu's ``tokenize='none'`` sees).
    """
    spaced = _UNSPLIT_PUNCTUATION.sub(r" \g<0> ", text)
    return [part for token in _hazm_tokenizer().tokenize(spaced) for part in token.split()]


def tokenize_en(text: str) -> list[str]:
    """Tokens of an English text exactly as sacrebleu's BLEU sees them: the 13a tokenizer, then whitespace."""
    return _tokenizer_13a()(text.rstrip()).split()


def tokenize(text: str, lang: str) -> list[str]:
    """Tokens of ``text`` in ``lang`` ('fa': hazm, 'en': sacrebleu 13a), punctuation tokens included."""
    if lang == "fa":
        return tokenize_fa(text)
    if lang == "en":
        return tokenize_en(text)
    raise ValueError(f"unknown language {lang!r}: expected 'fa' or 'en'")


def is_punctuation(token: str) -> bool:
    """True for a token made only of non-word characters (punctuation, symbols, emoji)."""
    return _NON_WORD.fullmatch(token) is not None


def words(tokens: Sequence[str], lang: str) -> list[str]:
    """The words among :func:`tokenize`'s ``tokens``: punctuation tokens left out, English lowercased.

    The lexical metrics (TTR, NGD; Appendix C.2, C.3) count words, so punctuation tokens are left out, and
    English is lowercased so 'The' and 'the' are one type (Persian has no case). Self-BLEU keeps BLEU's own
    tokens instead (see ``pbbq.tasks.diversity.self_bleu``).
    """
    kept = [token for token in tokens if not is_punctuation(token)]
    return [token.lower() for token in kept] if lang == "en" else kept


# NLTK's English stop-word list (the 179 words of nltk_data corpora/stopwords/english before its 2024
# additions), written out here because nltk's data cannot be downloaded on these machines; sacrebleu has none.
_ENGLISH_STOP_WORDS = """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his
himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom this
that that'll these those am is are was were be been being have has had having do does did doing a an the and but
if or because as until while of at by for with about against between into through during before after above
below to from up down in out on off over under again further then once here there when where why how all any both
each few more most other some such no nor not only own same so than too very s t can will just don don't should
should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't
haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't
weren weren't won won't wouldn wouldn't
"""


@cache
def stop_words(lang: str) -> frozenset[str]:
    """Stop words removed before TTR (Appendix C.2): hazm's ``stopwords_list()`` (normalised with
    :func:`normalize_fa`) for 'fa', NLTK's English list for 'en'."""
    if lang == "fa":
        from hazm import stopwords_list

        return frozenset(normalize_fa(word) for word in stopwords_list())
    if lang == "en":
        return frozenset(_ENGLISH_STOP_WORDS.split())
    raise ValueError(f"unknown language {lang!r}: expected 'fa' or 'en'")
