"""Languages as modules: the registry, each language's members, and a third language that is one module."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.soundness import soundness
from pbbq.tasks.evaluation.lm_eval_utils import SCAFFOLD
from pbbq.tasks.instantiate import InstantiateParams, instantiate
from pbbq.tasks.text import cues, languages
from pbbq.tasks.text.cues import entity_age_band
from pbbq.tasks.text.languages import LANGUAGES, NONE, Language, UnknownLanguageError, language
from tests.templates import STEREOTYPES, template_row

SAMPLES = {
    "fa": "علي  گفت: «مادرِ من ۴۵ ساله است.»",
    "en": 'The nurse said: "My mother is 45 years old."',
}


def test_the_registry_holds_persian_and_english_by_code() -> None:
    assert {"fa", "en"} <= set(LANGUAGES)
    assert all(code == lang.code for code, lang in LANGUAGES.items())
    assert (language("fa").name, language("en").name) == ("Persian", "English")


def test_an_unknown_code_is_one_line_naming_it_and_the_known_ones() -> None:
    with pytest.raises(UnknownLanguageError, match=r"^unknown language 'de': expected one of .*'en'.*'fa'") as error:
        language("de")
    assert "\n" not in str(error.value) and isinstance(error.value, ValueError)


def _header(name: str) -> list[str]:
    with (REPO_ROOT / "annotations" / name).open(encoding="utf-8") as file:
        return next(csv.reader(file))


@pytest.mark.parametrize("code", ["fa", "en"])
def test_each_language_has_every_member(code: str) -> None:
    lang = language(code)
    text = lang.normalize(SAMPLES[code])
    assert lang.normalize(text) == text
    tokens = lang.tokenize(text)
    assert tokens and not any(" " in token for token in tokens)
    assert lang.words(tokens) == [t if not lang.cased else t.lower() for t in tokens if any(c.isalnum() for c in t)]
    assert lang.script.search(text) and not lang.script.search(SAMPLES["en" if code == "fa" else "fa"])
    assert lang.stop_words and all(lang.normalize(word) == word for word in lang.stop_words)
    assert lang.explicit_age(text) == 45
    assert set(lang.scaffold) == {"question", "answer", "instruction"}
    assert lang.glossary_column in _header("glossary.csv")
    assert lang.unknown_column in _header("unknown_phrases.csv")
    assert lang.gender_failures("", [], "context") == []


@pytest.mark.parametrize(
    ("code", "phrase", "gender", "head"),
    [
        ("fa", "مادر داماد", "female", "مادر"),
        ("fa", "پسری که با مادرش زندگی می‌کند", "male", "پسر"),
        ("en", "the groom's mother", "female", "mother"),
        ("en", "Indian businessman", "male", "businessman"),
        ("en", "bank clerk", NONE, "clerk"),
    ],
)
def test_each_language_reads_gender_from_its_head_words(code: str, phrase: str, gender: str, head: str) -> None:
    assert language(code).entity_gender(phrase) == gender
    assert language(code).head_words(phrase)[0] == head


def test_a_translation_into_english_is_checked_for_its_pronouns_persian_has_none_to_check() -> None:
    failures = language("en").gender_failures("A man came. She left.", ["man"], "context")
    assert [failure.code for failure in failures] == ["pronoun_gender"]
    assert language("fa").gender_failures("او رفت.", ["مرد"], "context") == []


def test_the_lm_eval_scaffold_is_each_languages_own() -> None:
    """``lm_eval_utils.py`` is copied into the release and imports nothing of the builder: its scaffold literal
    must say what the language modules say."""
    assert SCAFFOLD and all(dict(language(code).scaffold) == words for code, words in SCAFFOLD.items())


THIRD = """
import re

from pbbq.tasks.text.languages import Language

LANGUAGE = Language(
    code="xx",
    name="Testish",
    script=re.compile(r"[a-z]"),
    normalize=str.strip,
    tokenize=str.split,
    head_words=lambda phrase: phrase.lower().split()[::-1],
    explicit_age=lambda text: 80 if "elder" in text else None,
    scaffold={"question": "Q", "answer": "A", "instruction": "Pick one."},
    glossary_column="term_xx",
    unknown_column="phrase_xx",
    load_stop_words=lambda: ["the"],
    person_gender={"manx": "male", "womanx": "female"},
)
"""


def _clear_cues() -> None:
    """Forget the cues read per entity and language (cached), so none outlives the language that gave it."""
    entity_age_band.cache_clear()
    cues._head_lemmas.cache_clear()


@pytest.fixture
def third_language(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Language]:
    """A language module written to a folder outside the package, the languages in use while the test runs."""
    (tmp_path / "xx.py").write_text(THIRD, encoding="utf-8")
    _clear_cues()
    with languages.using(languages.load_languages([tmp_path])):
        yield language("xx")
    _clear_cues()


def test_a_third_language_is_one_module_and_the_stages_use_it(third_language: Language) -> None:
    """A language module the package was never told about: the registry finds it, the cue rules read its words,
    and the soundness stage checks its translated rows against their Persian with its own gender words."""
    assert third_language.name == "Testish" and {"fa", "en", "xx"} <= set(languages.LANGUAGES)
    assert entity_age_band("elder manx", "xx") == "old"
    templates = pd.DataFrame(
        [template_row("T1", category="Ethnicity", stereo_entities=["مرد لر"], nonstereo_entities=["مرد فارس"])]
    )
    persian = instantiate(templates, STEREOTYPES, InstantiateParams(("نمی‌دانم",)))["examples"]

    def added_genders(lur: str, fars: str) -> int:
        translated = persian.assign(
            example_id=persian["example_id"] + "-xx",
            source_example_id=persian["example_id"],
            lang="xx",
            stereo_entity=persian["stereo_entity"].map({"مرد لر": lur}),
            nonstereo_entity=persian["nonstereo_entity"].map({"مرد فارس": fars}),
        )
        table = soundness(pd.concat([persian, translated], ignore_index=True), templates)
        return int(table.set_index(["config", "check"]).at[("xx", "gender_added"), "violations"])

    assert added_genders("lur manx", "fars manx") == 0
    assert added_genders("lur manx", "fars womanx") == len(persian)
