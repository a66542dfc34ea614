"""Record the adaptation sample's LLM transcript (``prompts/transcripts/adapt-sample.jsonl``) from a scripted stand-in.

No model wrote the adaptation sample's answers: people did (``stand_ins/adapt/``), and
``tests/fakes/stand_in_adapt.py`` plays them back as a model would answer, behind a local fake OpenAI server,
while the stages of ``configs/adapt-sample.toml``'s pipeline and the real client run in live mode, up to the last
stage that asks a model; so the transcript holds exactly the requests the sample build makes. Run it after
changing the sample's sheet, the stand-ins, a prompt or the pipeline's LLM stages:

    .venv/bin/python prompts/transcripts/record_adapt_sample.py
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from pbbq.flows.config import load_config  # noqa: E402
from pbbq.tasks.core.artifacts import REPO_ROOT, StageOutput  # noqa: E402
from pbbq.tasks.core.stage import Client, Sources, arguments, finish, load_inputs  # noqa: E402
from pbbq.tasks.llm import LLMClient, ResponseStore  # noqa: E402
from tests.fakes.llm_servers import FakeLLMServer  # noqa: E402
from tests.fakes.stand_in_adapt import StandInAdapt  # noqa: E402

CONFIG = REPO_ROOT / "configs" / "adapt-sample.toml"
TRANSCRIPT = HERE / "adapt-sample.jsonl"
HEADER_NOTE = (
    "Stand-in answers: written by people to stand in for a model's, so that the adaptation sample builds offline "
    "(Urdu translations composed from hand-written Urdu templates and phrases, stand_ins/adapt/; back-translations "
    "the English they were answered for). No model produced them. A real build records its own transcript."
)


def record(config: Path = CONFIG, transcript: Path = TRANSCRIPT) -> int:
    """Run the configuration's pipeline up to its last stage that asks a model, against the stand-in, and export
    what it asked and got; returns the number of answers."""
    build = load_config(config)
    tables = load_inputs(build.pipeline.inputs(), build.input_paths())
    asking = [i for i, stage in enumerate(build.pipeline) if any(isinstance(s, Client) for s in stage.inputs.values())]
    stages = build.pipeline[: asking[-1] + 1] if asking else ()
    with tempfile.TemporaryDirectory() as scratch, FakeLLMServer(answer=StandInAdapt()) as server:
        os.environ[build.llm.api_key_env] = "stand-in-no-key"
        llm = dataclasses.replace(
            build.llm, mode="live", base_url=server.openai_base_url, store_path=Path(scratch) / "store.sqlite"
        )
        store = ResponseStore(llm.store_path)
        client = LLMClient(llm, store)
        outputs: dict[str, StageOutput] = {}
        for stage in stages:
            params: Any = build.params(stage.name) if stage.params else None
            found = arguments(
                stage, params, Sources(tables, outputs, lambda: client, {"example_cap": build.example_cap})
            )
            outputs[stage.folder] = finish(stage, stage.run(**found), params)
            print(f"{stage.folder}: {outputs[stage.folder].report.get('counts')}")
        count = store.export_jsonl(transcript, header={"note": HEADER_NOTE, "model": llm.model})
    print(f"{count} answers → {transcript}")
    return count


if __name__ == "__main__":
    record()
