"""A language declared as data: a TOML file naming the :class:`~pbbq.tasks.text.languages.Language` fields
(docs/languages.md), which may ``include`` another TOML file (its keys under this file's, as lm-evaluation-harness's
task YAMLs ``include:`` a base), and a Python file of ``rules`` only for what data cannot say.

What a field needs to be a function (normalising, tokens, head words, an explicit age, lowercasing) is built here
from the file's data: Unicode NFC and one space between words, words and punctuation marks as tokens, the head
noun first or last, an age by a regular expression, and a casing rule (Turkish and Azerbaijani dotted and dotless
i). A ``rules`` module may define any of :data:`RULES` to replace the one built here.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import regex

from . import Language, UnknownLanguageError, gender_table, run_module

RULES = (
    "normalize",
    "tokenize",
    "head_words",
    "explicit_age",
    "lemma",
    "word_gender",
    "gender_failures",
    "unmarked",
    "find_mention",
    "lower",
)
"""The functions a ``rules`` module may define (each a :class:`Language` field of the same name)."""

KEYS: dict[str, type | tuple[type, ...]] = {
    "include": (str, list),
    "code": str,
    "name": str,
    "script": str,
    "own_letters": str,
    "identify_as": str,
    "shared_words": list,
    "casing": str,
    "cased": bool,
    "suffixing": bool,
    "glossary_column": str,
    "unknown_column": str,
    "option_article": str,
    "article": str,
    "head": str,
    "clause": str,
    "age": str,
    "stop_words": (str, list),
    "scaffold": dict,
    "prompts": str,
    "person_gender": dict,
    "kin_gender": dict,
    "pronoun_gender": dict,
    "age_words": dict,
    "maturity": dict,
    "spouses": list,
    "role_nouns": dict,
    "collective_nouns": list,
    "plural_suffixes": list,
    "rules": str,
}
"""Every key a language's TOML may have, with its type; anything else is a typo and an error."""
REQUIRED = ("code", "name", "script", "scaffold")
SCAFFOLD = ("question", "answer", "instruction")
CASINGS = {
    "default": str.lower,
    "turkic": lambda text: text.replace("İ", "i").replace("I", "ı").lower(),
}
"""Lowercasing rules by name: Unicode's, and Turkish and Azerbaijani's (I → ı, İ → i)."""
_CODE = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{2,8})*")
_TOKEN = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*|[^\w\s]|_")


def _read(file: Path, including: tuple[Path, ...] = ()) -> tuple[dict[str, Any], list[Path]]:
    """A language file's keys over those of the files it includes (tables merged key by key), and every file
    read."""
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UnknownLanguageError(f"{file}: not a readable TOML file ({exc})") from None
    included = raw.pop("include", [])
    names = [included] if isinstance(included, str) else included
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise UnknownLanguageError(f"{file}: include = {included!r} is not a file name or a list of them")
    merged: dict[str, Any] = {}
    files = [file]
    for name in names:
        base = (file.parent / name).resolve()
        if base in (file, *including):
            raise UnknownLanguageError(f"{file}: include = {name!r} includes itself")
        if not base.is_file():
            raise UnknownLanguageError(f"{file}: include = {name!r}: {base} does not exist")
        keys, read = _read(base, (file, *including))
        merged = _merged(merged, keys)
        files += read
    return _merged(merged, raw), files


def _merged(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    return base | {
        key: base[key] | value if isinstance(value, dict) and isinstance(base.get(key), dict) else value
        for key, value in over.items()
    }


def declares_language(file: Path) -> bool:
    """Whether a TOML file (with what it includes) declares a language's ``code``: a folder's other TOML files
    are bases to include."""
    try:
        return "code" in tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UnknownLanguageError(f"{file}: not a readable TOML file ({exc})") from None


def _checked(file: Path, data: dict[str, Any]) -> None:
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise UnknownLanguageError(f"{file}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(KEYS))}")
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise UnknownLanguageError(f"{file}: missing key(s) {', '.join(missing)}")
    for key, value in data.items():
        if not isinstance(value, KEYS[key]):
            raise UnknownLanguageError(f"{file}: {key} = {value!r} is not of the expected type")
    if not _CODE.fullmatch(data["code"]):
        raise UnknownLanguageError(f"{file}: code = {data['code']!r} is not a language tag such as 'tr' or 'az'")
    if set(data["scaffold"]) != set(SCAFFOLD):
        raise UnknownLanguageError(f"{file}: [scaffold] must have exactly {', '.join(SCAFFOLD)}")
    if data.get("casing", "default") not in CASINGS:
        raise UnknownLanguageError(f"{file}: casing = {data['casing']!r} is not one of {', '.join(CASINGS)}")
    if data.get("head", "last") not in ("first", "last"):
        raise UnknownLanguageError(f"{file}: head = {data['head']!r} is not 'first' or 'last'")


def _pattern(file: Path, key: str, text: str, flags: int = 0) -> re.Pattern[str]:
    try:
        return re.compile(text, flags)
    except re.error as exc:
        raise UnknownLanguageError(f"{file}: {key} = {text!r} is not a regular expression ({exc})") from None


def normalize(text: str) -> str:
    """Unicode NFC, one space between words, none around the text: idempotent."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def tokenize(text: str) -> list[str]:
    """Words (with their inner apostrophes and hyphens: Turkish 'Ali'nin') and punctuation marks."""
    return _TOKEN.findall(text)


def _head_words(head_last: bool, clause: re.Pattern[str] | None, lower: Callable[[str], str]) -> Callable[..., Any]:
    def head_words(text: str) -> list[str]:
        """The words of an entity's head phrase, head first; a relative clause or complement cut off."""
        head = clause.split(f" {text} ", maxsplit=1)[0] if clause is not None else text
        words = [lower(word) for word in tokenize(head) if word[0].isalnum()]
        return words[::-1] if head_last else words

    return head_words


def _explicit_age(age: re.Pattern[str] | None) -> Callable[[str], int | None]:
    def explicit_age(text: str) -> int | None:
        """The age an entity phrase states by the language's pattern (its first group, in digits), if any."""
        match = age.search(text) if age is not None else None
        return int(match.group(1)) if match is not None and match.group(1).isdigit() else None

    return explicit_age


def _kin_table(table: Mapping[str, list[str]]) -> dict[str, str | None]:
    return {word: None if gender == "either" else gender for word, gender in gender_table(table).items()}


def toml_language(file: Path) -> tuple[Language, list[Path]]:
    """The language a TOML file declares (docs/languages.md), and every file it was made from: the TOML files,
    its rules module, its prompt folder's files. A key of the wrong type, a script Unicode does not name or a
    rules module that fails is one line naming the file."""
    data, files = _read(file)
    _checked(file, data)
    code: str = data["code"]
    try:
        script = regex.compile(rf"\p{{Script={data['script']}}}")
    except regex.error:
        raise UnknownLanguageError(f"{file}: script = {data['script']!r} is not a Unicode script name") from None
    lower = CASINGS[data.get("casing", "default")]
    clause = _pattern(file, "clause", data["clause"], re.IGNORECASE) if "clause" in data else None
    age = _pattern(file, "age", data["age"], re.IGNORECASE) if "age" in data else None
    article = _pattern(file, "article", data["article"], re.IGNORECASE) if data.get("article") else None
    stop_words = data.get("stop_words", [])
    words = stop_words.split() if isinstance(stop_words, str) else [str(w) for w in stop_words]
    prompts = (file.parent / data.get("prompts", ".")).resolve()
    fields: dict[str, Any] = {
        "code": code,
        "name": data["name"],
        "script": script,
        "script_name": data["script"],
        "normalize": normalize,
        "tokenize": tokenize,
        "head_words": _head_words(data.get("head", "last") == "last", clause, lower),
        "explicit_age": _explicit_age(age),
        "scaffold": dict(data["scaffold"]),
        "glossary_column": data.get("glossary_column", f"term_{code}"),
        "unknown_column": data.get("unknown_column", f"phrase_{code}"),
        "load_stop_words": lambda: [lower(word) for word in words],
        "cased": data.get("cased", True),
        "lower": lower,
        "suffixing": data.get("suffixing", False),
        "person_gender": gender_table(data.get("person_gender", {})),
        "kin_gender": _kin_table(data.get("kin_gender", {})),
        "pronoun_gender": gender_table(data.get("pronoun_gender", {})),
        "age_words": gender_table(data.get("age_words", {})),
        "maturity": gender_table(data.get("maturity", {})),
        "spouses": frozenset(data.get("spouses", [])),
        "role_nouns": gender_table(data.get("role_nouns", {})),
        "collective_nouns": frozenset(data.get("collective_nouns", [])),
        "plural_suffixes": tuple(data.get("plural_suffixes", [])),
        "article": article,
        "option_article": data.get("option_article", ""),
        "own_letters": data.get("own_letters", ""),
        "identify_as": data.get("identify_as", code),
        "shared_words": frozenset(lower(word) for word in data.get("shared_words", [])),
        "prompts": prompts,
    }
    if "rules" in data:
        rules_file = (file.parent / data["rules"]).resolve()
        if not rules_file.is_file():
            raise UnknownLanguageError(f"{file}: rules = {data['rules']!r}: {rules_file} does not exist")
        rules = run_module(rules_file)
        fields |= {name: getattr(rules, name) for name in RULES if callable(getattr(rules, name, None))}
        files.append(rules_file)
    files += sorted(prompts.glob("*.txt")) if prompts.is_dir() else []
    return Language(**fields), files
