"""How a stage decides it need not run again (docs/architecture.md §5): a Prefect cache policy on the stage's inputs
and its code.

Prefect's own ``INPUTS + TASK_SOURCE`` hashes DataFrames by pickling their columns, which is not stable for
Arrow-backed strings, and it hashes only the task function's own lines, not the helpers it calls. This policy
hashes each table by its parquet bytes and each parameter set by its fields, and the code by the source of the
stage's module and of every project module it imports, directly or through others (:func:`module_closure`), with
the data files beside them (:func:`data_files`), so editing any rule a stage uses, in whatever module or word list
it lives, invalidates exactly the stages that use it.

What the cache keeps of a stage is a small record (:class:`StoredStage`): its files sit in a content-addressed
:class:`~.artifacts.ArtifactStore` and a run takes them by reference, their hashes and rows from the record; its
frames are read from the store only when a stage that runs asks for them (:class:`StoredInput`). So a rebuild
with nothing changed reads and writes no table of a cached stage. A stage whose work splits by template
(:class:`~.stage.Separable`) keeps each template's part there too, so a rebuild in which one template changed
computes that template's rows only (:func:`separated`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE, CachePolicy
from prefect.context import TaskRunContext

from .artifacts import ArtifactStore, StageOutput
from .code_hash import stage_code_hash
from .collector import keep_long_lived
from .digests import input_digest
from .separated import separated
from .stage import Stage, finish
from .stored import StoredStage, loaded


@dataclass
class StageInputsAndCode(CachePolicy):
    """Cache key = sha256(the stage's code and the contract's, what it declares of its output, the content of
    every input). A :class:`StoredInput` is keyed by its tables' file hashes, so a rebuild does not serialize the
    large tables again only to key them."""

    code: tuple[Callable[..., Any], ...] = ()
    declared: Mapping[str, Any] = field(default_factory=dict)

    def compute_key(
        self,
        task_ctx: TaskRunContext,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        payload = {
            "code": [stage_code_hash(fn) for fn in self.code],
            "declared": self.declared,
            "inputs": {name: input_digest(value) for name, value in (inputs or {}).items()},
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def stage_task(stage: Stage, params: Any, store: ArtifactStore) -> Any:
    """The thin Prefect task around a stage: it loads the tables its :class:`StoredInput` arguments name, runs the
    stage function (a stage that splits by key, by :func:`separated`, its report's ``parts`` saying what it
    computed), completes its output by the contract (:func:`.stage.finish`) and, for a cached stage, keeps it
    in ``store`` and returns the :class:`StoredStage` that Prefect persists, keyed on the stage's code, declared
    outputs and inputs. A stage with side effects (publish) runs every time (Prefect's ``NO_CACHE``) and returns its
    :class:`StageOutput`."""

    def run(**arguments: Any) -> StoredStage | StageOutput:
        if stage.per is not None:
            computed, parts = separated(stage.per, arguments, store)
            # a stage that ran on whole tables after all says so in its own ``parts``
            output = finish(stage, dataclasses.replace(computed, report={"parts": parts} | computed.report), params)
        else:
            found = {name: loaded(value) for name, value in arguments.items()}
            output = finish(stage, stage.run(**found), params)
        keep_long_lived()
        if not stage.cached:
            return output
        return StoredStage.keep(output, store, None if stage.request_ids is None else stage.request_ids(output))

    functools.update_wrapper(run, stage.run)  # Prefect binds the stage function's own parameters
    name = stage.run.__name__
    if not stage.cached:
        return task(name=name, cache_policy=NO_CACHE, persist_result=False)(run)
    declared = {"drops": list(stage.drops), "outputs": {table: str(schema) for table, schema in stage.outputs.items()}}
    policy = StageInputsAndCode(code=(stage.run, finish), declared=declared)
    return task(name=name, cache_policy=policy, persist_result=True)(run)


def damaged_warning(folder: str, problems: Sequence[str]) -> str:
    """The manifest's warning for a stage whose kept files failed their check (:meth:`StoredStage.damaged`)."""
    return f"{folder}: computed again, its kept files failed their check: {'; '.join(problems)}"
