"""Record the bundled sample's LLM transcript (``prompts/transcripts/sample.jsonl.gz``) from a scripted stand-in.

No model wrote the sample's answers: people did (``stand_ins/``), and ``tests/fakes/stand_in_model.py``
plays them back as a model would answer, behind a local fake OpenAI server, while the real stages and the
real client run in live mode; so the transcript holds exactly the requests the sample build makes. Run it
after changing the sample's templates, the stand-ins or a prompt:

    .venv/bin/python prompts/transcripts/record_sample.py
    .venv/bin/python prompts/transcripts/record_sample.py configs/sample-ur.toml

The second records the sample translated into English and Urdu (``sample-ur.jsonl.gz``, the transcript its
configuration names): one translate stage per target language of ``[translate] targets``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from pbbq.flows.config import load_config  # noqa: E402
from pbbq.tasks.core.inputs import load_inputs  # noqa: E402
from pbbq.tasks.instantiate import instantiate  # noqa: E402
from pbbq.tasks.llm import LLMClient, ResponseStore  # noqa: E402
from pbbq.tasks.translate import PROMPTS, TranslatePrompts, translate  # noqa: E402
from pbbq.tasks.translate.glossary import load_glossary  # noqa: E402
from tests.fakes.llm_servers import FakeLLMServer  # noqa: E402
from tests.fakes.stand_in_model import StandInModel, disambiguated_sample  # noqa: E402

HEADER_NOTE = (
    "Stand-in answers: written by people to stand in for a model's, so that the bundled sample builds offline "
    "(one disambiguation per template, hand-written, including designed rule-breaking first answers; "
    "translations composed from hand-written English templates and phrases, with designed glossary and pronoun "
    "failures; back-translations the source text, a rule-made paraphrase for about a third of them, and two "
    "deliberately poor ones). No model produced them. A real build records its own transcript."
)
URDU_NOTE = (
    " The Urdu translations were composed the same way from hand-written Urdu templates (agreement slots filled "
    "by each person's gender) and phrases; their back-translations are the Persian source."
)


def record(config: Path | None = None) -> int:
    """Run the LLM stages of the sample's configuration (``config``; default: ``configs/sample.toml``) against the
    stand-in model and export what they asked and got to the transcript the configuration names."""
    build = load_config(config)
    transcript = build.transcript
    assert transcript is not None, "the configuration names no transcript"
    tables = load_inputs(build.inputs)
    glossary = load_glossary(build.inputs["glossary"])
    model = StandInModel(tables["templates"], tables["disambiguation_overrides"])
    with tempfile.TemporaryDirectory() as scratch, FakeLLMServer(answer=model) as server:
        os.environ[build.llm.api_key_env] = "stand-in-no-key"
        llm = dataclasses.replace(
            build.llm, mode="live", base_url=server.openai_base_url, store_path=Path(scratch) / "store.sqlite"
        )
        store = ResponseStore(llm.store_path)
        client = LLMClient(llm, store)
        survey, templates = disambiguated_sample(build, tables, client)
        examples = instantiate(templates["templates"], survey["stereotypes"], build.instantiate)["examples"]
        translations = {}
        for stage in build.pipeline:
            if stage.run is translate:
                pair = stage.inputs["pair"].load()
                prompts = TranslatePrompts.load(PROMPTS, pair.source, pair.target)
                translations[stage.name] = translate(
                    examples, tables["unknown_phrases"], glossary, prompts, client, build.params(stage.name), pair
                )
        note = HEADER_NOTE + (URDU_NOTE if "translate_ur" in translations else "")
        count = store.export_jsonl(transcript, header={"note": note, "model": llm.model})
    print(f"{count} answers → {transcript}")
    print(f"disambiguate: {templates.report['sources']}, review: {len(templates['review'])} answers")
    for name, output in translations.items():
        print(f"{name}: {output.report['counts']}, dropped: {output.report['dropped']['by_reason']}")
    return count


if __name__ == "__main__":
    record(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
