"""The progress of LLM requests (tasks/core/progress.py): its line, its arithmetic, where it shows, its Prefect
artifact; and the line of a build's running stages."""

from __future__ import annotations

import io
import logging
import threading
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from pbbq.tasks.core import progress
from pbbq.tasks.core.progress import RequestProgress, StageProgress, artifact_key, format_duration, format_rate
from pbbq.tasks.llm import LLMClient, LLMRequest, transport
from tests.fakes.llm_servers import FakeLLMServer
from tests.helpers import llm_config


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def clock() -> Clock:
    return Clock()


def quiet(total: int, clock: Clock, **options: Any) -> RequestProgress:
    """A progress on a non-terminal stream, with no artifact unless asked."""
    options.setdefault("artifact", False)
    return RequestProgress(total, "disambiguate", stream=io.StringIO(), clock=clock, **options)


# --- the line and its arithmetic ----------------------------------------------------------------------------


def test_line_shows_done_rate_eta_and_cost(clock: Clock) -> None:
    bar = quiet(500, clock)
    assert bar.line() == "disambiguate: 0/500 requests (0%), ETA ?, $0.0000 so far"
    clock.now += 37.5
    bar.advance(120, 0.0123)
    assert bar.rate == pytest.approx(3.2)
    assert bar.eta == pytest.approx(380 / 3.2)
    assert bar.line() == "disambiguate: 120/500 requests (24%), 3.2/s, ETA 1m59s, $0.0123 so far"
    clock.now += 118.75
    bar.advance(380, 0.0277)
    assert bar.line() == "disambiguate: 500/500 requests (100%), 3.2/s, done in 2m36s, $0.0400"


def test_an_unknown_price_makes_the_cost_unknown_for_good(clock: Clock) -> None:
    bar = quiet(3, clock)
    clock.now += 60
    bar.advance(1, 0.5)
    bar.advance(1, None)
    bar.advance(1, 0.5)
    assert bar.cost is None
    assert bar.line() == "disambiguate: 3/3 requests (100%), 3.0/min, done in 1m00s, cost unknown"


def test_done_never_passes_the_total_and_no_work_is_complete(clock: Clock) -> None:
    bar = quiet(2, clock)
    bar.advance(5)
    assert (bar.done, bar.percent) == (2, 100.0)
    assert quiet(0, clock).percent == 100.0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (42.4, "42s"), (59.6, "1m00s"), (185, "3m05s"), (3599, "59m59s"), (7620, "2h07m"), (-3, "0s")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("per_second", "text"), [(12.34, "12.3/s"), (1.0, "1.0/s"), (0.075, "4.5/min"), (1 / 300, "12.0/h")]
)
def test_format_rate(per_second: float, text: str) -> None:
    assert format_rate(per_second) == text


def test_artifact_keys_are_what_prefect_accepts() -> None:
    assert artifact_key("disambiguate") == "llm-progress-disambiguate"
    assert artifact_key("07_Translate (live, after batch)") == "llm-progress-07-translate-live-after-batch"
    assert artifact_key("!!") == "llm-progress-requests"


# --- where it shows -----------------------------------------------------------------------------------------


def test_a_terminal_gets_one_line_rewritten_in_place(clock: Clock) -> None:
    terminal = Terminal()
    bar = RequestProgress(10, "translate", stream=terminal, clock=clock, refresh_interval=1.0, artifact=False)
    for _ in range(4):  # within one refresh interval: drawn once
        bar.advance(1)
    clock.now += 1.0
    bar.advance(1)
    clock.now += 1.0
    bar.advance(5)  # the last request is always drawn
    bar.close()
    output = terminal.getvalue()
    assert output.count("\r") == 4  # first, after a second, at the end, and closing
    assert output.count("\n") == 1 and output.endswith("\n")
    assert output.rstrip().rsplit("\r", 1)[-1].startswith("translate: 10/10 requests (100%)")
    assert "translate: 1/10 requests" in output and "translate: 5/10 requests" in output


def test_a_shorter_line_clears_what_the_longer_one_left(clock: Clock) -> None:
    terminal = Terminal()
    bar = RequestProgress(2, "s", stream=terminal, clock=clock, refresh_interval=0.0, artifact=False)
    bar.advance(1)
    first = bar.line()
    bar.advance(1)
    last = bar.line()
    assert (first, last) == (
        "s: 1/2 requests (50%), ETA ?, $0.0000 so far",
        "s: 2/2 requests (100%), done in 0s, $0.0000",
    )
    assert terminal.getvalue() == f"\r{first}\r{last} "


def test_a_log_gets_a_line_at_most_every_interval(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pbbq.tasks.core.progress")
    bar = quiet(100, clock, log_interval=30.0)
    for _ in range(100):
        clock.now += 1.0  # one request a second for 100 s
        bar.advance(1)
    bar.close()
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [
        "disambiguate: 30/100 requests (30%), 1.0/s, ETA 1m10s, $0.0000 so far",
        "disambiguate: 60/100 requests (60%), 1.0/s, ETA 40s, $0.0000 so far",
        "disambiguate: 90/100 requests (90%), 1.0/s, ETA 10s, $0.0000 so far",
        "disambiguate: 100/100 requests (100%), 1.0/s, done in 1m40s, $0.0000",
    ]


def test_short_work_logs_nothing(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="pbbq.tasks.core.progress")
    with quiet(5, clock, log_interval=30.0) as bar:
        for _ in range(5):
            clock.now += 1.0
            bar.advance(1)
    assert caplog.records == []


# --- the Prefect artifact -----------------------------------------------------------------------------------


class ArtifactCalls:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float, str | None]] = []
        self.id = uuid4()

    def create(self, progress: float, key: str | None = None, description: str | None = None) -> UUID:
        self.calls.append(("create", progress, key))
        return self.id

    def update(self, artifact_id: UUID, progress: float, description: str | None = None) -> UUID:
        assert artifact_id == self.id
        self.calls.append(("update", progress, description))
        return artifact_id


@pytest.fixture
def artifacts(monkeypatch: pytest.MonkeyPatch) -> ArtifactCalls:
    import prefect.artifacts

    calls = ArtifactCalls()
    monkeypatch.setattr(prefect.artifacts, "create_progress_artifact", calls.create)
    monkeypatch.setattr(prefect.artifacts, "update_progress_artifact", calls.update)
    return calls


def test_no_artifact_outside_a_run(clock: Clock, artifacts: ArtifactCalls) -> None:
    with quiet(3, clock, artifact=True) as bar:
        bar.advance(3)
    assert artifacts.calls == []


def test_the_artifact_is_created_then_updated_at_most_every_interval(
    clock: Clock, artifacts: ArtifactCalls, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "_in_prefect_run", lambda: True)
    with quiet(4, clock, artifact=True, artifact_interval=5.0) as bar:
        for _ in range(4):
            clock.now += 2.0
            bar.advance(1)
    assert [(kind, value) for kind, value, _ in artifacts.calls] == [
        ("create", 0.0),
        ("update", 75.0),  # 6 s after the creation
        ("update", 100.0),  # closing
    ]
    assert artifacts.calls[0][2] == "llm-progress-disambiguate"
    assert artifacts.calls[-1][2] == "disambiguate: 4/4 requests (100%), 30.0/min, done in 8s, $0.0000"


def test_a_failing_artifact_is_dropped_with_one_warning(
    clock: Clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import prefect.artifacts

    def broken(**_: Any) -> UUID:
        raise RuntimeError("no Prefect API")

    monkeypatch.setattr(progress, "_in_prefect_run", lambda: True)
    monkeypatch.setattr(prefect.artifacts, "create_progress_artifact", broken)
    with quiet(2, clock, artifact=True, artifact_interval=0.0) as bar:
        bar.advance(1)
        bar.advance(1)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "LLM progress artifact not written (RuntimeError: no Prefect API); progress stays on the terminal"
    ]
    assert bar.done == 2


def test_the_artifact_is_written_inside_a_flow(prefect_server: None) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.runtime import flow_run

    @flow
    def requests_flow() -> str:
        with RequestProgress(4, "progress test", stream=io.StringIO(), artifact_interval=0.0) as bar:
            for _ in range(3):
                bar.advance(1, 0.25)
            assert bar._artifact_id is not None
            bar.advance(1, 0.25)
        return str(flow_run.id)

    run_id = requests_flow()
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[artifact_key("progress test")]))
        )
    mine = [artifact for artifact in found if str(artifact.flow_run_id) == run_id]
    assert len(mine) == 1  # created once, then updated in place
    assert mine[0].type == "progress"
    assert mine[0].data == 100.0
    assert mine[0].description is not None and mine[0].description.startswith("progress test: 4/4 requests (100%)")
    assert mine[0].description.endswith("$1.0000")


# --- the LLM layer reports through it -----------------------------------------------------------------------


def test_live_calls_advance_the_progress(
    server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[RequestProgress] = []

    class Recording(RequestProgress):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            seen.append(self)

    monkeypatch.setattr(transport, "RequestProgress", Recording)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = llm_config(server, tmp_path / "store.sqlite", max_concurrency=3, prices={"fake-model": (2.0, 10.0)})
    client = LLMClient(config)
    asked = [
        LLMRequest(messages=(("user", f"question {i}"),), prompt_hash="c" * 64, stage="names", context=str(i))
        for i in range(7)
    ]
    client.complete_many(asked[:2])
    client.complete_many(asked)  # two from the store, five sent
    client.complete_many(asked)  # nothing sent: no progress at all
    assert [(bar.stage, bar.total, bar.done) for bar in seen] == [("names", 2, 2), ("names", 5, 5)]
    usage = client.usage("names")
    assert sum(bar.cost or 0 for bar in seen) == pytest.approx(usage.cost_usd)


# --- the running stages of a build (every stage, LLM or not) --------------------------------------------------


class Done:
    """A stage's ``done()`` the test sets by hand."""

    def __init__(self) -> None:
        self.value = False

    def __call__(self) -> bool:
        return self.value


def stages(clock: Clock, stream: io.StringIO, **options: Any) -> StageProgress:
    return StageProgress({"07_translate": 30.0}, stream=stream, clock=clock, thread=False, **options)


def test_the_running_stages_show_after_a_few_seconds_with_the_last_run(clock: Clock) -> None:
    terminal = Terminal()
    progress = stages(clock, terminal, after=2.0)
    translate, names = Done(), Done()
    progress.start("07_translate", translate)
    progress.start("06_names", names)
    clock.now += 1.0
    assert progress.line() == ""  # a quick stage never shows
    clock.now += 11.0
    assert progress.line() == "running: 07_translate 12s (last run 30s), 06_names 12s"
    names.value = True  # finished, not yet written: off the line
    assert progress.line() == "running: 07_translate 12s (last run 30s)"
    progress.redraw()
    assert terminal.getvalue() == "\rrunning: 07_translate 12s (last run 30s)"
    progress.finish("07_translate")  # cleared, so that the stage's own line starts at the margin
    assert terminal.getvalue().endswith("\r" + " " * len("running: 07_translate 12s (last run 30s)") + "\r")
    progress.close()


def test_the_running_stages_write_nothing_but_to_a_terminal(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    log = io.StringIO()
    with StageProgress(stream=log, clock=clock) as progress:  # a thread only for a terminal
        assert progress._thread is None
        progress.start("08_diversity", Done())
        clock.now += 60.0
        progress.redraw()
        progress.finish("08_diversity")
    assert log.getvalue() == "" and caplog.records == []


def test_a_request_line_has_the_terminal_to_itself(clock: Clock) -> None:
    terminal = Terminal()
    progress = stages(clock, terminal)
    progress.start("04_disambiguate", Done())
    clock.now += 10.0
    requests = RequestProgress(5, "disambiguate", stream=terminal, clock=clock, artifact=False)
    progress.redraw()
    assert "running:" not in terminal.getvalue()
    requests.close()
    progress.redraw()
    assert terminal.getvalue().endswith("\rrunning: 04_disambiguate 10s")
    progress.close()


def test_the_redrawing_thread_draws_and_stops_on_close() -> None:
    terminal = Terminal()
    with StageProgress(stream=terminal, after=0.0, refresh_interval=0.01) as progress:
        progress.start("09_statistics", Done())
        for _ in range(500):  # the thread draws within a few intervals
            if "running: 09_statistics" in terminal.getvalue():
                break
            threading.Event().wait(0.01)
    assert "running: 09_statistics" in terminal.getvalue()
    assert progress._thread is not None and not progress._thread.is_alive()
    assert terminal.getvalue().endswith("\r")  # the line cleared at the end
