"""Writing records: idempotent upserts, one transaction per batch."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from daskscope import model
from daskscope.store.engine import IMMEDIATE, Store, as_engine, display_url, short_reason
from daskscope.store.errors import WriteFailed
from daskscope.store.schema import TABLE_FOR

__all__ = ["write_records"]

# SQLite allows 32766 bound parameters per statement; stay well below it in case
# the driver ever folds an executemany into one multi-row INSERT.
_MAX_PARAMS = 30_000
_MAX_ROWS = 5_000

_INSERT = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}
_statements: dict[tuple[str, str], Any] = {}


def write_records(store_or_engine: Store | sa.Engine, records: Iterable[model.Record]) -> int:
    """Upsert ``records`` in one transaction (all or nothing); return how many rows
    were written. Records sharing an id collapse to the last one: a batch written
    twice is stored once, and newer values win."""
    engine = as_engine(store_or_engine)
    batches = []
    for cls, group in model.group_by_kind(records):
        table = TABLE_FOR.get(cls)
        if table is None:
            raise TypeError(f"{cls.__name__} is not a daskscope record type")
        rows = {r.id: model.record_to_dict(r) for r in group}
        batches.append((table, list(rows.values())))
    total = sum(len(rows) for _, rows in batches)
    if not total:
        return 0
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(**{IMMEDIATE: True})
            with conn.begin():
                for table, rows in batches:
                    if engine.dialect.name == "postgresql":
                        _copy_upsert(conn, table, rows)
                        continue
                    stmt = _upsert(engine.dialect.name, table)
                    size = max(1, min(_MAX_ROWS, _MAX_PARAMS // len(table.columns)))
                    for start in range(0, len(rows), size):
                        conn.execute(stmt, rows[start : start + size])
    except sa.exc.DBAPIError as exc:
        retryable = isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError)) or bool(
            exc.connection_invalidated
        )
        raise WriteFailed(
            f"writing {total} records to {display_url(engine.url)} failed: {short_reason(exc)}; "
            "nothing of this batch was stored"
            + ("; it can be retried" if retryable else "; the data was rejected"),
            retryable=retryable,
        ) from exc
    return total


def _upsert(dialect: str, table: sa.Table) -> Any:
    """``INSERT ... ON CONFLICT (id) DO UPDATE SET col = excluded.col`` for every column."""
    key = (dialect, table.name)
    stmt = _statements.get(key)
    if stmt is None:
        try:
            insert = _INSERT[dialect]
        except KeyError:
            raise TypeError(f"daskscope cannot write to {dialect} databases") from None
        ins = insert(table)
        stmt = ins.on_conflict_do_update(
            index_elements=[table.c.id],
            set_={c.name: ins.excluded[c.name] for c in table.columns if c.name != "id"},
        )
        _statements[key] = stmt
    return stmt


def _copy_upsert(conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """PostgreSQL: COPY the rows into a temporary table, then upsert them in one
    statement. One statement per row (even pipelined) costs several times more."""
    import psycopg
    from psycopg.types.json import Jsonb

    sql = _copy_sql(table)
    # The driver's own connection is the one of this transaction: all or nothing holds.
    try:
        with conn.connection.driver_connection.cursor() as cursor:
            cursor.execute(sql.create_staging)
            cursor.execute(sql.empty_staging)
            with cursor.copy(sql.copy) as copy:
                for row in rows:
                    copy.write_row(
                        [Jsonb(row[c]) if c in sql.json_columns else row[c] for c in sql.columns]
                    )
            cursor.execute(sql.upsert)
    except psycopg.Error as exc:
        # Errors of the driver's own API: wrap them as SQLAlchemy does its own
        raise sa.exc.DBAPIError.instance(None, None, exc, psycopg.Error) from exc


@dataclass(frozen=True)
class _CopySQL:
    columns: tuple[str, ...]
    json_columns: frozenset[str]
    create_staging: str
    empty_staging: str
    copy: str
    upsert: str


@functools.cache
def _copy_sql(table: sa.Table) -> _CopySQL:
    quote = postgresql.dialect().identifier_preparer.quote
    name, staging = quote(table.name), quote(f"staging_{table.name}")
    columns = tuple(c.name for c in table.columns)
    listed = ", ".join(quote(c) for c in columns)
    updates = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in columns if c != "id")
    return _CopySQL(
        columns=columns,
        json_columns=frozenset(c.name for c in table.columns if isinstance(c.type, sa.JSON)),
        create_staging=f"CREATE TEMP TABLE IF NOT EXISTS {staging} (LIKE {name}) "
        "ON COMMIT DELETE ROWS",
        # DELETE, not TRUNCATE: on a small temporary table TRUNCATE costs milliseconds
        empty_staging=f"DELETE FROM {staging}",
        copy=f"COPY {staging} ({listed}) FROM STDIN",
        upsert=f"INSERT INTO {name} ({listed}) SELECT {listed} FROM {staging} "
        f"ON CONFLICT (id) DO UPDATE SET {updates}",
    )
