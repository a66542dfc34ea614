"""A language from the user's own folder (docs/languages.md): a TOML file declaring the ``Language`` fields, which may
include another, its prompt files beside it, named by a build's ``[languages] modules``; nothing written into the
builder, nothing that another build in the same process sees. Turkish (``tests/data/languages/tr``) is the language
the repository does not have: copied to a folder outside it, it is the adaptation sample's target, built offline
with stand-in answers, and its translations are checked by the language identifier like any pair of one script.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.cli import main
from pbbq.flows.config import ConfigError, load_config
from pbbq.tasks.core.artifacts import REPO_ROOT, StageOutput
from pbbq.tasks.core.inputs import load_inputs as load_input_files
from pbbq.tasks.core.stage import Sources, arguments, finish, load_inputs
from pbbq.tasks.disambiguate import Prompts, disambiguate
from pbbq.tasks.instantiate import instantiate
from pbbq.tasks.kappa_gate import kappa_gate
from pbbq.tasks.llm import LLMClient
from pbbq.tasks.llm.stand_in import StandInAnswerer
from pbbq.tasks.survey_filter import survey_filter
from pbbq.tasks.text import languages
from pbbq.tasks.text.languages import UnknownLanguageError, language, load_languages, using
from pbbq.tasks.translate.checks import translation_failures
from pbbq.tasks.translate.glossary import load_glossary
from pbbq.tasks.translate.pair import Pair
from pbbq.tasks.translate.requests import TranslatePrompts, back_request, forward_request

TURKISH = REPO_ROOT / "tests" / "data" / "languages" / "tr"
GLOSSARY_TR = {
    "Afghan": "Afgan",
    "American": "Amerikalı",
    "Bangladeshi": "Bangladeşli",
    "British": "İngiliz",
    "Chinese": "Çinli",
    "Indian": "Hintli",
    "Iranian": "İranlı",
    "Nigerian": "Nijeryalı",
    "Saudi": "Suudi",
    "Turkish": "Türk",
    "Muslim": "Müslüman",
    "Hindu": "Hindu",
    "Christian": "Hristiyan",
    "Sikh": "Sih",
    "Ahmadi": "Ahmedi",
    "Atheist": "Ateist",
    "Sunni": "Sünni",
    "Shia": "Şii",
    "Pashtun": "Peştun",
    "Punjabi": "Pencaplı",
    "Sindhi": "Sindli",
}
"""Each group of the adaptation sample's glossary in Turkish (``term_tr``)."""
UNKNOWN_TR = {
    "Unknown": "Bilinmiyor",
    "Cannot be determined": "Belirlenemez",
    "Can't be determined": "Belirlenemiyor",
    "Not answerable": "Cevaplanamaz",
    "Not known": "Belli değil",
    "Not enough info": "Yeterli bilgi yok",
    "Not enough information": "Bilgi yetersiz",
    "Cannot answer": "Cevap verilemez",
    "Can't answer": "Cevaplanamıyor",
    "Undetermined": "Belirsiz",
}
"""BBQ's 'unknown' phrasings in Turkish (``phrase_tr``)."""


@pytest.fixture
def turkish(tmp_path: Path) -> Path:
    """The Turkish language files in a folder outside the repository."""
    return Path(shutil.copytree(TURKISH, tmp_path / "my-languages" / "tr"))


def _tree_hash(*folders: Path) -> str:
    digest = hashlib.sha256()
    for folder in folders:
        for file in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(str(file.relative_to(REPO_ROOT)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def _turkish_config(sample_copy: Path, turkish: Path) -> Path:
    """The adaptation sample's configuration (a copy) into Turkish, its glossary and 'unknown' list with Turkish
    columns."""
    bbq = sample_copy / "annotations" / "bbq"
    glossary = pd.read_csv(bbq / "glossary-pakistan-sample.csv")
    glossary.insert(2, "term_tr", glossary["term_en"].map(GLOSSARY_TR))
    glossary.to_csv(bbq / "glossary-pakistan-sample.csv", index=False)
    unknown = pd.read_csv(bbq / "unknown-phrases.csv")
    unknown["phrase_tr"] = unknown["phrase_en"].map(UNKNOWN_TR)
    unknown.to_csv(bbq / "unknown-phrases.csv", index=False)
    config = sample_copy / "configs" / "adapt-tr.toml"
    config.write_text(
        f'inherit = "adapt-sample.toml"\n\n[languages]\nmodules = ["{turkish / "tr.toml"}"]\n\n'
        '[translate]\ntargets = ["tr"]\n',
        encoding="utf-8",
    )
    return config


@pytest.mark.usefixtures("prefect_server")
def test_a_language_from_outside_builds_the_adaptation_sample_offline(
    sample_copy: Path, turkish: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Done when (issue 36): Turkish, from a folder outside the repository, is the adaptation sample's target;
    the build completes with stand-in answers, releases a ``tr`` config with its own lm-eval tasks and card row,
    and no file under tasks/ or prompts/ changes."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    before = _tree_hash(REPO_ROOT / "tasks", REPO_ROOT / "prompts")
    config = _turkish_config(sample_copy, turkish)
    outputs = tmp_path / "outputs"
    command = ["build", "--config", str(config), "--outputs", str(outputs), "--run-id", "tr", "--stand-in"]
    assert main(command) == 0
    run = outputs / "tr"
    hub = run / "10_publish" / "hub"
    released = pd.concat([pd.read_parquet(p) for p in sorted((hub / "data" / "tr").glob("*.parquet"))])
    assert len(released) > 0 and set(released["lang"]) == {"tr"}
    assert released["context"].str.contains("STAND-IN").all()  # the stand-in's placeholders, labelled
    assert sorted(p.name for p in (hub / "lm_eval").glob("*_tr_*.yaml")), "no lm-eval task of the tr config"
    card = (hub / "README.md").read_text(encoding="utf-8")
    assert "Turkish" in card and "config_name: tr" in card
    report = json.loads((run / "07_translate" / "report.json").read_text(encoding="utf-8"))
    assert report["language_id"].startswith("not asked")  # recorded as skipped, never silently
    assert report["counts"]["failed_validation"] == 0
    assert _tree_hash(REPO_ROOT / "tasks", REPO_ROOT / "prompts") == before
    assert "tr" not in languages.LANGUAGES  # the build's languages stayed the build's


def test_the_same_check_drops_an_untranslated_english_sentence_in_turkish(turkish: Path) -> None:
    """English → Turkish, one script: an English sentence, or an English word left in a Turkish one, is not
    Turkish; a Turkish sentence with Turkish words spelled as English ones ('at', a horse) is."""
    with using(load_languages([turkish / "tr.toml"])):
        pair = Pair("en", "tr")
        sentence = "I got an email from a Saudi man today."
        assert [f.code for f in translation_failures("context", sentence, sentence, {}, [], pair)] == ["not_turkish"]
        left = translation_failures(
            "context", "If Ali comes, we start.", "Eğer if Ali gelirse, başlarız.", {}, [], pair
        )
        assert [(f.code, f.message) for f in left] == [
            ("not_turkish", 'The answer leaves English words untranslated ("if"): translate all of it into Turkish.')
        ]
        assert not pair.foreign("Bugün Suudi bir adamdan e-posta aldım.")
        assert not pair.foreign("Ali at'a bindi ve köye gitti.")
        assert not pair.foreign("Suudi adam")


def test_persian_to_urdu_and_english_to_a_third_script(tmp_path: Path) -> None:
    """Persian → Urdu (one script): a Persian sentence is not Urdu, by its letters and by the identifier; English
    → Russian (a third script, declared in a few lines): Latin letters are not Russian, Cyrillic ones are."""
    persian_urdu = Pair("fa", "ur")
    assert persian_urdu.foreign("امروز از یک مرد سعودی ایمیل گرفتم و خیلی خوشحال شدم.")
    assert not persian_urdu.foreign("آج مجھے ایک سعودی آدمی کی ای میل ملی اور میں بہت خوش ہوا۔")
    (tmp_path / "ru.toml").write_text(
        'code = "ru"\nname = "Russian"\nscript = "Cyrillic"\n'
        '[scaffold]\nquestion = "Вопрос"\nanswer = "Ответ"\ninstruction = "Ответьте буквой одного варианта."\n',
        encoding="utf-8",
    )
    with using(load_languages([tmp_path / "ru.toml"])):
        russian = Pair("en", "ru")
        assert not russian.shares_script
        assert russian.foreign("Таксист снова опоздал, driver.")
        assert not russian.foreign("Таксист снова опоздал.")


def test_a_language_toml_includes_another_and_its_keys_win(turkish: Path) -> None:
    """``include``: the base's keys (turkic.toml: casing, suffixing, head) under the language's own."""
    with using(load_languages([turkish])):
        turkish_language = language("tr")
        assert turkish_language.suffixing and turkish_language.lower("IŞIK İZMİR") == "ışık izmir"
        assert turkish_language.entity_gender("yaşlı adam") == "male"
        assert turkish_language.entity_gender("Müslüman kadın") == "female"
        assert turkish_language.explicit_age("70 yaşında bir adam") == 70
        assert turkish_language.mention("Suudi adam").search("Suudi adamdan e-posta aldım")
        assert turkish_language.prompts == turkish / "prompts"


def test_stand_in_answers_any_pair_of_the_build(turkish: Path) -> None:
    """The stand-in answers English → Turkish and English → Urdu with placeholders that pass the target's checks,
    and a back-translation with the source it was answered for."""
    answerer = StandInAnswerer()
    with using(load_languages([turkish])):
        for target, saudi in (("tr", "Suudi"), ("ur", "سعودی")):
            pair = Pair("en", target)
            segment = {
                "segment_id": "entity-1",
                "kind": "entity",
                "glossary": [("Saudi", saudi)],
                "text_en": "Saudi man",
            }
            prompts = TranslatePrompts.load(language(target).prompts or REPO_ROOT / "prompts", pair.source, pair.target)
            request = forward_request(segment, {}, prompts, pair)
            assert request.languages == ("en", target)
            answer = answerer.text(request)
            placeholder = Pair("en", target, placeholders=True)
            assert translation_failures("entity", "Saudi man", answer, {}, segment["glossary"], placeholder) == []
            assert language(target).entity_gender(answer) == "male"
            assert answerer.text(back_request("entity-1", answer, prompts, pair)) == "Saudi man"


def test_a_folder_without_a_language_runs_none_of_its_modules(tmp_path: Path) -> None:
    """Issue 35 item 8: a folder's Python files are read, not run, until one is known to define a language."""
    (tmp_path / "notes.py").write_text("import sys\nsys.exit(0)\n", encoding="utf-8")
    with pytest.raises(UnknownLanguageError, match="holds no language"):
        load_languages([tmp_path])


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import sys\nsys.exit(0)\nLANGUAGE = None\n", r"xz\.py: the language module exited \(SystemExit 0\)"),
        ("import no_such_module\nLANGUAGE = None\n", r"xz\.py: the language module failed to load \(ModuleNotFound"),
        ("LANGUAGE = 1\n", r"xz\.py: LANGUAGE is not a Language"),
    ],
)
def test_a_language_module_that_fails_or_exits_is_one_line_naming_it(
    sample_copy: Path, source: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35 item 8: a module's import error or SystemExit is one line naming the module, and never exit 0."""
    (sample_copy / "configs" / "xz.py").write_text(source, encoding="utf-8")
    config = sample_copy / "configs" / "mine.toml"
    config.write_text('inherit = "sample.toml"\n[languages]\nmodules = ["xz.py"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_config(config)
    assert main(["build", "--config", str(config), "--outputs", str(sample_copy / "out")]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("pbbq: error: ") and "xz.py" in error[0]


def test_a_target_without_its_prompt_files_is_caught_at_load(tmp_path: Path) -> None:
    """Issue 35 item 9: ``targets = ["fa"]`` on the adaptation path (English → Persian has no prompts) is one line
    at load naming the missing prompt files."""
    config = tmp_path / "build.toml"
    sample = REPO_ROOT / "configs" / "adapt-sample.toml"
    text = sample.read_text(encoding="utf-8").replace('targets = ["ur"]', 'targets = ["fa"]')
    config.write_text(text.replace('"../', f'"{REPO_ROOT}/'), encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_config(config)
    message = str(error.value)
    assert message.startswith(f"{config}: [translate] translate: missing prompt file(s) ")
    assert "translate.en-fa.txt" in message and "back_translate.fa-en.txt" in message and "\n" not in message


def test_two_builds_in_one_process_keep_their_own_languages(sample_copy: Path, turkish: Path) -> None:
    """Loading a build's languages changes nothing another build sees: the registry is the build's value."""
    config = _turkish_config(sample_copy, turkish)
    build = load_config(config)
    assert "tr" in build.registry and "tr" not in languages.LANGUAGES
    assert [s.name for s in build.pipeline if s.name.startswith("translate")] == ["translate"]
    plain = load_config(REPO_ROOT / "configs" / "adapt-sample.toml")
    assert "tr" not in plain.registry
    with pytest.raises(UnknownLanguageError):
        language("tr")


def test_real_turkish_translations_pass_the_turkish_checks(turkish: Path) -> None:
    """The seeded sample of Turkish translations (written by a helper standing in for a model) passes every check
    of the pair, the language identifier's included: the check drops English, not Turkish ('Western Union' in it)."""
    lines = (TURKISH / "adapt-sample-tr.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines[1:]]
    assert len(records) == json.loads(lines[0])["records"] == 31
    with using(load_languages([turkish])):
        pair = Pair("en", "tr")
        for record in records:
            message = record["request"]["messages"][0][1]
            blocks = dict(re.findall(r"<(\w+)>\n(.*?)\n</\1>", message, flags=re.DOTALL))
            pairs = {
                tag: [tuple(line.split(" → ")) for line in blocks[tag].splitlines() if " → " in line]
                for tag in ("glossary", "phrases")
            }
            kind = "context" if pairs["phrases"] else "question" if blocks["english_text"].endswith("?") else "entity"
            failures = translation_failures(
                kind, blocks["english_text"], record["response"], dict(pairs["phrases"]), pairs["glossary"], pair
            )
            assert failures == [], (record["response"], failures)


def test_stand_in_answers_the_adaptation_sample_in_urdu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--stand-in`` on the adaptation path (English → Urdu: 'no <persian_text> block in the request' before):
    every example translated, no answer breaking a rule of its target."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    build = load_config(REPO_ROOT / "configs" / "adapt-sample.toml").with_stand_in()
    client = LLMClient(dataclasses.replace(build.llm, store_path=tmp_path / "store.sqlite"))
    with using(build.registry):
        tables = load_inputs(build.pipeline.inputs(), build.input_paths())
        outputs: dict[str, StageOutput] = {}
        for stage in build.pipeline:
            params = build.params(stage.name) if stage.params else None
            found = arguments(
                stage, params, Sources(tables, outputs, lambda: client, {"example_cap": build.example_cap})
            )
            outputs[stage.folder] = finish(stage, stage.run(**found), params)
            if stage.name == "translate":
                break
    report = outputs["07_translate"].report
    assert report["counts"]["failed_validation"] == 0 and report["counts"]["out"] == report["counts"]["in"] > 0
    assert report["language_id"].startswith("not asked")


def test_stand_in_answers_a_further_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--stand-in`` into a second target (Persian → Urdu, stage ``translate_ur``: 'no stand-in for stage
    translate_ur' before): a template of each category's examples translated, none breaking a rule of Urdu."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    build = load_config(REPO_ROOT / "configs" / "sample-ur.toml").with_stand_in()
    client = LLMClient(dataclasses.replace(build.llm, store_path=tmp_path / "store.sqlite"))
    tables = load_input_files(build.inputs)
    survey = survey_filter(tables["questionnaire"], tables["responses"], build.survey_filter)
    gate = kappa_gate(tables["templates"], tables["ratings"], survey["stereotypes"], build.kappa_gate)
    gated = gate["gated"].groupby("category").head(1)
    no_overrides = tables["disambiguation_overrides"].iloc[0:0]
    done = disambiguate(gated, survey["stereotypes"], no_overrides, Prompts.load(), client, build.disambiguate)
    examples = instantiate(done["templates"], survey["stereotypes"], build.instantiate)["examples"]
    stage = next(s for s in build.pipeline if s.name == "translate_ur")
    loaded = {name: source.load() for name, source in stage.inputs.items() if name in ("prompts", "pair")}
    glossary = load_glossary(build.inputs["glossary"])
    urdu = stage.run(
        examples, tables["unknown_phrases"], glossary, client=client, **loaded, params=build.params("translate_ur")
    )
    assert (urdu["segments"]["failures"] == "").all() and urdu.report["counts"]["out"] == len(examples) > 0
