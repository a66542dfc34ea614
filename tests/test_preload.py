"""Heavy libraries loaded ahead (tasks/imports.py ``preload``): a build whose inputs changed starts importing the
libraries of the stages that will run, beside its start; a rebuild with nothing changed imports none."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.build_inputs import BuildInputs, preload_for_changed_inputs
from pbbq.tasks import imports
from pbbq.tasks.core.artifacts import StageOutput
from pbbq.tasks.core.stage import Input, Pipeline, Stage, Table
from pbbq.tasks.core.stored import KeptInput
from pbbq.tasks.imports import one_import_at_a_time, preload


def _output() -> StageOutput:
    return StageOutput({}, {}, {})


def _stage(folder: str, imports: tuple[str, ...], **inputs: Input | Table) -> Stage:
    return Stage(folder, folder[3:], _output, inputs=inputs, outputs={}, imports=imports)


PIPELINE = Pipeline(
    (
        _stage("01_first", ("first.lib",), source=Input("unchanged")),
        _stage("02_second", ("second.lib",), source=Input("changed")),
        _stage("03_after_second", ("after_second.lib",), rows=Table("02_second", "rows")),
        _stage("04_after_first", ("after_first.lib",), rows=Table("01_first", "rows")),
    )
)


def _inputs(loaded: set[str]) -> BuildInputs:
    kept = {name: KeptInput(name, lambda path: pd.DataFrame(), None) for name in ("unchanged", "changed")}
    for name in loaded:
        kept[name].load()  # an input no earlier build checked is loaded when the build starts
    return BuildInputs({}, {}, {}, [], {}, kept)


@pytest.mark.parametrize(
    ("loaded", "expected"),
    [({"changed"}, [["second.lib", "after_second.lib"]]), (set(), [])],
)
def test_the_libraries_of_the_stages_a_changed_input_runs_are_loaded_ahead(
    monkeypatch: pytest.MonkeyPatch, loaded: set[str], expected: list[list[str]]
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr("pbbq.flows.build_inputs.preload", lambda modules: calls.append(list(modules)))
    preload_for_changed_inputs(_inputs(loaded), PIPELINE)
    assert calls == expected


def test_preload_imports_in_a_thread_and_leaves_a_failing_import_to_the_stage(tmp_path: Path) -> None:
    (tmp_path / "pbbq_preloaded_module.py").write_text("LOADED = True\n", encoding="utf-8")
    (tmp_path / "pbbq_broken_module.py").write_text("raise ImportError('broken')\n", encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        preload(["pbbq_broken_module", "pbbq_no_such_module", "pbbq_preloaded_module"]).join(timeout=30)
        assert sys.modules["pbbq_preloaded_module"].LOADED is True
        assert "pbbq_broken_module" not in sys.modules
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("pbbq_preloaded_module", None)


def test_a_stage_that_waits_to_import_goes_before_the_preloads_next_module(tmp_path: Path) -> None:
    """The preload holds the import lock one module at a time and gives way to a stage waiting for it: the
    kappa gate's statsmodels does not wait behind the libraries of the stages after it."""
    (tmp_path / "pbbq_gate.py").write_text(
        "import threading\nstarted, go, order = threading.Event(), threading.Event(), []\n", encoding="utf-8"
    )
    (tmp_path / "pbbq_slow_module.py").write_text(
        "import pbbq_gate\npbbq_gate.started.set()\npbbq_gate.go.wait(30)\n", encoding="utf-8"
    )
    (tmp_path / "pbbq_later_module.py").write_text("import pbbq_gate\npbbq_gate.order.append('preload')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import pbbq_gate  # type: ignore[import-not-found]

        loading = preload(["pbbq_slow_module", "pbbq_later_module"])
        assert pbbq_gate.started.wait(30)

        def stage() -> None:
            with one_import_at_a_time():
                pbbq_gate.order.append("stage")

        waiting = threading.Thread(target=stage)
        waiting.start()
        while not imports._waiting:  # the stage waits for the lock the preload holds
            time.sleep(0.001)
        pbbq_gate.go.set()
        waiting.join(timeout=30)
        loading.join(timeout=30)
        assert pbbq_gate.order == ["stage", "preload"]
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("pbbq_gate", "pbbq_slow_module", "pbbq_later_module"):
            sys.modules.pop(name, None)
