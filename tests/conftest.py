"""Shared fixtures: a throwaway PostgreSQL server and fresh stores on both dialects."""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import dask
import pytest

from browser import browser, open_page
from pgserver import PG_BIN, PostgresServer, free_port

__all__ = ["PostgresServer", "browser", "free_port", "open_page"]


def _utf8_safe(text: str) -> str:
    """``text`` with lone surrogates as ``\\udXXX`` escapes (UTF-8 cannot hold them)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Reports travel between the test processes as UTF-8 (pytest-xdist): the tests of
    text a database cannot hold log lone surrogates, which would stop the whole run."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    report.sections = [(title, _utf8_safe(content)) for title, content in report.sections]
    if report.longrepr is not None and not isinstance(report.longrepr, tuple):
        text = str(report.longrepr)
        if _utf8_safe(text) != text:
            report.longrepr = _utf8_safe(text)


@pytest.fixture(autouse=True)
def _daskscope_config_left_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that changes the ``daskscope`` section of dask's process-wide config for
    good fails, and the section is put back: left changed, it records every later
    cluster of the same test process under another account or database. (A module
    marked ``own_dask_config`` changes it for all its tests and restores it itself.)"""
    if request.node.get_closest_marker("own_dask_config") is not None:
        yield
        return
    before = copy.deepcopy(dask.config.config.get("daskscope", {}))
    yield
    after = dask.config.config.get("daskscope", {})
    if after != before:
        dask.config.config["daskscope"] = before
        changed = {
            key: (before.get(key), after.get(key))
            for key in sorted({*before, *after})
            if before.get(key) != after.get(key)
        }
        pytest.fail(f"the test left dask's daskscope config changed (was, now): {changed}")


@pytest.fixture
def unused_port() -> int:
    """A TCP port on 127.0.0.1 with nothing listening."""
    return free_port()


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
