"""How a stage decides it need not run again (DESIGN.md §4, §6): a Prefect cache policy on the stage's inputs
and its code.

Prefect's own ``INPUTS + TASK_SOURCE`` hashes DataFrames by pickling their columns, which is not stable for
Arrow-backed strings, and it hashes only the task function's own lines, not the helpers it calls. This policy
hashes each table by its parquet bytes and each parameter set by its fields, and the code by the source of the
stage's whole module plus the table schemas, so editing any rule of a stage invalidates exactly that stage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from prefect import task
from prefect.cache_policies import CachePolicy
from prefect.context import TaskRunContext

from tasks import schemas
from tasks.artifacts import parquet_bytes, sha256_file


def _digest(value: Any) -> Any:
    """A JSON-able, content-derived stand-in for a task input."""
    if isinstance(value, pd.DataFrame):
        table = pa.Table.from_pandas(value, preserve_index=False)
        return {"table": hashlib.sha256(parquet_bytes(table.replace_schema_metadata(None))).hexdigest()}
    if hasattr(value, "cache_identity"):
        return {type(value).__name__: _digest(value.cache_identity())}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {type(value).__name__: _digest(dataclasses.asdict(value))}
    if isinstance(value, dict):
        return {str(k): _digest(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_digest(v) for v in value]
    if isinstance(value, Path):
        return {"file": str(value), "sha256": sha256_file(value) if value.is_file() else None}
    return value


def stage_code_hash(fn: Callable[..., Any]) -> str:
    """sha256 of the source of the module that defines ``fn`` and of the schemas module."""
    digest = hashlib.sha256()
    for module in (sys.modules[fn.__module__], schemas):
        digest.update(inspect.getsource(module).encode())
    return digest.hexdigest()


@dataclass
class StageInputsAndCode(CachePolicy):
    """Cache key = sha256(stage code, content of every input)."""

    def compute_key(
        self,
        task_ctx: TaskRunContext,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        payload = {"code": stage_code_hash(task_ctx.task.fn), "inputs": _digest(inputs or {})}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def stage_task(fn: Callable[..., Any]) -> Any:
    """The thin Prefect task around a stage function: cached on inputs + code, result persisted."""
    return task(fn, name=fn.__name__, cache_policy=StageInputsAndCode(), persist_result=True)
