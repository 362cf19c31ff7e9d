"""Shared fixtures: a throwaway PostgreSQL server and fresh stores on both dialects."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_BIN = Path(os.environ.get("DASKSCOPE_PG_BIN", "/usr/lib/postgresql/15/bin"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_postgres(*args: str | os.PathLike) -> list[str]:
    # initdb refuses to run as root: drop to the postgres OS user when we are root.
    cmd = [str(a) for a in args]
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture
def unused_port() -> int:
    """A TCP port on 127.0.0.1 with nothing listening."""
    return free_port()


class PostgresServer:
    """A throwaway PostgreSQL server in a temporary directory; tests may stop and start it."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="daskscope-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self.data, self.port = self.root / "data", free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"
        subprocess.run(
            _as_postgres(PG_BIN / "initdb", "-D", self.data, "-U", "postgres", "-A", "trust",
                         "-E", "UTF8", "--locale=C", "--no-sync"),
            check=True, capture_output=True,
        )  # fmt: skip

    def start(self) -> None:
        options = f"-k {self.root} -h 127.0.0.1 -p {self.port} -c fsync=off -c full_page_writes=off"
        try:
            subprocess.run(
                _as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-o", options, "-l",
                             self.root / "log", "-w", "-t", "30", "start"),
                check=True, capture_output=True,
            )  # fmt: skip
        except subprocess.CalledProcessError as exc:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"could not start PostgreSQL: {exc.stderr.decode()}\n{log}") from exc

    def stop(self) -> None:
        """Stop at once, as a crash would (no clean shutdown)."""
        subprocess.run(
            _as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop"),
            capture_output=True,
        )

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _new_postgres_server() -> PostgresServer:
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN}: apt install postgresql-15")
    server = PostgresServer()
    try:
        server.start()
    except RuntimeError:
        server.remove()
        raise
    return server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL 15 server for this test session; yields its admin URL (no database)."""
    started = time.perf_counter()
    server = _new_postgres_server()
    print(f"\nPostgreSQL test server started in {time.perf_counter() - started:.1f} s")
    try:
        yield server.url
    finally:
        server.remove()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test's own, which it may stop and start."""
    server = _new_postgres_server()
    try:
        yield server
    finally:
        server.remove()


def _admin(server: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(server.replace("+psycopg", "") + "/postgres", autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture(scope="session")
def postgres_url(postgres_server: str) -> str:
    """The URL of a database named daskscope_test on the session's server."""
    _admin(postgres_server, "CREATE DATABASE daskscope_test")
    return f"{postgres_server}/daskscope_test"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh, empty database of each kind."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'daskscope.db'}"
        return
    server = request.getfixturevalue("postgres_server")
    name = f"t_{uuid.uuid4().hex[:12]}"
    _admin(server, f"CREATE DATABASE {name} STRATEGY FILE_COPY")
    yield f"{server}/{name}"
    _admin(server, f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def store(database_url: str) -> Iterator[object]:
    """A fresh store, migrated to the newest schema."""
    from daskscope.store import open_store

    with open_store(database_url) as opened:
        yield opened
