"""Checks of the ``pbbq`` command's arguments, made while it parses them: before anything is read or written.

Light on purpose (no pandas, no Prefect): ``pbbq --help`` and a wrong argument answer at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one ``pbbq: error:`` line, like every other failure of the command
    (the usage stays one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        print(f"pbbq: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def integer(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argument type: a whole number from ``low`` to ``high`` (inclusive; None: unbounded)."""

    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {bounds}, not {value}")
        return value

    return check


def run_id(text: str) -> str:
    """An argument type: a run id given is not empty (an empty one would silently become a new random id);
    the run folder checks that it is one safe folder name (``pbbq.tasks.core.run_folder.check_run_id``)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty run id names no folder; leave the option out for a new id")
    return text
