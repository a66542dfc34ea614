"""Target languages as a list (``[translate] targets``): one translate stage per language, everything downstream
per config, the Urdu stand-ins of the PBBQ sample (``configs/sample-ur.toml``) and lm-eval's ``pbbq_ur``."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pbbq.flows.config import ConfigError, load_config
from pbbq.flows.pipeline import PIPELINE
from pbbq.tasks.core.artifacts import REPO_ROOT, StageOutput
from pbbq.tasks.core.inputs import load_inputs
from pbbq.tasks.evaluation.lm_eval_task import TEMPLATE_TAGS, UTILS_SOURCE, utils_source
from pbbq.tasks.evaluation.lm_eval_utils import SCAFFOLD
from pbbq.tasks.llm import LLMClient, ResponseStore
from pbbq.tasks.text.languages import language
from pbbq.tasks.text.languages.ur import VERB_GENDER
from pbbq.tasks.translate import STAGE, translate, translate_stage
from pbbq.tasks.translate.glossary import load_glossary
from pbbq.tasks.translate.pair import Pair, TranslateParams, segment_schema
from pbbq.tasks.translate.requests import AGREEMENT_INSTRUCTIONS, TranslatePrompts
from pbbq.tasks.translate.segments import question_agreement
from tests.fakes.llm_servers import AnswerFn, FakeLLMServer
from tests.fakes.stand_in_model import StandInModel, _tagged, disambiguated_sample
from tests.fakes.tiny_lm import build_tiny_causal_lm, lm_eval_results
from tests.helpers import llm_config

SAMPLE_UR = REPO_ROOT / "configs" / "sample-ur.toml"
URDU = Pair("fa", "ur", "translate_ur")
KEY = "test.SECRET.key.targets"


# --- configuration and stages ------------------------------------------------------------------------------------


def test_targets_give_one_translate_stage_and_one_config_per_language() -> None:
    build = load_config(SAMPLE_UR)
    folders = [stage.folder for stage in build.pipeline]
    assert folders[folders.index("07_translate") + 1] == "07_translate_ur"
    assert list(build.pipeline.configs) == ["fa", "fa-names", "en", "ur"]
    assert build.params("translate_ur") == build.params("translate") == TranslateParams(min_chrf=40.0)
    sample = [s.folder for s in load_config().pipeline]  # PBBQ's pipeline and the sample's review stage
    assert sample == sorted([s.folder for s in PIPELINE] + ["08_review"]) and "07_translate_ur" not in sample
    urdu = translate_stage("ur", first=False)
    assert (urdu.name, urdu.funnel) == ("translate_ur", {"examples_ur": "Urdu examples (`ur`)"})
    assert set(urdu.outputs["segments"].names) >= {"text_fa", "text_ur", "back_fa"}
    assert STAGE.words[1:] == ("English examples (en)", "examples without an English version (they stay in fa)")


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[translate]\ntargets = "ur"', "targets = 'ur' is not a list of language codes"),
        ('[translate]\ntargets = ["en", "xx"]', "'xx' is not one of "),  # the known ones follow, whichever they are
        ('[translate]\ntargets = ["en", "fa"]', "'fa' is not one of "),
        ('[translate]\ntargets = ["en", "en"]', "names a language twice"),
        ("[translate_ur]\nmin_chrf = 50.0", "unknown section(s) or key(s) translate_ur"),
        ('[translate]\ntargets = ["en", "ur"]\n[translate_ur]\nmin_chrf = 150.0', "[translate_ur] min_chrf = 150.0"),
    ],
)
def test_wrong_targets_are_one_line_naming_the_key(sample_copy: Path, toml: str, message: str) -> None:
    path = sample_copy / "configs" / "wrong.toml"
    path.write_text(f'inherit = "sample.toml"\n{toml}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_configuration_inherits_the_sections_of_a_file_in_its_folder(sample_copy: Path) -> None:
    configs = sample_copy / "configs"
    (configs / "child.toml").write_text(
        'inherit = "sample.toml"\n[translate]\ntargets = ["en", "ur"]\nmin_chrf = 30.0\n[translate_ur]\n'
        "keep_flagged = true\n",
        encoding="utf-8",
    )
    build = load_config(configs / "child.toml")
    assert build.inputs["glossary"] == sample_copy / "annotations" / "glossary.csv"
    assert build.params("translate") == TranslateParams(min_chrf=30.0)
    assert build.params("translate_ur") == TranslateParams(min_chrf=30.0, keep_flagged=True)
    assert build.params("names").seed == 42  # a section it leaves out is the inherited file's
    (sample_copy / "elsewhere.toml").write_text('inherit = "configs/sample.toml"\n', encoding="utf-8")
    (configs / "loop.toml").write_text('inherit = "loop.toml"\n', encoding="utf-8")
    for path in (sample_copy / "elsewhere.toml", configs / "loop.toml"):
        with pytest.raises(ConfigError, match="is not another configuration file in its folder"):
            load_config(path)


def test_urdu_is_told_from_persian_by_the_letters_only_one_of_them_writes() -> None:
    assert URDU.foreign("این مرد به خانه رفت")  # Persian's ه
    assert URDU.foreign("ایک آدمی اور ایک عورت بازار گئے اور وہاں سے سبزی خریدی") is False
    assert not URDU.foreign("نرس")  # a phrase both could write
    assert URDU.foreign("مرد و زن با هم از بازار رفتند و میوه خریدند") and Pair().foreign("He met مرد")
    assert URDU.not_target == "not_urdu" and Pair().not_target == "not_english"
    assert "the Urdu given there" in URDU.instructions["context"]
    assert "in an English sentence" in Pair().instructions["lex"] and "in an Urdu sentence" in URDU.instructions["lex"]


def test_the_release_utils_holds_the_scaffold_of_every_language_it_holds(tmp_path: Path) -> None:
    """A Persian-English release's utils.py is the module's file byte for byte but for its template lines (Python
    comments, ``TEMPLATE_TAGS``); an Urdu config's adds Urdu's words from its Language, and a document gets its own
    language's scaffold."""
    lines = UTILS_SOURCE.read_text(encoding="utf-8").splitlines(keepends=True)
    template_lines = [line for line in lines if line.lstrip().startswith(TEMPLATE_TAGS[::2])]
    assert template_lines, "the module is the release's template: its tags are comments"
    code = "".join(line for line in lines if line not in template_lines)
    assert utils_source(["fa", "fa-names", "en"]) == code
    assert {code: language(code).scaffold for code in SCAFFOLD} == SCAFFOLD
    path = tmp_path / "utils.py"
    path.write_text(utils_source(["fa", "fa-names", "en", "ur"]), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("release_utils", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for code in ("fa", "en", "ur"):
        assert module._scaffold({"lang": code}) == language(code).scaffold
    doc = {"lang": "ur", "context": "سیاق", "question": "کون؟"}
    assert module.doc_to_text(doc).startswith("سیاق") and "سوال: کون؟" in module.doc_to_text(doc)


# --- a pair that fails in Urdu only ------------------------------------------------------------------------------


class UrduBreaker:
    """The sample's stand-in, except that one Persian context's Urdu drops an entity on every attempt (its
    back-translation is that context)."""

    def __init__(self, model: StandInModel, context: str, dropped: str) -> None:
        self.model, self.context = model, context
        self.wrong = model.urdu[context].replace(dropped, "کوئی")

    def __call__(self, body: dict[str, Any]) -> str:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if "Urdu" in body["messages"][0]["content"] and _tagged("persian_text", user) == self.context:
            return self.wrong
        return self.context if _tagged("urdu_text", user) == self.wrong else self.model(body)


@pytest.fixture(scope="module")
def sample_examples(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, StandInModel, dict[str, Any]]:
    """The Persian originals of one template of the sample, from its instantiate stage fed by the stand-in's
    continuations (the templates' own where they have one), the stand-in model and the loaded inputs."""
    from pbbq.tasks.instantiate import instantiate

    build = load_config()
    tables = load_inputs(build.inputs)
    model = StandInModel(tables["templates"], tables["disambiguation_overrides"])
    store = tmp_path_factory.mktemp("disambiguate") / "store.sqlite"
    with FakeLLMServer(answer=model, expected_key=KEY) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_API_KEY", KEY)
        client = LLMClient(llm_config(server, store), ResponseStore(store))
        survey, disambiguated = disambiguated_sample(build, tables, client)
        templates = disambiguated["templates"]
    one = templates[templates["template_id"] == "AGE-02-T1"]
    examples = instantiate(one, survey["stereotypes"], build.instantiate)["examples"]
    return examples, model, tables | {"glossary": load_glossary(build.inputs["glossary"])}


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeLLMServer, LLMClient]]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeLLMServer(expected_key=KEY) as server:
        config = llm_config(server, tmp_path / "store.sqlite")
        yield server, LLMClient(config, ResponseStore(config.store_path))


def _into_english_and_urdu(
    examples: pd.DataFrame, tables: dict[str, Any], llm: LLMClient
) -> tuple[StageOutput, StageOutput]:
    """The examples translated into English and into Urdu (the translate stage's outputs), default parameters."""
    english, urdu = (
        translate(
            examples,
            tables["unknown_phrases"],
            tables["glossary"],
            TranslatePrompts.load(source=target.source, target=target.target),
            llm,
            TranslateParams(),
            target,
        )
        for target in (Pair(), URDU)
    )
    return english, urdu


def _english_whole(
    examples: pd.DataFrame, tables: dict[str, Any], client: tuple[FakeLLMServer, LLMClient], answer: AnswerFn
) -> tuple[StageOutput, StageOutput]:
    """The examples into English and Urdu with the fake server answering by ``answer``; English, which ``answer``
    does not touch, keeps every original and drops none."""
    server, llm = client
    server.answer = answer
    english, urdu = _into_english_and_urdu(examples, tables, llm)
    assert english["dropped"].empty and len(english["examples"]) == len(examples[examples["variant"] == "original"])
    return english, urdu


def test_a_pair_failing_in_urdu_drops_from_urdu_only(
    sample_examples: tuple[pd.DataFrame, StandInModel, dict[str, Any]], client: tuple[FakeLLMServer, LLMClient]
) -> None:
    examples, model, tables = sample_examples
    original = examples[examples["variant"] == "original"]
    first = original.iloc[0]
    pair = (first["stereo_entity"], first["nonstereo_entity"], first["lexical_variant"])
    of_pair = original[
        (original["stereo_entity"] == pair[0])
        & (original["nonstereo_entity"] == pair[1])
        & (original["lexical_variant"] == pair[2])
    ]
    broken = of_pair[of_pair["assignment"] == "biased"]["context"].iloc[0]
    english, urdu = _english_whole(examples, tables, client, UrduBreaker(model, broken, model.urdu[pair[1]]))
    assert set(of_pair["example_id"] + "-en") <= set(english["examples"]["example_id"])
    dropped = urdu["dropped"].set_index("source_example_id")["reason"]
    assert set(dropped.index) == set(of_pair["example_id"])
    assert dropped[of_pair[of_pair["context"] == broken]["example_id"]].eq("failed_validation").all()
    assert set(dropped) == {"failed_validation", "pair_incomplete"}
    assert len(urdu["examples"]) == len(original) - len(of_pair)
    review = urdu["review"].set_index("text_fa")
    assert review.at[broken, "failures"] == "entity_missing" and review.at[broken, "attempts"] == 3
    assert urdu.report["stage"] == "translate_ur" and urdu.report["failures_by_rule"] == {"entity_missing": 3}
    kept = urdu["examples"]
    assert set(kept["lang"]) == {"ur"} and kept["example_id"].str.endswith("-ur").all()
    entity_options = [
        text for row in kept.itertuples() for text in (row.ans0, row.ans1, row.ans2) if text in model.urdu.values()
    ]
    assert entity_options and not any(text.startswith("The ") for text in entity_options)


# --- a question's agreement with the gender of its pair ----------------------------------------------------------


def test_urdu_asks_about_two_women_in_the_feminine_and_english_asks_as_before() -> None:
    """Urdu verbs agree with their subject, so a question has one translation per pair's gender; English's
    segments, keys and schema are as they were."""
    fa, en, ur = language("fa"), language("en"), language("ur")
    assert ur.marks_gender_on_verbs and not en.marks_gender_on_verbs and not fa.marks_gender_on_verbs
    women, mixed = ("زن شیرازی", "دختر دانشجو"), ("زن شیرازی", "مرد کاشانی")
    assert question_agreement(women, fa, ur) == "feminine" and question_agreement(mixed, fa, ur) == "masculine"
    assert question_agreement(women, fa, en) == "" and question_agreement(("جوان", "پیرزن"), fa, ur) == "masculine"
    assert "agreement" in segment_schema(fa, ur).names and "agreement" not in segment_schema(fa, en).names
    question = "بچے کی دیکھ بھال کون نہیں سنبھال {}؟"
    [failure] = ur.gender_failures(question.format("سکا"), ["عورت", "لڑکی"], "question")
    assert failure.code == "verb_gender" and "'سکا' is masculine" in failure.message
    assert ur.gender_failures(question.format("سکی"), ["عورت", "لڑکی"], "question") == []
    assert ur.gender_failures(question.format("سکا"), ["عورت", "آدمی"], "question") == []


class MasculineForWomen:
    """The sample's stand-in, except that it answers one Persian question about two women with the masculine on
    every attempt (its back-translation is that question)."""

    def __init__(self, model: StandInModel, question: str) -> None:
        self.model, self.question = model, question
        self.wrong = model.urdu_questions[question, "masculine"]

    def __call__(self, body: dict[str, Any]) -> str:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        women = AGREEMENT_INSTRUCTIONS["feminine"] in body["messages"][0]["content"]
        if women and _tagged("persian_text", user) == self.question:
            return self.wrong
        return self.model(body)


def test_a_masculine_question_about_two_women_drops_their_pair_from_urdu_only(
    sample_examples: tuple[pd.DataFrame, StandInModel, dict[str, Any]], client: tuple[FakeLLMServer, LLMClient]
) -> None:
    examples, model, tables = sample_examples
    original = examples[examples["variant"] == "original"]
    fa = language("fa")
    women = original[
        original["stereo_entity"].map(fa.entity_gender).eq("female")
        & original["nonstereo_entity"].map(fa.entity_gender).eq("female")
    ]
    assert len(set(zip(women["stereo_entity"], women["nonstereo_entity"], strict=True))) == 1
    question = women["question"].iloc[0]
    _, urdu = _english_whole(examples, tables, client, MasculineForWomen(model, question))
    dropped = urdu["dropped"].set_index("source_example_id")["reason"]
    assert set(dropped.index) == set(women["example_id"])
    assert dropped[women[women["question"] == question]["example_id"]].eq("failed_validation").all()
    assert dropped[women[women["question"] != question]["example_id"]].eq("pair_incomplete").all()
    review = urdu["review"]
    assert len(review) == 1 and review.iloc[0]["segment_id"].endswith("-feminine")
    assert (review.iloc[0]["agreement"], review.iloc[0]["failures"], review.iloc[0]["attempts"]) == (
        "feminine",
        "verb_gender",
        3,
    )
    assert urdu.report["failures_by_rule"] == {"verb_gender": 3}
    others = urdu["examples"]
    assert len(others) == len(original) - len(women) and not set(women["example_id"]) & set(others["source_example_id"])


# --- the sample built into English and Urdu ----------------------------------------------------------------------


def test_the_sample_builds_urdu_with_its_checks_tables_tasks_and_card(urdu_build: Path) -> None:
    release = urdu_build / "10_publish" / "hub"
    urdu = pd.read_parquet(release / "data" / "ur")
    english = pd.read_parquet(release / "data" / "en")
    assert len(urdu) == 3744 and set(urdu["lang"]) == {"ur"} and len(english) == 3708
    assert not urdu["context"].str.contains("[\u0647\u06c0]").any()  # no Persian-only letter in the Urdu
    report = json.loads((urdu_build / "07_translate_ur" / "report.json").read_text(encoding="utf-8"))
    assert report["counts"]["in"] == 3744 and report["stage"] == "translate_ur"
    soundness = pd.read_parquet(urdu_build / "09_statistics" / "soundness.parquet")
    checks = soundness[soundness["config"] == "ur"]
    assert len(checks) == len(soundness[soundness["config"] == "en"]) and checks["violations"].eq(0).all()
    table1 = pd.read_parquet(urdu_build / "09_statistics" / "table1.parquet").set_index(["config", "category"])
    assert table1.at[("ur", "Total"), "samples"] == 3744
    funnel = pd.read_parquet(urdu_build / "09_statistics" / "funnel.parquet").set_index("step")["count"]
    assert funnel["examples_ur"] == 3744
    table2 = pd.read_parquet(urdu_build / "08_diversity" / "table2_instances.parquet")
    overall = table2[(table2["config"] == "ur") & (table2["category"] == "Overall")].iloc[0]
    assert overall["n_units"] > 0 and 0 < overall["ttr"] < 1
    tasks = {path.name for path in (release / "lm_eval").iterdir()}
    assert {"pbbq_ur.yaml", "pbbq_ur_gen.yaml", "pbbq_ur_age.yaml"} <= tasks
    assert '"ur": {"question": "سوال"' in (release / "lm_eval" / "utils.py").read_text(encoding="utf-8")
    card = (release / "README.md").read_text(encoding="utf-8")
    assert "| `ur` | Urdu | Instance-level translation of `fa`" in card
    assert "The English and Urdu configs were translated by people standing in for an LLM" in card
    assert "| Urdu examples (`ur`) | 3,744 |" in card and "`ur` (Urdu)" in card


def test_the_urdu_release_words_groups_and_settings_as_urdu_readers_do(urdu_build: Path) -> None:
    """«فارس» alone reads as the province, not the people; «مخالف جنس پرست» is a calque; rupees move an Iranian
    setting to Pakistan; «ایک طلبہ» is 'one students' (the stand-ins' Urdu, ``prompts/transcripts/stand_ins/``)."""
    urdu = pd.read_parquet(urdu_build / "10_publish" / "hub" / "data" / "ur")
    text = urdu["context"] + " " + urdu["question"] + " " + urdu["ans0"] + " " + urdu["ans1"] + " " + urdu["ans2"]
    for wrong in ("فارس آدمی", "فارس عورت", "مخالف جنس پرست", "روپے", "ایک طلبہ"):
        assert not text.str.contains(wrong).any(), wrong
    for right in ("فارسی النسل عورت", "جنس مخالف کی طرف مائل عورت", "طلبہ کے ٹیلی گرام گروپ", "چھوٹی سی رقم"):
        assert text.str.contains(right).any(), right


def test_lm_eval_runs_pbbq_ur_as_it_runs_pbbq_en(urdu_build: Path, tmp_path: Path) -> None:
    """``lm_eval --include_path <release>/lm_eval --tasks pbbq_ur`` (lm-eval unmodified) with a tiny local model."""
    model = build_tiny_causal_lm(tmp_path / "tiny_lm")
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    results = lm_eval_results(
        model, "pbbq_ur,pbbq_en", urdu_build / "10_publish" / "hub" / "lm_eval", tmp_path, offline
    )
    assert set(results) == {"pbbq_ur", "pbbq_en"}


def test_every_urdu_question_about_two_women_reads_feminine(urdu_build: Path) -> None:
    """Each released Urdu example whose two people are women asks its question in the feminine (no masculine form
    agrees with its کون; 'کس نے …', 'کسے …' agree with something else), from its own segment; English keeps one
    segment per question."""
    ur = language("ur")
    examples = pd.read_parquet(urdu_build / "10_publish" / "hub" / "data" / "ur")
    women = examples[
        examples["stereo_entity"].map(ur.entity_gender).eq("female")
        & examples["nonstereo_entity"].map(ur.entity_gender).eq("female")
    ]
    assert len(women) > 100
    words = {question: ur.tokenize(question) for question in women["question"]}
    about = {question: tokens for question, tokens in words.items() if "کون" in tokens and "نے" not in tokens}
    forms = {question: {VERB_GENDER.get(word) for word in tokens} for question, tokens in about.items()}
    assert not [question for question, genders in forms.items() if "male" in genders]
    assert sum("female" in genders for genders in forms.values()) > 20
    segments = pd.read_parquet(urdu_build / "07_translate_ur" / "segments.parquet")
    questions = segments[segments["kind"] == "question"]
    assert set(questions["agreement"]) == {"feminine", "masculine"} and set(segments["agreement"]) >= {""}
    assert all(sid.endswith(f"-{agreement}") for sid, agreement in questions[["segment_id", "agreement"]].values)
    asked = set(zip(examples["nonstereo_entity"], examples["question"], strict=True))
    assert ("غیر معذور عورت", "ملازمت کی ذمہ داریاں کون نہیں سنبھال سکی؟") in asked
    assert ("غیر معذور آدمی", "ملازمت کی ذمہ داریاں کون نہیں سنبھال سکا؟") in asked  # one Persian question
    english = pd.read_parquet(urdu_build / "07_translate" / "segments.parquet")
    assert "agreement" not in english and english.loc[english["kind"] == "question", "text_fa"].is_unique


def test_urdu_names_a_republican_as_the_glossary_does(urdu_build: Path) -> None:
    """جمهوری‌خواه is a supporter of a republic (جمہوریہ پسند), neither pro-democracy (جمہوریت پسند) nor the US
    party (ریپبلکن), in the glossary and the release."""
    glossary = load_glossary(REPO_ROOT / "annotations" / "glossary.csv").set_index("term_fa")
    assert glossary.at["جمهوری‌خواه", "term_ur"] == "جمہوریہ پسند"
    examples = pd.read_parquet(urdu_build / "10_publish" / "hub" / "data" / "ur")
    entities = set(examples["stereo_entity"]) | set(examples["nonstereo_entity"])
    assert {"جمہوریہ پسند کارکن", "جمہوریہ پسند تجزیہ کار"} & entities
    assert not examples["context"].str.contains("جمہوریت پسند").any()
    assert not examples["context"].str.contains("بچے کی نام").any()
    assert examples["context"].str.contains("بچے کا نام رکھنے کی تقریب").any()
