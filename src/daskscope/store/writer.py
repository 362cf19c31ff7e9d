"""Writing records: idempotent upserts, one transaction per batch, text escaped
(:mod:`daskscope.text`), a record the database refuses left out of its batch."""

from __future__ import annotations

import base64
import functools
import logging
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from daskscope import model
from daskscope.store.database import IMMEDIATE, Database, as_engine, display_url
from daskscope.store.errors import RecordConflict, WriteFailed, short_reason
from daskscope.store.schema import TABLE_FOR, Blob, conflict_columns, span_tags, spans
from daskscope.store.span_tags import span_tag_rows
from daskscope.text import escape_rows

__all__ = ["Parts", "Rejected", "prepare_writes", "write_parts", "write_records", "write_rows"]

logger = logging.getLogger("daskscope")

# SQLite allows 32766 bound parameters per statement; stay well below it in case
# the driver ever folds an executemany into one multi-row INSERT.
_MAX_PARAMS = 30_000
_MAX_ROWS = 5_000

_INSERT: dict[str, Callable[[sa.Table], sqlite.Insert | postgresql.Insert]] = {
    "sqlite": sqlite.insert,
    "postgresql": postgresql.insert,
}
_statements: dict[tuple[str, str], Any] = {}


def write_records(
    store_or_engine: Database | sa.Engine,
    records: Iterable[model.Record],
    *,
    rejected: list[Rejected] | None = None,
) -> int:
    """Upsert ``records`` in one transaction; return how many rows were written.
    Records sharing an id collapse to the last one: a batch written twice is stored
    once, and newer values win. A record the database refuses on its own is left out
    and the rest written (see :func:`write_rows`)."""
    rows_by_table: dict[sa.Table, list[dict[str, Any]]] = {}
    for cls, group in model.group_by_kind(records):
        table = TABLE_FOR.get(cls)
        if table is None:
            raise TypeError(f"{cls.__name__} is not a daskscope record type")
        rows_by_table[table] = [model.record_to_dict(r) for r in group]
    return write_rows(store_or_engine, rows_by_table, rejected=rejected)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record the database refused on its own (its batch was stored without it)."""

    table: str
    record_id: str
    reason: str


def write_rows(
    store_or_engine: Database | sa.Engine,
    rows_by_table: Mapping[sa.Table, Sequence[dict[str, Any]]],
    *,
    before_write: Callable[[sa.Connection], None] | None = None,
    rejected: list[Rejected] | None = None,
    superseded: dict[str, int] | None = None,
) -> int:
    """:func:`write_records` for rows that are already plain dicts with every column;
    returns the number of rows written (:func:`write_parts` says how). ``before_write``
    runs first in the same transaction (on SQLite, holding the write lock)."""
    records = sum(len(rows) for rows in rows_by_table.values())
    if not records:
        return 0

    def the_one_part(conn: sa.Connection) -> Iterator[Mapping[sa.Table, Sequence[dict[str, Any]]]]:
        if before_write is not None:
            before_write(conn)
        yield rows_by_table

    return write_parts(
        store_or_engine, the_one_part, records, rejected=rejected, superseded=superseded
    )


Parts = Callable[[sa.Connection], Iterable[Mapping[sa.Table, Sequence[dict[str, Any]]]]]


def write_parts(
    store_or_engine: Database | sa.Engine,
    parts: Parts,
    records: int,
    *,
    rejected: list[Rejected] | None = None,
    superseded: dict[str, int] | None = None,
) -> int:
    """Write the ``records`` of one batch, given part by part, in one transaction;
    returns the number of rows written.

    ``parts(conn)`` yields the batch's rows by table a part at a time (so that only a
    part is held in memory), and may check each part in the transaction, ``conn``,
    first: whatever it raises rolls the whole batch back and reaches the caller. It is
    called again when the batch is written again (a deadlock, a refused record), so it
    must give the same parts each time. Rows of one id collapse to the last one within
    a part; across parts, the newer revision wins.

    A row moves only forward: a record whose ``revision`` is not higher than its stored
    row's (an older snapshot delivered late, a replay) leaves the row as it is, and a
    closed cluster stays closed; such records are counted by table in ``superseded``.
    Unnumbered records (revision 0) replace only unnumbered rows.

    Text is escaped first (:mod:`daskscope.text`). One record that the database still
    refuses (a value out of range, a required field missing) never fails its batch:
    the batch is written again with that record left out, which is logged with its id
    and appended to ``rejected``. A row never moves to another cluster (or a cluster to
    another account): an upsert that would do so is refused, and the whole batch with
    it (:class:`RecordConflict`). A lost connection or lock raises a retryable
    :class:`WriteFailed`, and nothing of the batch is stored.
    """
    engine = as_engine(store_or_engine)
    refused: list[Rejected] = []
    older: dict[str, int] = {}
    try:
        try:
            total = _transaction_retried(engine, parts, None, older)
        except _DATA_ERRORS as exc:
            if _retryable(exc):
                raise
            # Some record is refused by the database itself: write the batch again,
            # each table under a savepoint, halving until the refused records are found.
            total = _transaction_retried(engine, parts, refused, older)
    except _PartsFailed as failed:
        raise failed.cause from None  # the caller's own check, or its decoding
    except sa.exc.DBAPIError as exc:
        retryable = _retryable(exc)
        raise WriteFailed(
            f"writing {records} records to {display_url(engine.url)} failed: "
            f"{short_reason(exc)}; nothing of this batch was stored"
            + ("; it can be retried" if retryable else "; the data was rejected"),
            retryable=retryable,
        ) from exc
    for item in refused:
        logger.warning(
            "daskscope: %s refused record %s of %s (%s); the rest of its batch was stored",
            display_url(engine.url),
            item.record_id,
            item.table,
            item.reason,
        )
    if rejected is not None:
        rejected.extend(refused)
    if superseded is not None:
        for table_name, count in older.items():
            superseded[table_name] = superseded.get(table_name, 0) + count
    return total - len(refused) - sum(older.values())


# What a database (or its driver) raises for data it will not take: DBAPI errors, and
# encoding, type or range errors raised while binding parameters
_DATA_ERRORS = (sa.exc.StatementError, ValueError, TypeError, OverflowError)
# PostgreSQL error classes that mean "later": connection, transaction rollback
# (serialization, deadlock), resources, operator intervention, system error
_RETRYABLE_SQLSTATE_CLASSES = {"08", "40", "53", "55", "57", "58"}


def _retryable(exc: BaseException) -> bool:
    """True when the cause is the connection or a lock, not the data."""
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    sqlstate = getattr(exc.orig, "sqlstate", None)
    if sqlstate:
        return sqlstate[:2] in _RETRYABLE_SQLSTATE_CLASSES
    return isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError))


def _in_lock_order(
    rows_by_table: Mapping[sa.Table, Sequence[dict[str, Any]]],
) -> list[tuple[sa.Table, list[dict[str, Any]]]]:
    """The batch's rows, one per id (the last wins), tables by name and rows by id: two
    batches upserting overlapping rows then lock them in the same order, so that they
    wait for each other instead of deadlocking (PostgreSQL)."""
    batches = []
    for table in sorted(rows_by_table, key=lambda t: t.name):
        rows = {row["id"]: row for row in rows_by_table[table]}
        if rows:
            batches.append((table, [rows[key] for key in sorted(rows)]))
    return batches


#: Times a batch is written again when the database chose it to break a deadlock or a
#: serialization conflict (only possible against writers that lock in another order)
_DEADLOCK_RETRIES = 3
_DEADLOCK_SQLSTATES = {"40P01", "40001"}


def _transaction_retried(
    engine: sa.Engine,
    parts: Parts,
    refused: list[Rejected] | None,
    older: dict[str, int],
) -> int:
    for attempt in range(_DEADLOCK_RETRIES + 1):
        if refused is not None:
            refused.clear()  # found again by this attempt
        older.clear()
        try:
            return _transaction(engine, parts, refused, older)
        except sa.exc.DBAPIError as exc:
            sqlstate = getattr(exc.orig, "sqlstate", None)
            if sqlstate not in _DEADLOCK_SQLSTATES or attempt == _DEADLOCK_RETRIES:
                raise
            logger.info("daskscope: a batch met a deadlock; writing it again")
    raise AssertionError("unreachable")  # the last attempt returns or raises


def _transaction(
    engine: sa.Engine,
    parts: Parts,
    refused: list[Rejected] | None,
    older: dict[str, int],
) -> int:
    """Write every part in one transaction; with ``refused``, leave out (and list) the
    records the database refuses instead of failing. ``older`` counts by table the rows
    left as stored because what is stored is as new or newer. Returns the number of
    rows the parts held (one per id within a part)."""
    total = 0
    with engine.connect() as conn:
        conn = conn.execution_options(**{IMMEDIATE: True})
        with conn.begin():
            for part in _own_failures(parts(conn)):  # it may label rows: escape after
                for table, rows in _in_lock_order(part):
                    total += len(rows)
                    rows, document = _escaped(rows)
                    if refused is None:
                        kept = _write_table(conn, table, rows, document)
                    else:
                        kept = _write_table_carefully(conn, table, rows, refused)
                    if kept:
                        older[table.name] = older.get(table.name, 0) + kept
                    if table is spans and (tags := span_tag_rows(rows)):
                        # their index (store/span_tags.py), as new as the span rows
                        _write_table(conn, span_tags, tags)
    return total


class _PartsFailed(Exception):
    """What the caller's parts raised (told apart from the database's refusals)."""

    def __init__(self, cause: Exception):
        super().__init__(str(cause))
        self.cause = cause


def _own_failures(parts: Iterable[Mapping[sa.Table, Sequence[dict[str, Any]]]]) -> Iterator[Any]:
    """``parts``, with what producing them raises carried as :class:`_PartsFailed`,
    except the database's own errors (a check's query that lost its connection or met a
    deadlock): those are retried or reported as any write's."""
    iterator = iter(parts)
    while True:
        try:
            part = next(iterator)
        except StopIteration:
            return
        except sa.exc.DBAPIError:
            raise
        except Exception as exc:
            raise _PartsFailed(exc) from exc
        yield part


def _escaped(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bytes | None]:
    """``rows`` with their text escaped (:mod:`daskscope.text`) and, when nothing needed
    it, their JSON document: the one encoding that finds out is also what PostgreSQL
    is sent (encoding a batch twice was a tenth of the server's CPU at ingest)."""
    try:
        document = _json.encode(rows)
    except UnicodeEncodeError:  # a lone surrogate
        return list(escape_rows(rows)), None
    if b"\\u0000" in document:  # a NUL (or text holding these six characters)
        return list(escape_rows(rows)), None
    return rows, document


def _write_table(
    conn: sa.Connection,
    table: sa.Table,
    rows: list[dict[str, Any]],
    document: bytes | None = None,
) -> int:
    """Upsert ``rows``; returns how many were left as stored, being no newer."""
    written = _upsert_rows(conn, table, rows, document)
    if written == len(rows):
        return 0
    # rows the guard kept: another owner's (the batch is refused), or no newer
    conflict = _find_conflict(conn, table, rows)
    if conflict is not None:
        raise conflict
    return len(rows) - written


def _write_table_carefully(
    conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]], refused: list[Rejected]
) -> int:
    try:
        with conn.begin_nested():
            return _write_table(conn, table, rows)
    except _DATA_ERRORS as exc:
        if _retryable(exc):
            raise
        if len(rows) == 1:
            refused.append(Rejected(table.name, str(rows[0]["id"]), short_reason(exc)))
            return 0
        half = len(rows) // 2
        return _write_table_carefully(conn, table, rows[:half], refused) + _write_table_carefully(
            conn, table, rows[half:], refused
        )


def _upsert_rows(
    conn: sa.Connection,
    table: sa.Table,
    rows: list[dict[str, Any]],
    document: bytes | None = None,
) -> int:
    """Upsert ``rows`` (``document``: their JSON, when already encoded); the number of
    rows inserted or updated (guarded ones are not)."""
    if conn.dialect.name == "postgresql":
        return _json_upsert(conn, table, rows, document)
    if conn.dialect.name == "sqlite":
        return _sqlite_upsert(conn, table, rows)
    stmt = _upsert(conn.dialect.name, table)
    size = max(1, min(_MAX_ROWS, _MAX_PARAMS // len(table.columns)))
    written = 0
    for start in range(0, len(rows), size):
        written += conn.execute(stmt, rows[start : start + size]).rowcount
    return written


def _sqlite_upsert(conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> int:
    """SQLite: the upsert's SQL compiled once and each row a tuple for the driver's
    executemany. SQLAlchemy's per-row parameter processing cost twice what SQLite's own
    upserts did (the recorder's store child spent its time there); the values it
    converts are converted here the same way: a JSON column's value as JSON text (None
    as ``null``), a bytes column's base64 text decoded."""
    sql, values_of, json_at, blob_at = _sqlite_upsert_sql(table)
    encode = _json.encode
    params: list[tuple[Any, ...]] = []
    for row in rows:
        values = values_of(row)
        if json_at or blob_at:
            converted = list(values)
            for i in json_at:
                converted[i] = encode(converted[i]).decode()
            for i in blob_at:
                if isinstance(converted[i], str):
                    converted[i] = base64.b64decode(converted[i])
            values = tuple(converted)
        params.append(values)
    written = 0
    for start in range(0, len(params), _MAX_ROWS):
        written += conn.exec_driver_sql(sql, params[start : start + _MAX_ROWS]).rowcount
    return written


def prepare_writes(store_or_engine: Database | sa.Engine) -> None:
    """Compile every table's upsert now (about 2 ms each), so that a writer started
    for one cluster pays it at its start rather than in its first writes."""
    if as_engine(store_or_engine).dialect.name == "sqlite":
        for table in TABLE_FOR.values():
            _sqlite_upsert_sql(table)


@functools.cache
def _sqlite_upsert_sql(
    table: sa.Table,
) -> tuple[str, Callable[[dict[str, Any]], tuple[Any, ...]], list[int], list[int]]:
    """The upsert's SQL text with positional parameters, a function taking a row's
    values in parameter order (one C call a row), and the positions of its JSON and
    its bytes columns (their values are converted)."""
    compiled = _upsert("sqlite", table).compile(
        dialect=sqlite.dialect(), column_keys=[c.name for c in table.columns]
    )
    names = list(compiled.positiontup or [])
    json_at, blob_at = [], []
    for i, name in enumerate(names):
        column_type = table.c[name].type
        if isinstance(column_type, sa.JSON):
            json_at.append(i)
        elif isinstance(column_type, sa.LargeBinary) or (
            isinstance(column_type, sa.TypeDecorator)
            and isinstance(column_type.impl_instance, sa.LargeBinary)
        ):
            blob_at.append(i)
    getter = operator.itemgetter(*names)
    values_of = getter if len(names) > 1 else (lambda row: (getter(row),))
    return str(compiled), values_of, json_at, blob_at


def _owner_columns(table: sa.Table) -> tuple[str, ...]:
    # What a row must keep when it is written again: its cluster (a cluster: its account
    # and the member who recorded it, so that no one else can relabel it)
    return ("account", "user") if table.name == "clusters" else ("cluster_id",)


def _find_conflict(
    conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]
) -> RecordConflict | None:
    """Which row would have moved to another owner; None when every row the upsert
    left alone was only no newer than its stored row (only run when some was left)."""
    owners = _owner_columns(table)
    sent = {row["id"]: tuple(row[o] for o in owners) for row in rows}
    ids = list(sent)
    for start in range(0, len(ids), _MAX_ROWS):
        query = sa.select(table.c.id, *(table.c[o] for o in owners)).where(
            table.c.id.in_(ids[start : start + _MAX_ROWS])
        )
        for row_id, *stored in conn.execute(query):
            if tuple(stored) != sent[row_id]:
                return RecordConflict(table.name, row_id, owners[0])
    if "revision" not in table.c:
        return RecordConflict(table.name, ids[0], owners[0])
    return None


def _moves_forward(table: sa.Table, new: Any) -> list[Any]:
    """Conditions under which the stored row of ``table`` takes the values of ``new``
    (the row sent): a higher revision (an unnumbered one only over an unnumbered row),
    and a closed cluster stays closed. SQLAlchemy expressions over the table's columns."""
    if "revision" not in table.c:
        return []
    zero: sa.ColumnElement[int] = sa.literal_column("0", sa.BigInteger)  # in the SQL text
    stored = sa.func.coalesce(table.c.revision, zero)
    conditions = [
        sa.or_(stored < new.revision, sa.and_(new.revision == zero, stored == zero)),
    ]
    if table.name == "clusters":
        conditions.append(sa.or_(table.c.stopped_at.is_(None), new.stopped_at.is_not(None)))
    return conditions


def _upsert(dialect: str, table: sa.Table) -> Any:
    """``INSERT ... ON CONFLICT (id) DO UPDATE SET col = excluded.col`` for every column
    (the conflict columns: ``schema.conflict_columns``),
    unless the stored row belongs to another owner."""
    key = (dialect, table.name)
    stmt = _statements.get(key)
    if stmt is None:
        try:
            insert = _INSERT[dialect]
        except KeyError:
            raise TypeError(f"daskscope cannot write to {dialect} databases") from None
        ins = insert(table)
        stmt = ins.on_conflict_do_update(
            index_elements=conflict_columns(table, dialect),
            set_={c.name: ins.excluded[c.name] for c in table.columns if c.name != "id"},
            where=sa.and_(
                *(
                    table.c[owner].is_not_distinct_from(ins.excluded[owner])
                    for owner in _owner_columns(table)
                ),
                *_moves_forward(table, ins.excluded),
            ),
        )
        _statements[key] = stmt
    return stmt


# str for what JSON cannot hold (annotations may carry any object); non-finite floats
# become null, which is what they mean here: not measured
_json = msgspec.json.Encoder(enc_hook=str)


def _json_upsert(
    conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]], document: bytes | None
) -> int:
    """PostgreSQL: the rows travel as one JSON document that the server unpacks itself
    (``jsonb_populate_recordset``) and upserts in one statement: no per-row work in
    Python, which is what bounded writes before."""
    if document is None:
        document = _json.encode(rows)
    text = document.decode()  # text: psycopg would send bytes as bytea
    result = conn.exec_driver_sql(_json_upsert_sql(table), (text,))
    return result.rowcount


class _Excluded:
    """``excluded.<column>`` of an upsert, as SQLAlchemy columns (for the hand-written
    PostgreSQL statement, which shares the writer's conditions)."""

    def __init__(self, table: sa.Table):
        self._table = table

    def __getattr__(self, name: str) -> Any:
        return sa.literal_column(f"excluded.{name}", type_=self._table.c[name].type)


def _pg_sql(condition: Any) -> str:
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    return str(condition.compile(dialect=dialect))


@functools.cache
def _json_upsert_sql(table: sa.Table) -> str:
    quote = postgresql.dialect().identifier_preparer.quote  # type: ignore[no-untyped-call]
    name = quote(table.name)
    columns = [c.name for c in table.columns]
    listed = ", ".join(quote(c) for c in columns)
    keys = [c.name for c in conflict_columns(table, "postgresql")]
    target = ", ".join(quote(c) for c in keys)
    updates = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in columns if c not in keys)
    guard = " AND ".join(
        [
            f"{name}.{quote(o)} IS NOT DISTINCT FROM excluded.{quote(o)}"
            for o in _owner_columns(table)
        ]
        + [f"({_pg_sql(c)})" for c in _moves_forward(table, _Excluded(table))]
    )
    # bytes travel as base64 text, which bytea takes as those characters: decode them
    selected = ", ".join(
        f"decode(encode({quote(c.name)}, 'escape'), 'base64')"
        if isinstance(c.type, Blob)
        else quote(c.name)
        for c in table.columns
    )
    return (
        f"INSERT INTO {name} ({listed}) SELECT {selected} "
        f"FROM jsonb_populate_recordset(NULL::{name}, %s::jsonb) "
        f"ON CONFLICT ({target}) DO UPDATE SET {updates} WHERE {guard}"
    )
