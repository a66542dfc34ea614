"""What the fake servers share: a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (port 0), served from a daemon
thread, started by ``start()`` or on entering a ``with`` block and stopped by ``stop()`` or on leaving it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing (the fakes' requests would fill the test output)."""

    def log_message(self, format: str, *args: object) -> None:
        return


class LocalServer:
    """Serves ``httpd`` (bound to 127.0.0.1, port 0) in a daemon thread named ``name``."""

    def __init__(self, httpd: ThreadingHTTPServer, *, name: str | None = None) -> None:
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=name, daemon=True
        )

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, with no path."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        """Start serving in a daemon thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and let the serving thread end."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
