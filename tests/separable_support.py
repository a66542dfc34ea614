"""The sample's stages run in this process, without Prefect (the stage functions and the sample's transcript in
replay mode): the arguments of a stage of the sample build, for the tests of stages that split by template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pbbq.flows.build_pbbq import load_build_inputs
from pbbq.flows.config import load_config
from pbbq.tasks.core.artifacts import StageOutput
from pbbq.tasks.core.stage import Sources, arguments, finish
from pbbq.tasks.llm import open_llm


def sample_arguments(folder: str, scratch: Path, config: Path | None = None) -> dict[str, Any]:
    """The arguments the sample build (or the build of ``config``) gives the stage in ``folder``: every stage before
    it run on the sample."""
    build = load_config(config)
    llm = build.llm.__class__(**{**build.llm.__dict__, "store_path": scratch / "responses.sqlite"})
    client = open_llm(llm, build.transcript)
    inputs = load_build_inputs(build, scratch, log=lambda line: None)
    outputs: dict[str, StageOutput] = {}
    sources = Sources(inputs.tables, outputs, lambda: client)
    for stage in build.pipeline:
        params = build.params(stage.name) if stage.params else None
        if stage.folder == folder:
            return arguments(stage, params, sources)
        outputs[stage.folder] = finish(stage, stage.run(**arguments(stage, params, sources)), params)
    raise KeyError(f"the sample's pipeline has no stage {folder}")
