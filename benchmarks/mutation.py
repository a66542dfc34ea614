"""Mutation testing of the rule modules: mutmut changes a module one operator, constant or argument at
a time, runs only that module's fast test files, and counts the mutants no test caught.

Run from the repository root with the ``mutation`` extra installed:
``python -m benchmarks.mutation [MODULE ...] [--jobs 2] [--show] [--keep]``. Without a module name every rule
module runs. The modules (file, fast test files, optionally only some functions) are ``[tool.pbbq.mutation]`` in
pyproject.toml, mutmut's own settings ``[tool.mutmut]``. Each module runs in a scratch copy of the working tree,
since mutmut writes a ``mutants/`` folder next to the code: the working tree is never touched, and no one else's
test run ever imports a mutant.

A survivor is either a gap in the tests or an equivalent mutant, one that behaves as the original on every
input (``sort=True`` dropped where True is the default). The known equivalents are listed with the reason in
``benchmarks/mutation_equivalents.toml``, matched by function and mutated line rather than by mutmut's numbering,
which shifts when the code changes; they are counted apart and an entry that matches no survivor is reported.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS_FILE = Path(__file__).with_name("mutation_equivalents.toml")
PACKAGED = ("tasks", "flows")
"""The code's folders, copied into the scratch copy's ``pbbq/`` package: mutmut names a mutant after its file's
path, and the name must be the module's import name (``pbbq.tasks.text.cues``) for mutmut to switch it on."""
COPIED = ("pbbq", "tests", "benchmarks", "annotations", "survey", "configs", "prompts")
"""What else the scratch copy holds: the namespace package, the tests and the inputs the tests read."""
KILLED = ("killed", "timeout")
"""mutmut's statuses of a mutant a test caught (a timeout is a mutant that made the tests hang)."""
_CLASS_SEPARATOR = "ǁ"  # mutmut's separator in a method's mangled name
_RESULT_LINE = re.compile(r"^\s+(\S+__mutmut_\d+): (.+)$")


class MutationError(RuntimeError):
    """The configuration is wrong or mutmut could not run."""


@dataclass(frozen=True)
class RuleModule:
    """One entry of ``[tool.pbbq.mutation]``."""

    name: str
    path: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()

    @property
    def scratch_path(self) -> str:
        """The module's file in the scratch copy (``pbbq/tasks/cues.py``)."""
        return f"pbbq/{self.path}"

    @property
    def dotted(self) -> str:
        """The module's import name, as mutmut names its mutants (a package's ``__init__.py`` is the package)."""
        return self.scratch_path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")

    def patterns(self) -> list[str]:
        """mutmut's mutant-name patterns of the chosen functions (empty: the whole module)."""
        return [f"{self.dotted}.{mangle(function)}__mutmut_*" for function in self.functions]

    def selects(self, mutant: str) -> bool:
        patterns = self.patterns() or [f"{self.dotted}.*"]
        return any(fnmatch.fnmatchcase(mutant, pattern) for pattern in patterns)


@dataclass(frozen=True)
class Equivalent:
    """A survivor that behaves as the original on every input, and why."""

    function: str
    mutated: str
    """A piece of the mutated line, as ``mutmut show`` prints it after '+'."""
    reason: str


@dataclass
class ModuleResult:
    module: RuleModule
    statuses: dict[str, str]
    """mutmut's status of every mutant of the module, by mutant name."""
    seconds: float
    changed: dict[str, list[str]] = field(default_factory=dict)
    """The mutated lines of each survivor."""
    equivalent: dict[str, Equivalent] = field(default_factory=dict)
    """The survivors that are known equivalents."""
    unmatched: list[Equivalent] = field(default_factory=list)
    """Known equivalents of this module that matched no survivor (the code changed, or a test now kills it)."""

    @property
    def killed(self) -> int:
        return sum(status in KILLED for status in self.statuses.values())

    @property
    def survivors(self) -> list[str]:
        return sorted(name for name, status in self.statuses.items() if status not in KILLED)


def mangle(function: str) -> str:
    """mutmut's name of a function (``x_name``) or of a method given as ``Class.method`` (``xǁClassǁmethod``)."""
    if "." in function:
        class_name, _, method = function.partition(".")
        return f"x{_CLASS_SEPARATOR}{class_name}{_CLASS_SEPARATOR}{method}"
    return f"x_{function}"


def function_of(mutant: str) -> str:
    """The function (or ``Class.method``) a mutant name belongs to."""
    mangled = mutant.partition("__mutmut_")[0].rpartition(".")[2]
    if mangled.startswith(f"x{_CLASS_SEPARATOR}"):
        class_name, method = mangled[2:].split(_CLASS_SEPARATOR)
        return f"{class_name}.{method}"
    return mangled.removeprefix("x_")


def defined_functions(path: Path) -> set[str]:
    """The module's top-level functions and its classes' methods (as ``Class.method``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            functions |= {
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            }
    return functions


def _pyproject(repo: Path) -> dict[str, Any]:
    with (repo / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def load_modules(repo: Path = REPO_ROOT) -> dict[str, RuleModule]:
    """The rule modules of ``[tool.pbbq.mutation]``, checked: the file and every test file exist."""
    where = f"{repo / 'pyproject.toml'}, [tool.pbbq.mutation]"
    table = _pyproject(repo).get("tool", {}).get("pbbq", {}).get("mutation")
    if not table:
        raise MutationError(f"{where}: no rule modules")
    modules = {}
    for name, entry in table.items():
        unknown = set(entry) - {"path", "tests", "functions"}
        if unknown or "path" not in entry or not entry.get("tests"):
            raise MutationError(f"{where}.{name}: needs path and tests (and optionally functions), got {sorted(entry)}")
        module = RuleModule(name, entry["path"], tuple(entry["tests"]), tuple(entry.get("functions", ())))
        missing = [p for p in (module.path, *module.tests) if not (repo / p).is_file()]
        if missing:
            raise MutationError(f"{where}.{name}: no such file: {', '.join(missing)}")
        absent = sorted(set(module.functions) - defined_functions(repo / module.path))
        if absent:
            raise MutationError(f"{where}.{name}: {module.path} defines no {', '.join(absent)}")
        modules[name] = module
    return modules


def load_equivalents(path: Path = EQUIVALENTS_FILE) -> dict[str, list[Equivalent]]:
    """Known equivalent mutants per module name."""
    with path.open("rb") as handle:
        raw = tomllib.load(handle)
    equivalents: dict[str, list[Equivalent]] = {}
    for module, entries in raw.items():
        for number, entry in enumerate(entries, start=1):
            if set(entry) != {"function", "mutated", "reason"} or not all(entry.values()):
                raise MutationError(f"{path}, {module} entry {number}: needs function, mutated and reason")
            equivalents.setdefault(module, []).append(Equivalent(**entry))
    return equivalents


def toml_tables(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """TOML of flat tables whose values are strings, numbers, booleans or lists of these (JSON spells them as
    TOML does)."""
    lines = []
    for name, values in tables.items():
        lines.append(f"[{name}]")
        for key, value in values.items():
            if isinstance(value, Mapping):
                raise MutationError(f"[{name}] {key}: nested tables are not supported here")
            lines.append(f"{key} = {json.dumps(value, ensure_ascii=False)}")
        lines.append("")
    return "\n".join(lines)


def prepare_scratch(repo: Path, scratch: Path, module: RuleModule) -> None:
    """Copy the working tree's packages, tests and inputs into ``scratch`` with a pyproject.toml that holds the
    repository's pytest settings and mutmut's, narrowed to ``module`` and its test files."""
    ignore = shutil.ignore_patterns("__pycache__", "mutants")
    targets = {name: scratch / name for name in COPIED} | {name: scratch / "pbbq" / name for name in PACKAGED}
    for name, target in targets.items():
        if (repo / name).is_dir():
            shutil.copytree(repo / name, target, ignore=ignore, dirs_exist_ok=True)
    tool = _pyproject(repo).get("tool", {})
    mutmut = dict(tool.get("mutmut", {}))
    mutmut |= {
        "source_paths": ["pbbq"],
        "only_mutate": [module.scratch_path],
        "pytest_add_cli_args_test_selection": list(module.tests),
    }
    pytest_settings = tool.get("pytest", {}).get("ini_options", {})
    text = toml_tables({"tool.pytest.ini_options": pytest_settings, "tool.mutmut": mutmut})
    (scratch / "pyproject.toml").write_text(text, encoding="utf-8")


def _mutmut(scratch: Path, *args: str, log: Path | None = None) -> str:
    command = [sys.executable, "-m", "mutmut", *args]
    result = subprocess.run(command, cwd=scratch, capture_output=True, text=True, check=False)
    if log is not None:
        log.write_text(result.stdout + result.stderr, encoding="utf-8")
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-3000:]
        raise MutationError(f"mutmut {' '.join(args)} exited with {result.returncode} in {scratch}:\n{tail}")
    return result.stdout


def parse_results(text: str) -> dict[str, str]:
    """``mutmut results --all true``: the status of every mutant by name."""
    return {m.group(1): m.group(2).strip() for line in text.splitlines() if (m := _RESULT_LINE.match(line))}


def changed_lines(diff: str) -> list[str]:
    """The mutated lines of a ``mutmut show`` diff (its '+' lines), stripped."""
    return [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]


def match_equivalents(result: ModuleResult, known: Sequence[Equivalent]) -> None:
    """Mark the survivors that are known equivalents; keep the entries no survivor matched."""
    used: set[int] = set()
    for mutant in result.survivors:
        for index, equivalent in enumerate(known):
            if function_of(mutant) == equivalent.function and any(
                equivalent.mutated in line for line in result.changed.get(mutant, [])
            ):
                result.equivalent[mutant] = equivalent
                used.add(index)
                break
    result.unmatched = [equivalent for index, equivalent in enumerate(known) if index not in used]


def run_module(
    module: RuleModule, known: Sequence[Equivalent], jobs: int, repo: Path = REPO_ROOT, keep: bool = False
) -> ModuleResult:
    """Mutate ``module`` in a scratch copy, run its tests against every mutant, and read back the results."""
    scratch = Path(tempfile.mkdtemp(prefix=f"pbbq-mutation-{module.name}-"))
    start = time.perf_counter()
    try:
        prepare_scratch(repo, scratch, module)
        _mutmut(scratch, "run", "--max-children", str(jobs), *module.patterns(), log=scratch / "mutmut-run.log")
        statuses = parse_results(_mutmut(scratch, "results", "--all", "true"))
        statuses = {name: status for name, status in statuses.items() if module.selects(name)}
        if not statuses:
            raise MutationError(f"{module.name}: mutmut made no mutants of {module.path} (see {scratch})")
        result = ModuleResult(module, statuses, 0.0)
        for mutant in result.survivors:
            result.changed[mutant] = changed_lines(_mutmut(scratch, "show", mutant))
        match_equivalents(result, known)
        result.seconds = time.perf_counter() - start
        return result
    finally:
        if keep:
            print(f"{module.name}: scratch copy kept in {scratch} (mutmut show/browse there)", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}" if whole else "-"


def table(results: Iterable[ModuleResult]) -> str:
    """The Markdown table: module, mutants, killed, survived, equivalent survivors, % killed, % killed of the
    mutants that are not equivalent, time."""
    rows = [
        "| module | mutants | killed | survived | equivalent | % killed | % killed, equivalents aside | time (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        total, killed, equivalent = len(r.statuses), r.killed, len(r.equivalent)
        rows.append(
            f"| {r.module.name} | {total} | {killed} | {total - killed} | {equivalent} | {percent(killed, total)} "
            f"| {percent(killed, total - equivalent)} | {r.seconds:.0f} |"
        )
    return "\n".join(rows)


def survivors_report(results: Iterable[ModuleResult], show_equivalents: bool) -> str:
    """Each survivor that is not a known equivalent with its status and mutated line; the known equivalents with
    their reason (with ``show_equivalents``); entries of the equivalents file that matched nothing."""
    lines = []
    for r in results:
        for mutant in r.survivors:
            changed = " / ".join(r.changed.get(mutant, [])) or "(no diff)"
            if mutant in r.equivalent:
                if show_equivalents:
                    lines.append(f"  equivalent {mutant}: {changed}\n      {r.equivalent[mutant].reason}")
            else:
                lines.append(f"  SURVIVED ({r.statuses[mutant]}) {mutant}: {changed}")
        lines += [f"  stale equivalent entry of {r.module.name}: {e.function}: {e.mutated}" for e in r.unmatched]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen rule modules (all by default) and print the table and the survivors."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="rule modules of [tool.pbbq.mutation] (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--show", action="store_true", help="also list the equivalent survivors and their reason")
    parser.add_argument("--keep", action="store_true", help="keep each scratch copy to inspect with mutmut")
    args = parser.parse_args(argv)
    try:
        modules = load_modules()
        unknown = [name for name in args.modules if name not in modules]
        if unknown:
            raise MutationError(f"unknown rule module {', '.join(unknown)}; known: {', '.join(modules)}")
        equivalents = load_equivalents()
        results = []
        for name in args.modules or list(modules):
            print(f"{name}: mutating {modules[name].path} ...", file=sys.stderr, flush=True)
            results.append(run_module(modules[name], equivalents.get(name, []), args.jobs, keep=args.keep))
    except MutationError as exc:
        print(f"mutation: error: {exc}", file=sys.stderr)
        return 1
    print(table(results))
    total = sum(r.seconds for r in results)
    print(f"\n{sum(len(r.statuses) for r in results)} mutants in {total / 60:.1f} min")
    report = survivors_report(results, args.show)
    if report:
        print("\nSurvivors:\n" + report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
