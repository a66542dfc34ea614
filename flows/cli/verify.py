"""``pbbq verify RUN|RELEASE``: whether a run folder or a release is exactly what its manifest says.

Prints one line per file that differs (missing, extra, size, sha256) and exits 1 on any, or one line saying
every file matches (:mod:`pbbq.tasks.core.verification`). Files that commands write into a run after its build
(``pbbq audit``'s page, ``pbbq browse``'s database) are not the build's and are left out.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_verify_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``pbbq verify`` on the ``pbbq`` parser's subparsers; its handler is ``args.handler``."""
    parser = subparsers.add_parser("verify", help="check every file of a run or a release against its manifest")
    parser.add_argument("folder", help="a run id (under --outputs), a run folder or a release folder")
    parser.add_argument("--outputs", type=Path, help="where runs are (default: $PBBQ_OUTPUTS or outputs/)")
    parser.set_defaults(handler=verify_command)
    return parser


def verify_command(args: argparse.Namespace) -> int:
    from ...tasks.core.verification import verify_folder
    from ..audit.audit import AFTER_BUILD
    from ..audit.runs import outputs_folder

    folder = Path(args.folder)
    if not folder.is_dir():
        folder = outputs_folder(str(args.outputs) if args.outputs else None) / args.folder
    if not folder.is_dir():
        raise FileNotFoundError(f"no run or release {args.folder!r}: no such folder (nor under --outputs)")
    found = verify_folder(folder.resolve(), ignored=AFTER_BUILD)
    print(found.text())
    return 0 if found.ok else 1
