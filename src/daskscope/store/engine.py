"""Opening a store: URL handling, engine setup, schema checks and migrations."""

from __future__ import annotations

import sqlite3
import weakref
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from daskscope import config
from daskscope.store.database import IMMEDIATE, as_engine, display_url
from daskscope.store.errors import (
    AboutURL,
    BadDatabaseURL,
    DatabaseUnreachable,
    MigrationFailed,
    NotADaskscopeDatabase,
    SchemaTooNew,
    StoreError,
    short_reason,
)
from daskscope.store.reads import StoreReads

__all__ = ["IMMEDIATE", "Store", "as_engine", "display_url", "open_store"]

_URL_HINT = "use sqlite:///path/to/file.db or postgresql://user@host/dbname"
_VERSION_TABLE = "alembic_version"
#: The newest migration; a store already there opens without loading Alembic at all
#: (a test checks this against the migrations directory).
HEAD_REVISION = "0019"
# Serialises concurrent upgrades of one PostgreSQL database (any constant will do).
_PG_UPGRADE_LOCK = 0x6461736B73636F70  # "daskscop"
# SQLite engines whose file is known to be ours, so that WAL may be switched on.
_sqlite_wal: weakref.WeakKeyDictionary[sa.Engine, bool] = weakref.WeakKeyDictionary()


class Store(StoreReads):
    """An open daskscope database: the one door to it. Its reads are methods
    (:class:`~daskscope.store.reads.StoreReads`), its caches fields
    (:class:`~daskscope.store.database.Database`), and here the schema tools."""

    def upgrade(self) -> None:
        """Bring the schema to the newest revision (creating it on an empty database)."""
        from alembic import command

        cfg = _alembic_config()
        try:
            with self.engine.connect() as conn:
                conn = conn.execution_options(**{IMMEDIATE: True})
                with conn.begin():
                    if self.dialect == "postgresql":
                        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_UPGRADE_LOCK)))
                    cfg.attributes["connection"] = conn
                    command.upgrade(cfg, "head")
        except sa.exc.DBAPIError as exc:
            raise MigrationFailed(
                f"upgrading the schema of {self.display_url} failed: {short_reason(exc)}; "
                "nothing was changed, fix the cause and try again"
            ) from exc

    def current_revision(self) -> str | None:
        """The schema revision stored in the database (None: no daskscope schema)."""
        with self.engine.connect() as conn:
            return _stored_revision(conn)

    def head_revision(self) -> str:
        """The newest schema revision this version of daskscope knows."""
        head: str = _script().get_current_head()
        return head


def open_store(url: str | None = None, *, upgrade: bool = True) -> Store:
    """Open the store at ``url`` (default: the configured one), checking that it is
    a daskscope database and, with ``upgrade``, bringing its schema up to date."""
    text = config.database_url(url)
    try:
        parsed = parse_url(text)
        engine = _create_engine(parsed)
    except AboutURL as exc:
        exc.url = exc.url or _hidden(text)
        raise
    store = Store(engine, parsed)
    try:
        with engine.connect() as conn:
            _check_schema(conn, store.display_url, store.dialect)
        if store.dialect == "sqlite":
            _enable_wal(engine)
        if upgrade and store.current_revision() != HEAD_REVISION:
            store.upgrade()
    except StoreError as exc:
        engine.dispose()
        if isinstance(exc, AboutURL):
            exc.url = exc.url or store.display_url
        raise
    except sa.exc.DBAPIError as exc:
        engine.dispose()
        error = _classify(exc, store)
        error.url = store.display_url
        raise error from exc
    return store


def _hidden(text: str) -> str:
    # the URL as data for an error, its password hidden when it parses at all
    try:
        return display_url(sa.make_url(text))
    except sa.exc.ArgumentError:
        return text


def parse_url(text: str) -> sa.URL:
    """Parse and normalise a database URL; PostgreSQL URLs use psycopg 3."""
    try:
        url = sa.make_url(text)
    except sa.exc.ArgumentError:
        raise BadDatabaseURL(f"{text!r} is not a database URL; {_URL_HINT}") from None
    backend = url.get_backend_name()
    if backend in ("postgresql", "postgres"):
        driver = url.get_driver_name() if "+" in url.drivername else "psycopg"
        if driver != "psycopg":
            raise BadDatabaseURL(
                f"{display_url(url)}: daskscope talks to PostgreSQL through psycopg 3 only; "
                "use postgresql://user@host/dbname"
            )
        return url.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if url.drivername not in ("sqlite", "sqlite+pysqlite"):
            raise BadDatabaseURL(f"{display_url(url)}: unsupported SQLite driver; {_URL_HINT}")
        if url.database and url.database != ":memory:":
            url = url.set(database=str(Path(url.database).expanduser()))
        return url
    raise BadDatabaseURL(
        f"{display_url(url)}: daskscope stores data in SQLite or PostgreSQL; {_URL_HINT}"
    )


def _create_engine(url: sa.URL) -> sa.Engine:
    if url.get_backend_name() == "sqlite":
        return _create_sqlite_engine(url)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise BadDatabaseURL(
            f"{display_url(url)} needs psycopg 3, which is not installed; "
            "pip install 'daskscope[postgres]'"
        ) from None
    return sa.create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 10})


def _create_sqlite_engine(url: sa.URL) -> sa.Engine:
    memory = url.database in (None, "", ":memory:")
    if url.database and not memory:
        parent = Path(url.database).parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseUnreachable(
                f"cannot create the directory {parent} for {display_url(url)}: {exc.strerror}"
            ) from None
    kwargs: dict[str, Any] = {}
    if memory:
        # One shared connection, else every connection sees its own empty database.
        kwargs["poolclass"] = sa.StaticPool
        kwargs["connect_args"] = {"check_same_thread": False}
    engine = sa.create_engine(url, **kwargs)
    _sqlite_wal[engine] = False

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, record: Any) -> None:
        # Let SQLAlchemy, not the sqlite3 module, decide where transactions begin,
        # so that DDL (migrations) and DML share one real transaction.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=NORMAL")
        if _sqlite_wal.get(engine):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        # Writers take the lock up front: a deferred transaction that upgrades its
        # read lock can fail with SQLITE_BUSY without waiting for busy_timeout.
        immediate = conn.get_execution_options().get(IMMEDIATE)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _enable_wal(engine: sa.Engine) -> None:
    # Only once the file is known to be ours: journal_mode=WAL rewrites its header.
    _sqlite_wal[engine] = True
    if engine.url.database in (None, "", ":memory:"):
        return
    engine.dispose()  # pooled connections predate the flag
    with engine.connect():
        pass  # the connect hook switches the file to WAL


def _alembic_config() -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", "daskscope.store:migrations")
    return cfg


def _script() -> Any:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_alembic_config())


def _known_revisions() -> set[str]:
    return {rev.revision for rev in _script().walk_revisions()}


def _stored_revision(conn: sa.Connection) -> str | None:
    if not sa.inspect(conn).has_table(_VERSION_TABLE):
        return None
    return conn.execute(sa.text(f"SELECT version_num FROM {_VERSION_TABLE}")).scalar()


def _check_schema(conn: sa.Connection, where: str, dialect: str) -> None:
    """Refuse databases that hold something other than a daskscope schema we know."""
    from daskscope.store.schema import TABLES

    tables = set(sa.inspect(conn).get_table_names())
    conn.rollback()
    aside = (
        "move the file aside" if dialect == "sqlite" else "create an empty database for daskscope"
    )
    if _VERSION_TABLE in tables:
        revision = _stored_revision(conn)
        conn.rollback()
        if revision == HEAD_REVISION and "clusters" in tables:
            return
        if revision is None or revision in _known_revisions():
            if revision is not None and "clusters" not in tables:
                raise NotADaskscopeDatabase(
                    f"{where} is not a daskscope database (its {_VERSION_TABLE} belongs to "
                    f"another application); {aside}"
                )
            return
        if "clusters" in tables:
            raise SchemaTooNew(
                f"{where} was written by a newer daskscope (schema revision {revision!r}, "
                f"this one knows up to {_script().get_current_head()!r}); "
                "upgrade daskscope: pip install -U daskscope"
            )
        raise NotADaskscopeDatabase(
            f"{where} is not a daskscope database (schema revision {revision!r} of another "
            f"application); {aside}"
        )
    if tables:
        sample = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        clash = " including tables daskscope needs" if tables & set(TABLES) else ""
        raise NotADaskscopeDatabase(
            f"{where} is not a daskscope database (it holds other tables{clash}: {sample}); {aside}"
        )


def _classify(exc: sa.exc.DBAPIError, store: Store) -> AboutURL:
    reason = short_reason(exc)
    where = store.display_url
    if reason in ("file is not a database", "database disk image is malformed"):
        return NotADaskscopeDatabase(
            f"{where} is not a daskscope database ({reason}); move the file aside"
        )
    if store.dialect == "sqlite":
        return DatabaseUnreachable(
            f"cannot open {where}: {reason}; check that the path is right and writable"
        )
    if reason.startswith("database ") and reason.endswith("does not exist"):
        name = store.url.database
        return DatabaseUnreachable(
            f"cannot connect to {where}: {reason}; create it (createdb {name}) or fix the URL"
        )
    if "password" in reason:
        return DatabaseUnreachable(
            f"cannot connect to {where}: {reason}; check the user name and password in the URL"
        )
    return DatabaseUnreachable(
        f"cannot connect to {where}: {reason}; check that the server is running and the URL "
        "is right"
    )
