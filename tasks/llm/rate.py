"""``llm.requests_per_minute``: the spacing of the requests a client sends (docs/architecture.md §6)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimiter:
    """Spaces the dispatch of requests at least 60/rpm seconds apart across threads (a bucket of one token). What
    it promises is when a request leaves, not when it arrives: a connection being opened delays an arrival."""

    def __init__(
        self,
        requests_per_minute: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval = 60.0 / requests_per_minute
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._next = 0.0

    def acquire(self) -> None:
        """Reserve the next free slot and sleep until it comes."""
        with self._lock:
            now = self._clock()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            self._sleep(slot - now)
