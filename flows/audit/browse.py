"""``pbbq browse RUN``: a run's tables in Datasette (docs/architecture.md §5).

Every parquet table of the run goes into one SQLite file, ``RUN/run.db``, written once (to a temporary name,
then renamed, then made read-only) and written again only if the run changed since. Nested columns (lists,
structs: ``answer_info``, ``additional_metadata``, ...) are stored as JSON text. Besides the tables: ``examples``
(a view: the examples of every config, with their ``config``), ``drops`` (every drop each stage declares and
counts, with the stage, the table and the reason), ``run_inputs`` and ``run_stages`` (the manifest and the
reports). Datasette (the optional ``browse`` extra) serves it read-only on 127.0.0.1 with facets per table and
saved queries for the common questions.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ...tasks.core.artifacts import FILE_MODE, sha256_file
from ...tasks.imports import one_import_at_a_time
from .runs import (
    AuditError,
    drop_tables,
    example_tables,
    manifest,
    stage_folders,
    stage_report,
    table_path,
)

DB_NAME = "run.db"
DATABASE = "run"
"""The database's name in Datasette's URLs (``/run/<table>``)."""
FACETS = ("reason", "stage", "category", "config", "assignment", "context_condition", "kind", "check", "kept")
"""Columns offered as facets wherever a table has them."""
ID_COLUMNS = ("example_id", "template_id", "stereotype_id", "segment_id", "post_id", "candidate_id")
"""The id a drop is listed by: the first of these its table has."""


def table_name(relative: Path) -> str:
    """The SQLite name of a parquet file of the run: ``06_names/unmapped.parquet`` → ``06_names_unmapped``; a
    release file ``10_publish/hub/data/<config>/test-….parquet`` → ``release_<config>``."""
    parts = relative.with_suffix("").parts
    if len(parts) >= 4 and parts[-4:-2] == ("hub", "data"):
        return f"release_{parts[-2]}"
    return "_".join(parts)


def _column(array: pa.ChunkedArray) -> list[Any]:
    """A column as SQLite takes it: nested values as JSON text."""
    kind = array.type
    if pa.types.is_nested(kind):
        return [None if v is None else json.dumps(v, ensure_ascii=False) for v in array.to_pylist()]
    return array.to_pylist()


def _write_table(connection: sqlite3.Connection, name: str, table: pa.Table) -> None:
    frame = pd.DataFrame({column: _column(table.column(column)) for column in table.column_names})
    frame.to_sql(name, connection, index=False)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _columns(connection: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in connection.execute(f"pragma table_info({_quote(table)})")]


def _examples_view(connection: sqlite3.Connection, tables: dict[str, str | None], run: Path) -> None:
    """``examples``: the examples of every config, with their ``config``."""
    present = [
        (c, name) for c, t in example_tables(run).items() if (name := table_name(Path(f"{t}.parquet"))) in tables
    ]
    if present:
        shared = [
            c for c in _columns(connection, present[0][1]) if all(c in _columns(connection, n) for _, n in present)
        ]
        select = ", ".join(_quote(c) for c in shared)
        union = " union all ".join(f"select '{config}' as config, {select} from {_quote(n)}" for config, n in present)
        connection.execute(f"create view examples as {union}")


def _drops_table(connection: sqlite3.Connection, tables: dict[str, str | None], run: Path) -> None:
    """``drops``: every row a stage did not carry on, and nothing else. Each stage's drops are the reasons its report
    counts as dropped; their rows come from the tables it declares as holding its drops (the manifest's ``drops``,
    docs/architecture.md §9), and where those tables carry no row of a reason (a review sheet of LLM attempts has no
    ``reason`` column) from the drops its report lists."""
    connection.execute("create table drops (stage text, source_table text, reason text, id text, category text)")
    for folder in stage_folders(run):
        report = stage_report(run, folder)
        counted = list(report.get("dropped", {}).get("by_reason", {}))
        if not counted:
            continue
        declared = [f"{folder}_{table}" for table in drop_tables(run, folder)]
        for name in (n for n in declared if n in tables and "reason" in _columns(connection, n)):
            columns = _columns(connection, name)
            row_id = next((c for c in ID_COLUMNS if c in columns), "rowid")
            category = "category" if "category" in columns else "null"
            kept = " and not kept" if "kept" in columns else ""
            connection.execute(
                f"insert into drops select ?, ?, reason, {_quote(row_id)}, {category} from {_quote(name)} "
                f"where reason in ({', '.join('?' * len(counted))}){kept}",
                (folder, name, *counted),
            )
        found = {r for (r,) in connection.execute("select distinct reason from drops where stage = ?", (folder,))}
        listed = [d for d in report.get("drops", []) if d.get("reason") in set(counted) - found]
        connection.executemany(
            "insert into drops values (?, ?, ?, ?, ?)",
            [
                (folder, declared[0] if declared else None, d["reason"], _listed_id(d), d.get("category"))
                for d in listed
            ],
        )


def _listed_id(drop: dict[str, Any]) -> str | None:
    """The id a drop its report lists goes by: the first of :data:`ID_COLUMNS` it names."""
    return next((str(drop[c]) for c in ID_COLUMNS if drop.get(c) is not None), None)


def _run_tables(connection: sqlite3.Connection, run: Path) -> None:
    """The manifest's inputs and each stage's report, as tables."""
    info = manifest(run)
    inputs = pd.DataFrame(
        [
            {"input": k, "path": v.get("path"), "sha256": v.get("sha256"), "rows": v.get("rows")}
            for k, v in info.get("inputs", {}).items()
        ],
        columns=["input", "path", "sha256", "rows"],
    )
    inputs.to_sql("run_inputs", connection, index=False)
    stages = []
    for folder in stage_folders(run):
        report = stage_report(run, folder)
        stages.append(
            {
                "stage": folder,
                "counts": json.dumps(report.get("counts", {}), ensure_ascii=False),
                "dropped": report.get("dropped", {}).get("total", 0),
                "by_reason": json.dumps(report.get("dropped", {}).get("by_reason", {}), ensure_ascii=False),
                "cached": report.get("cached"),
                "warnings": json.dumps(report.get("warnings", []), ensure_ascii=False),
            }
        )
    pd.DataFrame(stages, columns=["stage", "counts", "dropped", "by_reason", "cached", "warnings"]).to_sql(
        "run_stages", connection, index=False
    )


def _stamp(run: Path) -> str:
    return sha256_file(run / "manifest.json")


def build_db(run: Path) -> Path:
    """``RUN/run.db`` with every parquet table of the run, the views and the run tables; kept as it is when it
    was made from the run's current manifest."""
    target = run / DB_NAME
    stamp = _stamp(run)
    if target.is_file():
        with sqlite3.connect(f"file:{target}?mode=ro", uri=True) as existing:
            try:
                made_from = existing.execute("select manifest_sha256 from run_db").fetchone()[0]
            except sqlite3.DatabaseError:
                made_from = None
        if made_from == stamp:
            return target
    handle, temporary = tempfile.mkstemp(dir=run, prefix=f".{DB_NAME}.", suffix=".tmp")
    os.close(handle)
    try:
        connection = sqlite3.connect(temporary)
        with connection:
            tables: dict[str, str | None] = {}
            for path in sorted(run.rglob("*.parquet")):
                relative = path.relative_to(run)
                name = table_name(relative)
                if name in tables:
                    raise AuditError(f"{path}: two parquet files of the run map to the table {name!r}")
                _write_table(connection, name, pq.read_table(path))
                tables[name] = relative.parts[0] if len(relative.parts) == 2 else None
            _examples_view(connection, tables, run)
            _drops_table(connection, tables, run)
            _run_tables(connection, run)
            connection.execute("create table run_db (run_id text, manifest_sha256 text)")
            connection.execute("insert into run_db values (?, ?)", (manifest(run)["run_id"], stamp))
        connection.close()
        os.chmod(temporary, FILE_MODE & ~0o222)  # read-only: Datasette serves it immutable
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def metadata(run: Path, db: Path) -> dict[str, Any]:
    """Datasette's metadata: a title, facets per table (the :data:`FACETS` it has) and the saved queries."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        names = [row[0] for row in connection.execute("select name from sqlite_master where type in ('table', 'view')")]
        tables = {
            name: {"facets": [c for c in FACETS if c in _columns(connection, name)]}
            for name in names
            if name != "run_db"
        }
        queries = {
            "drops_by_reason": {
                "title": "Drops by stage and reason",
                "description": "What each stage did not carry on, and why (its declared drop tables).",
                "sql": "select stage, source_table, reason, count(*) as rows from drops "
                "group by stage, source_table, reason order by stage, rows desc",
            }
        }
        if "examples" in names:
            queries["example_lineage"] = {
                "title": "An example's lineage",
                "description": "An example (any config) back to its original, template, gate decision and stereotype.",
                "sql": _lineage_sql(connection, names, run),
            }
    return {
        "title": f"PBBQ run {manifest(run)['run_id']}",
        "description": "Every table of the run; nested columns are JSON text. pbbq audit RUN writes the report.",
        "databases": {DATABASE: {"tables": {k: v for k, v in tables.items() if v["facets"]}, "queries": queries}},
    }


def _lineage_sql(connection: sqlite3.Connection, names: list[str], run: Path) -> str:
    """One row per step from an example (``:example_id``) back to its stereotype, with what decided it."""
    steps = [
        "select 1 as step, 'example (' || config || ')' as what, example_id as id, context as text "
        "from examples where example_id = :example_id",
        "select 2, 'original (fa)', e.example_id, e.context from examples e where e.config = 'fa' and e.example_id = "
        "(select coalesce(nullif(source_example_id, ''), example_id) from examples where example_id = :example_id)",
        "select 3, 'variant (' || config || ')', example_id, context from examples where source_example_id = "
        "(select coalesce(nullif(source_example_id, ''), example_id) from examples where example_id = :example_id)",
    ]
    template = "(select template_id from examples where example_id = :example_id)"
    stereotype = "(select stereotype_id from examples where example_id = :example_id)"
    table = {
        name: table_name(Path(f"{table_path(run, name)}.parquet"))
        for name in (
            "disambiguate/templates",
            "disambiguate/attempts",
            "kappa_gate/templates",
            "survey_filter/stereotypes",
            "crawl/candidates",
        )
    }
    if table["disambiguate/templates"] in names:
        columns = _columns(connection, table["disambiguate/templates"])
        source = next((c for c in ("disambiguated_source", "disambiguated_biased_source") if c in columns), None)
        text = next((c for c in ("disambiguated_fa", "disambiguated_biased_fa") if c in columns), "ambiguous_fa")
        steps.append(
            f"select 4, 'continuation (' || {source or "''"} || ')', template_id, {text} "
            f"from {_quote(table['disambiguate/templates'])} where template_id = {template}"
        )
    if table["disambiguate/attempts"] in names:
        steps.append(
            "select 5, 'LLM attempt ' || attempt || ' (' || assignment || case when failures != '' "
            "then ', broke: ' || failures else '' end || ')', request_id, answer "
            f"from {_quote(table['disambiguate/attempts'])} where template_id = {template}"
        )
    if table["kappa_gate/templates"] in names:
        steps.append(
            "select 6, 'kappa gate: ' || reason || ' (kappa ' || round(kappa, 3) || ', relevance ' || "
            f"round(mean_relevance, 2) || ')', template_id, ambiguous_fa from {_quote(table['kappa_gate/templates'])} "
            f"where template_id = {template}"
        )
    if table["survey_filter/stereotypes"] in names:
        steps.append(
            "select 7, 'survey: ' || reason || ' (acceptance ' || round(acceptance, 3) || ' [' || round(ci_low, 3) "
            f"|| ', ' || round(ci_high, 3) || '])', stereotype_id, statement_fa "
            f"from {_quote(table['survey_filter/stereotypes'])} "
            f"where stereotype_id = {stereotype}"
        )
    candidates = table["crawl/candidates"]
    if candidates in names and "stereotype_id" in _columns(connection, candidates):
        post_ids = "post_ids" if "post_ids" in _columns(connection, candidates) else "''"
        steps.append(
            f"select 8, 'crawl candidate', candidate_id, {post_ids} from {_quote(candidates)} "
            f"where stereotype_id = {stereotype}"
        )
    return " union all ".join(steps) + " order by step"


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for the server, taken before anything else starts, so that a port in use
    is one clear error rather than the web server's own message after the database is built."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AuditError(f"port {port} on {host} is in use; choose another with --port") from None
        raise AuditError(f"cannot listen on port {port} of {host} ({exc.strerror})") from None
    return sock


def serve(run: Path, host: str = "127.0.0.1", port: int = 8001) -> None:
    """Build ``run.db`` if needed and serve it read-only with Datasette until interrupted."""
    try:
        with one_import_at_a_time():
            import uvicorn
            from datasette.app import Datasette
    except ImportError as exc:
        raise AuditError('pbbq browse needs Datasette: pip install -e ".[browse]"') from exc
    import asyncio

    sock = listening_socket(host, port)
    db = build_db(run)
    app = Datasette(
        immutables=[str(db)],
        metadata=metadata(run, db),
        settings={"default_facet_size": 20, "facet_time_limit_ms": 1000, "sql_time_limit_ms": 5000},
    )
    asyncio.run(app.invoke_startup())
    print(f"serving {db} on http://{host}:{port}/{DATABASE} (Ctrl-C stops)", flush=True)
    config = uvicorn.Config(app.app(), host=host, port=port, log_level="warning", lifespan="on")
    with sock:
        uvicorn.Server(config).run(sockets=[sock])
