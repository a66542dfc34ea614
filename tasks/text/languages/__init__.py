"""Languages as modules: everything a stage does differently per language, behind one interface
(docs/architecture.md §2, §7).

Each module of this package (``fa.py``, ``en.py``) defines ``LANGUAGE = Language(...)``; its word lists live in a
TOML file beside it (``fa.toml``, read once by :func:`load_data`). The package finds its modules itself, so adding a
language is one module plus its data file: :data:`LANGUAGES` maps each code to its language, and a stage asks
:func:`language` for the one a row's ``lang`` names. Nothing here imports the rest of the package (``text`` is the
lowest layer); the cue rules built on these members live in :mod:`pbbq.tasks.text.cues`.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, NamedTuple

NONE = "none"
"""Neither gender nor age band: the entity's words say nothing about it."""
Gender = Literal["female", "male", "none"]


class GenderFailure(NamedTuple):
    """A gender rule a translation into the language breaks: its code and the sentence that names it to the model."""

    code: str
    message: str


# A token made only of non-word characters (punctuation, symbols, emoji, a lone underscore) is not a word.
_NON_WORD = re.compile(r"[\W_]+")


def is_punctuation(token: str) -> bool:
    """True for a token made only of non-word characters (punctuation, symbols, emoji)."""
    return _NON_WORD.fullmatch(token) is not None


def unchanged(text: str) -> str:
    """The text as written: what a language without such a rule (English's normalisation, its lemmas) does."""
    return text


def _no_gender_failures(text: str, entities: Sequence[str], kind: str) -> list[GenderFailure]:
    """A language whose words give no gender to check (Persian: او is either) has no gender failures."""
    return []


@dataclass(frozen=True, eq=False)
class Language:
    """One language: its text pipeline (PBBQ paper §3.5, Appendix C), its person cues (PBBQ §3.3; Obscured but Not
    Erased §4.1.1), the checks a translation into it must pass (PakBBQ §3.3) and its prompt words.

    Tables map a normalised word to what it gives: ``person_gender`` (man, woman), ``kin_gender`` (father: male;
    spouse: None, either), ``pronoun_gender`` (he, she; empty where pronouns have no gender), ``age_words`` (a band
    of :data:`pbbq.tasks.text.cues.AGE_BANDS`, or ``youth``/``adult``) and ``maturity`` (``youth``/``adult``).
    """

    code: str
    """The ``lang`` value of its rows and the name of its release config: ``fa``."""
    name: str
    """Its English name, as a prompt or a failure message calls it: ``Persian``."""
    script: re.Pattern[str]
    """Matches a letter of its script (Persian letters left in an English translation)."""
    normalize: Callable[[str], str]
    """The one normalisation of a text field, at load (docs/architecture.md §7); idempotent."""
    tokenize: Callable[[str], list[str]]
    """Tokens of a normalised text, punctuation tokens included; no token holds whitespace."""
    head_words: Callable[[str], list[str]]
    """The words of an entity's head phrase, head first, a relative clause or complement cut off."""
    explicit_age: Callable[[str], int | None]
    """The age an entity phrase states ('هفتادساله', 'a 70-year-old'), if any."""
    scaffold: Mapping[str, str]
    """The prompt words around a question: ``question``, ``answer`` and ``instruction`` (lm-eval)."""
    glossary_column: str
    """The column of ``annotations/glossary.csv`` holding its terms."""
    unknown_column: str
    """The column of ``annotations/unknown_phrases.csv`` holding its 'unknown' phrasings ('Cannot be determined')."""
    load_stop_words: Callable[[], Iterable[str]] = field(repr=False)
    """Reads its stop words (Appendix C.2), once, when :attr:`stop_words` is first asked for."""
    cased: bool = False
    """Whether words are lowercased before counting ('The' and 'the' one type)."""
    person_gender: Mapping[str, str] = field(default_factory=dict)
    kin_gender: Mapping[str, str | None] = field(default_factory=dict)
    pronoun_gender: Mapping[str, str] = field(default_factory=dict)
    age_words: Mapping[str, str] = field(default_factory=dict)
    maturity: Mapping[str, str] = field(default_factory=dict)
    spouses: frozenset[str] = frozenset()
    """Kinship nouns whose possessor is the other spouse (the names stage names a husband by his wife)."""
    role_nouns: Mapping[str, str] = field(default_factory=dict)
    """Role nouns and the role each names (a mother and a father are both a ``parent``; PBBQ §3.3's control)."""
    collective_nouns: frozenset[str] = frozenset()
    """Head nouns that name a group of people (a family)."""
    plural_suffixes: tuple[str, ...] = ()
    """Endings of a plural head noun (a group, not one person)."""
    status_words: Mapping[str, tuple[str, frozenset[str]]] = field(default_factory=dict)
    """Status words (possibly of several words), their status and the categories whose attribute that status is."""
    lemma: Callable[[str], str] = unchanged
    """A head word without its inflection, as role, collective and status words are listed ('دانشجوی' → 'دانشجو')."""
    word_gender: Callable[[str], str | None] | None = None
    """The gender one head word gives; None: read ``person_gender`` then ``kin_gender``."""
    article: re.Pattern[str] | None = None
    """A phrase's leading article ('the', 'a'), which a bare phrase and a mention leave out; None: it has none."""
    option_article: str = ""
    """The article before an entity option, as BBQ writes it in English ("The taxi driver"); empty: the bare phrase
    (Persian, Urdu)."""
    own_letters: str = ""
    """Letters of its script that another language of the same script does not write, the only sign of which
    language a text of a shared script is in (Persian's ه and ۀ, where Urdu writes ہ and ھ); empty: its script
    alone tells it (:meth:`pbbq.tasks.translate.pair.Pair.foreign`)."""
    gender_failures: Callable[[str, Sequence[str], str], list[GenderFailure]] = _no_gender_failures
    """The gender rules a translation into the language breaks: ``(text, its entities' phrases in the language,
    kind)`` → failures; ``kind`` is ``context`` or ``question``. English checks pronouns; a language that marks gender
    elsewhere (verbs, adjectives) checks those."""
    unmarked: Callable[[str], bool] | None = None
    """Whether a phrase's gender is only the language's form for a person of any gender (Urdu's masculine agreement
    without a gendered noun: اکلوتا نوجوان), so it gives none; None: every gender a phrase reads is given."""
    marks_gender_on_verbs: bool = False
    """Whether its verbs agree with the gender of their subject (Urdu's سکا/سکی): a question about which of two
    people then reads one way for two women and another for anyone else, so it is translated once per pair's
    gender (:func:`pbbq.tasks.translate.segments.question_agreement`)."""
    find_mention: Callable[[str], re.Pattern[str]] | None = None
    """How a phrase is found in a text where its words inflect (Urdu's oblique form); None: as written
    (:meth:`mention`)."""
    prompts: Path | None = None
    """The folder of the translate prompts into it (``translate.fa-<code>.txt``, …), for a language whose module lives
    outside the builder (:func:`add_modules`); None: the builder's ``prompts/``."""

    @cached_property
    def stop_words(self) -> frozenset[str]:
        """Stop words removed before TTR (Appendix C.2), read once."""
        return frozenset(self.load_stop_words())

    def words(self, tokens: Sequence[str]) -> list[str]:
        """The words among :attr:`tokenize`'s tokens: punctuation tokens left out, lowercased if :attr:`cased`.

        The lexical metrics (TTR, NGD; Appendix C.2, C.3) count words; Self-BLEU keeps BLEU's own tokens instead."""
        kept = [token for token in tokens if not is_punctuation(token)]
        return [token.lower() for token in kept] if self.cased else kept

    def without_article(self, phrase: str) -> str:
        """The phrase without its leading article."""
        return self.article.sub("", phrase) if self.article is not None else phrase

    @cache  # noqa: B019 (as entity_gender: a check looks up each of its entities in every segment)
    def mention(self, phrase: str) -> re.Pattern[str]:
        """Finds the phrase (without its article, in any case) as whole words of a text, or as the language's
        :attr:`find_mention` finds it; compiled once per phrase."""
        if self.find_mention is not None:
            return self.find_mention(phrase)
        core = re.escape(self.without_article(phrase.strip()))
        return re.compile(r"(?<![\w-])" + core + r"(?![\w-])", re.IGNORECASE)

    def gender_of_word(self, word: str) -> str | None:
        """The gender one head word gives, or None."""
        if self.word_gender is not None:
            return self.word_gender(word)
        return self.person_gender.get(word) or self.kin_gender.get(word)

    def keeps_gender(self, phrase: str, given: Gender) -> bool:
        """Whether a phrase (a translation) gives the gender ``given`` (its source's, :meth:`entity_gender`), and none
        the source does not: it reads ``given``, or ``given`` is none and the phrase's gender is :attr:`unmarked`."""
        read = self.entity_gender(phrase)
        return read == given or (given == NONE and self.unmarked is not None and self.unmarked(phrase))

    @cache  # noqa: B019 (a language lives as long as the process; its cache with it)
    def entity_gender(self, phrase: str) -> Gender:
        """``female``, ``male`` or :data:`NONE`: the first gender cue of the phrase's head words (its head noun's,
        or a modifier's as in 'راننده‌ی زن')."""
        for word in self.head_words(phrase):
            gender = self.gender_of_word(word)
            if gender:
                return gender  # type: ignore[return-value]
        return NONE


def load_data(module_file: str) -> dict[str, Any]:
    """The TOML file beside a language module (``fa.py`` → ``fa.toml``)."""
    return tomllib.loads(Path(module_file).with_suffix(".toml").read_text(encoding="utf-8"))


def gender_table(table: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """``{value: [word, …]}`` as a data file writes it → ``{word: value}``, in the file's order."""
    return {word: value for value, words in table.items() for word in words}


def discover(path: Iterable[str] | None = None) -> dict[str, Language]:
    """Every language module of this package (or of the folders in ``path``), by code."""
    found: dict[str, Language] = {}
    for module in pkgutil.iter_modules(list(path) if path is not None else __path__):
        candidate = getattr(importlib.import_module(f"{__name__}.{module.name}"), "LANGUAGE", None)
        if isinstance(candidate, Language):
            found[candidate.code] = candidate
    return dict(sorted(found.items()))


class UnknownLanguageError(ValueError):
    """A ``lang`` code no language module defines."""


LANGUAGES: dict[str, Language] = discover()
"""Every language by its code: this package's, and those of the folders :func:`add_modules` added."""


def _import_file(name: str, file: Path) -> ModuleType:
    """The module ``name`` from ``file``: the one loaded already if it came from that file, else imported again (a
    folder written anew elsewhere, as ``pbbq synth`` moves its folder into place)."""
    loaded = sys.modules.get(name)
    if loaded is not None and loaded.__file__ is not None and Path(loaded.__file__) == file:
        return loaded
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"{file} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def add_modules(folders: Iterable[Path]) -> dict[str, Language]:
    """Language modules kept outside this package (a build's ``[languages] modules``, so that a team adds a language
    without forking): each folder joins the package's search path and its modules import as this package's, so the
    stages' cache keys hash them (:func:`pbbq.tasks.core.caching.module_closure`), and their languages join
    :data:`LANGUAGES`. Returns the languages defined in ``folders``; a folder that does not exist, holds no language
    module or a module named as one of the builder's, or defines a code another module defines, raises one line
    naming it."""
    own = {module.name for module in pkgutil.iter_modules(__path__[:1])}
    found: dict[str, Language] = {}
    for folder in (Path(f).resolve() for f in folders):
        if not folder.is_dir():
            raise UnknownLanguageError(f"language module folder {folder} does not exist")
        if str(folder) not in __path__:
            __path__.append(str(folder))
        defined: dict[str, Language] = {}
        for module in (m for m in pkgutil.iter_modules([str(folder)]) if not m.ispkg):
            if module.name in own:
                raise UnknownLanguageError(f"{folder / module.name}.py is named as one of the builder's languages")
            name = f"{__name__}.{module.name}"
            previous = getattr(sys.modules.get(name), "LANGUAGE", None)
            try:
                candidate = getattr(_import_file(name, folder / f"{module.name}.py"), "LANGUAGE", None)
            except (ImportError, SyntaxError) as exc:
                raise UnknownLanguageError(f"{folder / module.name}.py cannot be imported ({exc})") from None
            if isinstance(previous, Language) and previous is not candidate:
                LANGUAGES.pop(previous.code, None)  # its module was imported again from this folder
            if isinstance(candidate, Language):
                defined[candidate.code] = candidate
        if not defined:
            raise UnknownLanguageError(f"language module folder {folder} holds no module defining LANGUAGE")
        for code, lang in defined.items():
            if LANGUAGES.get(code, lang) is not lang or found.get(code, lang) is not lang:
                raise UnknownLanguageError(f"language module folder {folder}: language {code!r} is defined already")
        found |= defined
    LANGUAGES.update(found)
    return found


def language(code: str) -> Language:
    """The language of ``code``; an unknown code raises one line naming it and the known ones."""
    try:
        return LANGUAGES[code]
    except KeyError:
        known = ", ".join(repr(c) for c in LANGUAGES)
        raise UnknownLanguageError(f"unknown language {code!r}: expected one of {known}") from None
