"""Progress of long work: LLM requests done of total (rate, ETA, cost so far), and the stages running now.

:class:`RequestProgress` shows one line on the terminal while the LLM layer sends requests (``tasks/llm/``,
live or batch): on a TTY stderr a single line rewritten in place (carriage return), otherwise a log line at most
every ``log_interval`` seconds, so that a log file does not flood. Inside a Prefect flow or task run it also keeps
a progress artifact (``create_progress_artifact``, then ``update_progress_artifact`` at most every
``artifact_interval`` seconds); outside a run context (a unit test calling the client directly) it makes none.
A failure to write the artifact is logged once and never fails the work it reports on.

Call it from one thread (the one that holds the run context); ``advance`` is also safe from others.

:class:`StageProgress` shows, on a terminal only, the stages of a build that are running and for how long (with
what the same stage took when the last run computed it): every stage, LLM or not. A request line, while one is
drawn, has the terminal line to itself; a log gets no line from it (the build logs one line per stage).
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TextIO, cast
from uuid import UUID

from ..imports import one_import_at_a_time
from .closing import Closing

log = logging.getLogger(__name__)

LOG_INTERVAL = 30.0
"""Seconds between two log lines when stderr is not a terminal."""
REFRESH_INTERVAL = 0.25
"""Seconds between two redraws of the terminal line."""
STAGE_REFRESH_INTERVAL = 1.0
"""Seconds between two redraws of the running stages' line."""
SHOW_AFTER = 2.0
"""Seconds a stage runs before the running stages' line shows it (a quick stage never flickers)."""

_request_lines: weakref.WeakSet[RequestProgress] = weakref.WeakSet()
"""The request lines drawn on a terminal now, until closed or gone (the running stages' line waits for them)."""
ARTIFACT_INTERVAL = 5.0
"""Seconds between two updates of the Prefect progress artifact (each is a call to the Prefect API)."""


def format_duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def format_rate(per_second: float) -> str:
    """``3.2/s``, or per minute (``4.5/min``) or hour (``12.0/h``) when slower."""
    if per_second >= 1:
        return f"{per_second:.1f}/s"
    if per_second * 60 >= 1:
        return f"{per_second * 60:.1f}/min"
    return f"{per_second * 3600:.1f}/h"


def artifact_key(stage: str) -> str:
    """A Prefect artifact key for ``stage`` (lowercase letters, digits and dashes only)."""
    slug = re.sub(r"[^a-z0-9]+", "-", stage.lower()).strip("-")
    return f"llm-progress-{slug or 'requests'}"


class RequestProgress(Closing):
    """Requests done of ``total`` for ``stage``: a terminal line, log lines and a Prefect progress artifact."""

    def __init__(
        self,
        total: int,
        stage: str,
        *,
        unit: str = "requests",
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        log_interval: float = LOG_INTERVAL,
        refresh_interval: float = REFRESH_INTERVAL,
        artifact_interval: float = ARTIFACT_INTERVAL,
        artifact: bool = True,
    ) -> None:
        """``stream`` defaults to ``sys.stderr`` (read when the progress starts); ``clock`` is injectable for
        tests; ``artifact=False`` never touches Prefect."""
        self.total = max(0, int(total))
        self.stage = stage
        self.unit = unit
        self.done = 0
        self.cost: float | None = 0.0
        self._stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._log_interval = log_interval
        self._refresh_interval = refresh_interval
        self._artifact_interval = artifact_interval
        self._lock = threading.Lock()
        self._start = clock()
        self._tty = _is_tty(self._stream)
        self._drawn = ""  # the terminal line as last drawn
        self._last_draw = float("-inf")
        self._last_log = self._start
        self._logged = False
        self._closed = False
        self._artifact_id: UUID | None = None
        self._last_artifact = float("-inf")
        self._artifact_enabled = artifact and _in_prefect_run()
        if self._artifact_enabled:
            self._write_artifact(force=True)
        if self._tty:
            _request_lines.add(self)

    @property
    def elapsed(self) -> float:
        """Seconds since the progress started."""
        return max(0.0, self._clock() - self._start)

    @property
    def rate(self) -> float | None:
        """Requests done per second so far, None before the first one or before any time has passed."""
        elapsed = self.elapsed
        return self.done / elapsed if self.done and elapsed > 0 else None

    @property
    def eta(self) -> float | None:
        """Seconds until ``total`` at the rate so far, None while unknown."""
        rate = self.rate
        return (self.total - self.done) / rate if rate else None

    @property
    def percent(self) -> float:
        """Share done, 0 to 100 (100 for no work)."""
        return 100.0 if self.total == 0 else min(100.0, 100.0 * self.done / self.total)

    def line(self) -> str:
        """The progress line, e.g. ``disambiguate: 120/500 requests (24%), 3.2/s, ETA 1m59s, $0.0123 so far``."""
        parts = [f"{self.stage}: {self.done}/{self.total} {self.unit} ({self.percent:.0f}%)"]
        rate = self.rate
        finished = self.done >= self.total
        if rate is not None:
            parts.append(format_rate(rate))
        if finished:
            parts.append(f"done in {format_duration(self.elapsed)}")
        else:
            eta = self.eta
            parts.append("ETA ?" if eta is None else f"ETA {format_duration(eta)}")
        if self.cost is None:
            parts.append("cost unknown")
        else:
            parts.append(f"${self.cost:.4f}" + ("" if finished else " so far"))
        return ", ".join(parts)

    def advance(self, n: int = 1, cost: float | None = 0.0) -> None:
        """``n`` more requests done, costing ``cost`` USD (None: no price known, the cost stays unknown)."""
        with self._lock:
            self.done = min(self.total, self.done + max(0, n))
            if cost is None:
                self.cost = None
            elif self.cost is not None:
                self.cost += cost
            self._show()

    def close(self) -> None:
        """Draw the last line (ending the terminal line), and bring the artifact up to date."""
        if self._closed:
            return
        self._closed = True
        line = self.line()
        if self._tty:
            self._draw(line, end="\n")
        elif self._logged:
            log.info("%s", line)
        _request_lines.discard(self)
        if self._artifact_enabled:
            self._write_artifact(force=True)

    def _show(self) -> None:
        now = self._clock()
        if self._tty:
            if now - self._last_draw >= self._refresh_interval or self.done >= self.total:
                self._last_draw = now
                self._draw(self.line())
        elif now - self._last_log >= self._log_interval:
            self._last_log = now
            self._logged = True
            log.info("%s", self.line())
        if self._artifact_enabled and now - self._last_artifact >= self._artifact_interval:
            self._write_artifact()

    def _draw(self, line: str, end: str = "") -> None:
        padding = " " * max(0, len(self._drawn) - len(line))  # clear what a longer earlier line left
        try:
            self._stream.write(f"\r{line}{padding}{end}")
            self._stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal: stop drawing, keep working
            self._tty = False
        self._drawn = line

    def _write_artifact(self, force: bool = False) -> None:
        """Create the progress artifact, or update it (at most every ``artifact_interval`` unless forced)."""
        now = self._clock()
        if not force and now - self._last_artifact < self._artifact_interval:
            return
        self._last_artifact = now
        try:
            with one_import_at_a_time():
                from prefect.artifacts import create_progress_artifact, update_progress_artifact

            if self._artifact_id is None:
                created = create_progress_artifact(
                    progress=self.percent, key=artifact_key(self.stage), description=self.line()
                )
                self._artifact_id = cast(UUID, created)  # Prefect's async_dispatch: a sync call's UUID
            else:
                update_progress_artifact(artifact_id=self._artifact_id, progress=self.percent, description=self.line())
        except Exception as err:  # the artifact is a convenience: never fail the work over it
            self._artifact_enabled = False
            log.warning(
                "LLM progress artifact not written (%s: %s); progress stays on the terminal", type(err).__name__, err
            )


class StageProgress(Closing):
    """The stages running now, on a terminal: ``running: 07_translate 12s (last run 30s), 06_names 3s``, redrawn
    in place every ``refresh_interval`` seconds by a thread of its own, each stage once it has run ``after``
    seconds. On a stream that is not a terminal it draws nothing and starts no thread."""

    def __init__(
        self,
        last_run: Mapping[str, float] | None = None,
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        after: float = SHOW_AFTER,
        refresh_interval: float = STAGE_REFRESH_INTERVAL,
        thread: bool = True,
    ) -> None:
        """``last_run``: seconds per stage folder when the last run computed it; ``thread=False`` leaves the
        redrawing to the caller (tests)."""
        self._last_run = dict(last_run or {})
        self._stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._after = after
        self._lock = threading.Lock()
        self._running: dict[str, tuple[float, Callable[[], bool]]] = {}
        self._drawn = ""
        self._tty = _is_tty(self._stream)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self._tty and thread:
            self._thread = threading.Thread(target=self._loop, args=(refresh_interval,), daemon=True)
            self._thread.start()

    def start(self, folder: str, done: Callable[[], bool]) -> None:
        """``folder`` is running from now until ``done()`` says it has finished (or :meth:`finish`)."""
        with self._lock:
            self._running[folder] = (self._clock(), done)

    def finish(self, folder: str) -> None:
        """``folder`` is finished: off the line, which is cleared so that the stage's own line starts clean."""
        with self._lock:
            self._running.pop(folder, None)
            self._clear()

    def line(self) -> str:
        """The running stages shown now, in the order they started; '' when none has run ``after`` seconds."""
        now = self._clock()
        shown = []
        for folder, (started, done) in self._running.items():
            if done() or now - started < self._after:
                continue
            last = self._last_run.get(folder)
            shown.append(
                f"{folder} {format_duration(now - started)}"
                + ("" if last is None else f" (last run {format_duration(last)})")
            )
        return f"running: {', '.join(shown)}" if shown else ""

    def redraw(self) -> None:
        """Draw the line now (a request line on the terminal has it to itself)."""
        with self._lock:
            if not self._tty:
                return
            line = "" if len(_request_lines) else self.line()
            if line != self._drawn:
                self._write(f"\r{line}{' ' * max(0, len(self._drawn) - len(line))}" + ("" if line else "\r"))
                self._drawn = line

    def close(self) -> None:
        """Stop redrawing and clear the line."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._running.clear()
            self._clear()

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.redraw()

    def _clear(self) -> None:
        if self._drawn:
            self._write(f"\r{' ' * len(self._drawn)}\r")
            self._drawn = ""

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal: stop drawing, keep building
            self._tty = False


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _in_prefect_run() -> bool:
    """Whether this thread runs inside a Prefect flow or task run (never imports Prefect itself: without it
    loaded there can be no run)."""
    context = sys.modules.get("prefect.context")
    if context is None:
        return False
    return context.FlowRunContext.get() is not None or context.TaskRunContext.get() is not None
