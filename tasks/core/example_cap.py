"""``[build] max_examples_per_template``: the most examples one template may build, estimated before any is built,
on both paths (the adaptation sheet's rows, PBBQ's templates file)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .inputs import InputError, read_csv_checked, spreadsheet_row

MAX_EXAMPLES_PER_TEMPLATE = 100_000
"""``[build] max_examples_per_template``'s default: above the most any of BBQ's own templates builds by this port's
rules (86,400, Race_ethnicity-26 with BBQ's proper names), far below what exhausts a machine."""


class Estimated(Protocol):
    """A template's estimate: how many examples it builds, and ``str`` saying of what product."""

    @property
    def examples(self) -> int: ...


@dataclass(frozen=True)
class ExampleCap:
    """The most examples one template may build (``[build] max_examples_per_template``) and the file its templates
    come from (the adaptation sheet or PBBQ's templates file, by the name of its input when None), to name in a
    refusal. A limit on work, not on what is built: a build under it builds the same examples at any value, so it
    neither keys the stage's cache nor enters the manifest."""

    max_examples_per_template: int = MAX_EXAMPLES_PER_TEMPLATE
    sheet: Path | None = None
    input_name: str = "adapt_sheet"

    def cache_identity(self) -> None:
        return None

    def check(self, template_id: str, estimated: Estimated) -> None:
        """Refuse a template estimated past the cap: one :class:`InputError` naming the file, the template's row
        and the estimate."""
        if estimated.examples <= self.max_examples_per_template:
            return
        problem = (
            f"template {template_id!r} would build {estimated}, more than [build] max_examples_per_template = "
            f"{self.max_examples_per_template:,} (the names stage and each translation multiply it again)"
        )
        if self.sheet is None:
            raise InputError(Path(self.input_name), None, problem)
        ids = read_csv_checked(self.sheet, ["template_id"])["template_id"]
        rows = ids.index[ids == template_id]
        raise InputError(self.sheet, spreadsheet_row(rows[0]) if len(rows) else None, problem)


DEFAULT_CAP = ExampleCap()
"""The cap at its default, with no file to name (a stage called outside a build)."""
