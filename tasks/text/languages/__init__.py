"""Languages: everything a stage does differently per language, behind one interface (docs/architecture.md §2, §7;
docs/languages.md says how to add one).

The builder's own languages are the modules of this package (``en.py``, ``fa.py``, ``ur.py``), each defining
``LANGUAGE = Language(...)`` with its word lists in a TOML file beside it (``fa.toml``, read once by
:func:`load_data`). A build adds its own from files it names (``[languages] modules``): a language is data first,
a TOML file declaring the :class:`Language` fields (:mod:`.declared`), a Python module only for rules data cannot
say. What a build adds is a value, :class:`Languages`, the builder's languages and its own: :func:`using` makes it
the one :func:`language` and :data:`LANGUAGES` answer from within the build (a context variable, so another build
in the same process keeps its own). Nothing here imports the rest of the package (``text`` is the lowest layer);
the cue rules built on these members live in :mod:`pbbq.tasks.text.cues`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import pkgutil
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Final, Literal, NamedTuple

NONE: Final = "none"
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
    script_name: str = ""
    """The Unicode name of its script (``Latin``, ``Arabic``, ``Cyrillic``): two languages of one script cannot be
    told apart by their letters alone (:meth:`pbbq.tasks.translate.pair.Pair.foreign`); empty: unknown."""
    identify_as: str | None = None
    """Its ISO 639-1 code for the language identifier (:mod:`.identify`), if the identifier knows it; None: none
    is used (its letters alone tell it)."""
    shared_words: frozenset[str] = frozenset()
    """Its words spelled as a stop word of a language of its script (Turkish 'at', 'on', 'can'): never read as an
    untranslated word of that language."""
    lower: Callable[[str], str] = str.lower
    suffixing: bool = False
    """Whether its words take endings after a phrase or a group's name (Turkish 'adamdan', 'Türkler'): a phrase is
    found at a word's start, whatever ending follows (:meth:`mention`; a glossary rendering likewise)."""
    """Its lowercasing (Turkish: I → ı, İ → i), where :attr:`cased` words are compared."""
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
    """The folder of the translate prompts into it and out of it (``translate.en-<code>.txt``, …), for a language a
    build adds (:func:`load_languages`); None: the builder's ``prompts/``."""

    @cached_property
    def stop_words(self) -> frozenset[str]:
        """Stop words removed before TTR (Appendix C.2), read once."""
        return frozenset(self.load_stop_words())

    def words(self, tokens: Sequence[str]) -> list[str]:
        """The words among :attr:`tokenize`'s tokens: punctuation tokens left out, lowercased if :attr:`cased`.

        The lexical metrics (TTR, NGD; Appendix C.2, C.3) count words; Self-BLEU keeps BLEU's own tokens instead."""
        kept = [token for token in tokens if not is_punctuation(token)]
        return [self.lower(token) for token in kept] if self.cased else kept

    def without_article(self, phrase: str) -> str:
        """The phrase without its leading article."""
        return self.article.sub("", phrase) if self.article is not None else phrase

    @cache  # noqa: B019 (as entity_gender: a check looks up each of its entities in every segment)
    def mention(self, phrase: str) -> re.Pattern[str]:
        """Finds the phrase (without its article, in any case) as whole words of a text (or words that go on, in a
        :attr:`suffixing` language), or as the language's :attr:`find_mention` finds it; compiled once per
        phrase."""
        if self.find_mention is not None:
            return self.find_mention(phrase)
        core = re.escape(self.without_article(phrase.strip()))
        return re.compile(r"(?<![\w-])" + core + ("" if self.suffixing else r"(?![\w-])"), re.IGNORECASE)

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
    """A ``lang`` code no language defines, or a language file that cannot be used (one line naming it)."""


class Languages(Mapping[str, Language]):
    """The languages of a build by code: the builder's own and those its configuration adds, with the files
    that define the added ones (their hash is part of every stage's cache key, :meth:`cache_identity`)."""

    def __init__(self, languages: Mapping[str, Language], files: Iterable[Path] = ()) -> None:
        self._languages = dict(sorted(languages.items()))
        self.files = tuple(dict.fromkeys(files))
        """The files the added languages were read from: TOML files, the files they include, word lists, prompt
        folders' files and Python modules."""

    def __getitem__(self, code: str) -> Language:
        return self._languages[code]

    def __iter__(self) -> Iterator[str]:
        return iter(self._languages)

    def __len__(self) -> int:
        return len(self._languages)

    def __repr__(self) -> str:
        return f"Languages({', '.join(self._languages)})"

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the added languages' files (names and bytes); empty for the builder's own alone."""
        if not self.files:
            return ""
        digest = hashlib.sha256()
        for file in self.files:
            digest.update(str(file).encode("utf-8") + b"\0" + file.read_bytes() + b"\0")
        return digest.hexdigest()

    def cache_identity(self) -> dict[str, Any]:
        return {"codes": list(self._languages), "files": self.fingerprint}

    def added(self, languages: Mapping[str, Language], files: Iterable[Path]) -> Languages:
        """These languages and ``languages`` (whose codes none of these has), read from ``files``."""
        return Languages({**self._languages, **languages}, (*self.files, *files))


_ACTIVE: ContextVar[Languages | None] = ContextVar("languages", default=None)
"""The languages of the build that runs in this context (:func:`using`)."""
_WORKER: list[Languages] = []
"""The languages of the build a worker process (a Dask worker) serves (:func:`serve_in_this_process`): a worker
runs the stages of one build's cluster, and a context does not cross processes."""


def active() -> Languages:
    """The languages of the build running in this context: those :func:`using` set, else the worker's, else the
    builder's own."""
    current = _ACTIVE.get()
    if current is not None:
        return current
    return _WORKER[-1] if _WORKER else BUILTIN


@contextmanager
def using(languages: Languages) -> Iterator[Languages]:
    """Within it (a build, its configuration's loading), :func:`language` and :data:`LANGUAGES` answer from
    ``languages``; threads that copy the context (Prefect's task runner does) too."""
    token = _ACTIVE.set(languages)
    try:
        yield languages
    finally:
        _ACTIVE.reset(token)


class _ActiveLanguages(Mapping[str, Language]):
    """:func:`active`'s languages, looked up anew on every access."""

    def __getitem__(self, code: str) -> Language:
        return active()[code]

    def __iter__(self) -> Iterator[str]:
        return iter(active())

    def __len__(self) -> int:
        return len(active())


LANGUAGES: Mapping[str, Language] = _ActiveLanguages()
"""Every language of the running build by its code (:func:`active`): the builder's own outside a build."""


def language(code: str) -> Language:
    """The language of ``code`` in the running build; an unknown code raises one line naming it and the known
    ones."""
    languages = _ACTIVE.get()  # before active()'s call: every translated text asks (a hot path)
    if languages is None:
        languages = active()
    try:
        return languages._languages[code]
    except KeyError:
        known = ", ".join(repr(c) for c in languages)
        raise UnknownLanguageError(f"unknown language {code!r}: expected one of {known}") from None


# --- languages a build adds ------------------------------------------------------------------------------------


def _defines_language(file: Path) -> bool:
    """Whether a Python file assigns ``LANGUAGE`` at its top level, read without running it."""
    try:
        tree = ast.parse(file.read_bytes(), filename=str(file))
    except (SyntaxError, ValueError) as exc:
        raise UnknownLanguageError(f"{file} is not valid Python ({exc})") from None
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(target, ast.Name) and target.id == "LANGUAGE" for target in targets):
            return True
    return False


def _language_files(path: Path) -> list[Path]:
    """The files defining languages at ``path``: the file itself, or a folder's TOML files that declare a ``code``
    and Python files that assign ``LANGUAGE`` (found without running any); one line when there are none."""
    from .declared import declares_language

    if path.is_file():
        if path.suffix not in (".toml", ".py"):
            raise UnknownLanguageError(f"{path} is not a language file (a .toml or a .py)")
        return [path]
    if not path.is_dir():
        raise UnknownLanguageError(f"language file or folder {path} does not exist")
    files = [f for f in sorted(path.glob("*.toml")) if declares_language(f)]
    files += [f for f in sorted(path.glob("*.py")) if _defines_language(f)]
    if not files:
        raise UnknownLanguageError(
            f"language folder {path} holds no language (a .toml declaring code, or a .py assigning LANGUAGE)"
        )
    return files


def module_name(file: Path) -> str:
    """The name a build's language module runs under: its stem and its path's hash, the same in every process
    (a Dask worker loads it again, and a language's functions pickle by their module's name)."""
    return f"pbbq_languages.{file.stem}_{hashlib.sha256(str(file).encode('utf-8')).hexdigest()[:12]}"


def run_module(file: Path) -> ModuleType:
    """Run a build's Python file (a language module, or the rules a TOML language names): code the configuration
    runs, so trusted as the builder is (docs/languages.md). An error or ``SystemExit`` in it is one line naming the
    file; the one loaded already from the same bytes is reused."""
    name = module_name(file)
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__pbbq_sha256__", None) == hashlib.sha256(file.read_bytes()).hexdigest():
        return loaded
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise UnknownLanguageError(f"{file} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    module.__pbbq_sha256__ = hashlib.sha256(file.read_bytes()).hexdigest()  # type: ignore[attr-defined]
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        del sys.modules[name]
        raise UnknownLanguageError(
            f"{file}: the language module exited (SystemExit {exc.code!r}) while loading"
        ) from None
    except Exception as exc:  # a user's module: whatever it raises is one line naming it
        del sys.modules[name]
        raise UnknownLanguageError(
            f"{file}: the language module failed to load ({type(exc).__name__}: {exc})"
        ) from None
    return module


def _module_language(file: Path) -> tuple[Language, list[Path]]:
    """A Python language module's ``LANGUAGE`` and the files it reads (itself, its data files beside it)."""
    candidate = getattr(run_module(file), "LANGUAGE", None)
    if not isinstance(candidate, Language):
        raise UnknownLanguageError(f"{file}: LANGUAGE is not a Language")
    beside = [f for f in sorted(file.parent.glob(f"{file.stem}.*")) if f.suffix not in (".py", ".pyc") and f.is_file()]
    prompts = sorted(candidate.prompts.glob("*.txt")) if candidate.prompts is not None else []
    return candidate, [file, *beside, *prompts]


def load_languages(paths: Iterable[Path], base: Languages | None = None) -> Languages:
    """``base`` and the languages defined at ``paths`` (TOML files, Python modules, or folders of them): a new
    value, nothing global changes. A path that does not exist or defines no language, a file that cannot be read or
    run, or a code defined twice raises one line naming it, before any module of a folder without a language runs."""
    from .declared import toml_language

    base = BUILTIN if base is None else base
    files = [file for path in paths for file in _language_files(Path(path).resolve())]
    found: dict[str, Language] = {}
    read: list[Path] = []
    for file in dict.fromkeys(files):
        lang, sources = toml_language(file) if file.suffix == ".toml" else _module_language(file)
        if lang.code in base or lang.code in found:
            raise UnknownLanguageError(f"{file}: language {lang.code!r} is defined already")
        found[lang.code] = lang
        read += sources
    return base.added(found, read) if found else base


def serve_in_this_process(paths: Iterable[Path]) -> None:
    """Make the languages at ``paths`` this worker process's (a Dask worker of a build, which gets no context from
    the flow's process; :func:`pbbq.flows.task_runners.share_languages`)."""
    _WORKER[:] = [load_languages(paths)]


BUILTIN = Languages(discover())
"""The builder's own languages (this package's modules), found last: a module of it may import this one's names."""
