"""A build's own language modules (``[languages] modules``): a team adds a language without forking the builder.

The files and folders a configuration names join its languages (a value of the build, not the process's) before
its targets are checked, a stage's cache key hashes their files, and a folder that is missing or holds no language
is one line. ``pbbq synth --targets N`` writes such a folder of synthetic languages and answers every target in its
transcript. Languages declared as TOML data: tests/test_language_files.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pbbq.flows.cli import main
from pbbq.flows.config import ConfigError, load_config
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.code_hash import stage_code_hash
from pbbq.tasks.synth import SynthError, synthesize, target_codes
from pbbq.tasks.text import languages
from pbbq.tasks.translate import translate
from pbbq.tasks.translate.pair import Pair
from pbbq.tasks.translate.requests import prompt_files

SEED = 7
MODULE = '''"""A test language: English under the code {code}."""
from dataclasses import replace
from pathlib import Path

from pbbq.tasks.text.languages import en

LANGUAGE = replace(en.LANGUAGE, code="{code}", name="Testish", glossary_column="term_{code}",
                   unknown_column="phrase_{code}", prompts=Path(__file__).parent)
'''


def _prompts(folder: Path, code: str) -> None:
    """The Persian → English prompts under the pair name of ``code`` in ``folder``."""
    for name in prompt_files(languages.language("fa"), languages.language("en")):
        renamed = name.replace("fa-en", f"fa-{code}").replace("en-fa", f"{code}-fa")
        shutil.copy(REPO_ROOT / "prompts" / name, folder / renamed)


def _config(sample_copy: Path, modules: str, targets: str = '["en", "xq"]') -> Path:
    """The sample's configuration (a copy, in its ``configs`` folder, which the module folders are relative to) with
    ``[languages] modules`` and ``[translate] targets``."""
    path = sample_copy / "configs" / "mine.toml"
    text = f'inherit = "sample.toml"\n\n[languages]\nmodules = {modules}\n\n[translate]\ntargets = {targets}\n'
    path.write_text(text, encoding="utf-8")
    return path


def test_a_configuration_adds_its_own_languages_and_their_modules_key_the_stages(sample_copy: Path) -> None:
    (sample_copy / "configs" / "mine").mkdir()
    module = sample_copy / "configs" / "mine" / "xq.py"
    module.write_text(MODULE.format(code="xq"), encoding="utf-8")
    _prompts(module.parent, "xq")
    before = stage_code_hash(translate)
    build = load_config(_config(sample_copy, '["mine"]'))
    assert build.languages == (sample_copy / "configs" / "mine",)
    assert [s.folder for s in build.pipeline if s.name.startswith("translate")] == ["07_translate", "07_translate_xq"]
    assert build.registry["xq"].name == "Testish" and "xq" not in languages.LANGUAGES
    with languages.using(build.registry):
        added = stage_code_hash(translate)
    assert added != before  # the stage's key hashes the added module
    module.write_text(MODULE.format(code="xq") + "# edited\n", encoding="utf-8")
    with languages.using(load_config(_config(sample_copy, '["mine"]')).registry):
        assert stage_code_hash(translate) != added  # and its edits


SINDHI_LIKE = '''"""A test language sharing Urdu's script, told from Persian and Urdu by letters of its own."""
from dataclasses import replace

from pbbq.tasks.text.languages import ur

LANGUAGE = replace(ur.LANGUAGE, code="xs", name="Testish", own_letters="\u067b\u0684", option_article="Ye ")
'''


def test_a_language_module_brings_its_own_letters_and_option_article(tmp_path: Path) -> None:
    """What tells a language's text apart in a shared script, and the article before an option, are the language
    module's: the translate stage keeps no table of them."""
    (tmp_path / "xs.py").write_text(SINDHI_LIKE, encoding="utf-8")
    with languages.using(languages.load_languages([tmp_path])):
        _letters_and_article()


def _letters_and_article() -> None:
    into_xs, into_ur = Pair("fa", "xs"), Pair("fa", "ur")
    sentence = "یہ ایک لمبا جملہ ہے جس میں آٹھ سے زیادہ الفاظ ہیں"  # Urdu letters, none of xs's own
    assert into_xs.foreign(sentence) and not into_ur.foreign(sentence)
    assert not into_xs.foreign(sentence + " ٻ")
    assert languages.language("xs").option_article == "Ye "
    assert languages.language("en").option_article == "The " and languages.language("ur").option_article == ""


@pytest.mark.parametrize(
    ("modules", "message"),
    [
        ('["absent"]', r"\[languages\] modules: language file or folder .*absent does not exist"),
        ('["empty"]', r"\[languages\] modules: language folder .*empty holds no language"),
        ('"mine"', r"\[languages\] modules = 'mine' is not a list of files or folders"),
    ],
)
def test_a_missing_or_empty_module_folder_is_one_line(sample_copy: Path, modules: str, message: str) -> None:
    (sample_copy / "configs" / "empty").mkdir()
    (sample_copy / "configs" / "empty" / "notes.py").write_text("X = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_config(_config(sample_copy, modules))


def test_a_target_no_module_defines_is_named_with_the_known_ones(sample_copy: Path) -> None:
    """The known languages are named, whichever they are (a build may add some): never pinned here."""
    with pytest.raises(ConfigError, match=r"targets = \['en', 'xq'\]: 'xq' is not one of (\w+, )*en, (\w+, )*ur\b"):
        load_config(_config(sample_copy, "[]"))


def test_synth_translates_into_english_and_synthetic_languages(tmp_path: Path) -> None:
    assert target_codes(3) == ("en", "xa", "xb")
    with pytest.raises(SynthError, match="--targets 0 must be between 1 and 27"):
        target_codes(0)
    result = synthesize(tmp_path / "tiny", "tiny", SEED, read_config=load_config, targets=3)
    assert list(result.counts.columns[-4:]) == ["fa", "en", "xa", "xb"]
    assert (result.counts["xb"] == result.counts["fa"]).all() and result.counts["fa"].sum() > 0
    module = (tmp_path / "tiny" / "languages" / "xa.py").read_text(encoding="utf-8")
    assert module.startswith('"""SYNTHETIC language')
    prompt = (tmp_path / "tiny" / "languages" / "prompts" / "translate.fa-xa.txt").read_text(encoding="utf-8")
    assert prompt.startswith("SYNTHETIC prompt")
    build = load_config(tmp_path / "tiny" / "build.toml")
    assert build.languages == (tmp_path / "tiny" / "languages",)
    assert build.registry["xb"].prompts == tmp_path / "tiny" / "languages" / "prompts"
    assert [s.name for s in build.pipeline if s.name.startswith("translate")] == [
        "translate",
        "translate_xa",
        "translate_xb",
    ]


def test_synth_refuses_a_count_of_targets_it_cannot_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synth", "--scale", "tiny", "--targets", "28", "--out", str(tmp_path / "x")]) == 1
    assert capsys.readouterr().err.strip() == "pbbq: error: --targets 28 must be between 1 and 27"
    assert not (tmp_path / "x").exists()
