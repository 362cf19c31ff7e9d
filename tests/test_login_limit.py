"""Issue 24: the login rate limit is shared by every server process. It was kept in each
process's memory, so with ``serve --workers 2`` 20 of 40 guesses got through; now the
attempts are counted in the database (store/login_limit.py), the count and the new
attempt in one transaction that locks the address. A real ``daskscope serve --workers
2`` on SQLite and PostgreSQL, guessed at from connections to both of its processes at
once; and the store's counter itself, from threads and two engines, with a fake clock."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from daskscope.store import open_store
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.store.login_limit import WINDOW_S, take_attempt
from daskscope.store.schema import audit_events, login_attempts
from serveproc import connections_to_each_process, serve

LIMIT = 10  # daskscope.login-attempts-per-minute, the default
GUESSES = 40
CONNECTIONS_PER_PROCESS = 4


@pytest.fixture
def two_processes(database_url: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """``serve --auth --workers 2`` over a store with one member; yields its URL, the
    store's and the member's token."""
    with open_store(database_url) as store:
        create_account(store, "atlas")
        add_user(store, "ann", account="atlas", admin=True)
        token = create_token(store, "ann")
    with serve(database_url, tmp_path / "serve.log", "--auth", "--workers", "2") as base:
        yield {"base": base, "url": database_url, "token": token, "log": tmp_path / "serve.log"}


def log_in(client: httpx.Client, token: str) -> int:
    form = {"token": token, "next": "/", "csrf": client.cookies["daskscope_csrf"]}
    return client.post("/login", data=form).status_code


def test_guesses_through_both_processes_share_one_limit(two_processes: dict[str, Any]) -> None:
    by_process = connections_to_each_process(
        two_processes["base"], two_processes["log"], CONNECTIONS_PER_PROCESS, two_processes["token"]
    )
    assert len(by_process) == 2
    clients = [c for cs in by_process.values() for c in cs]
    each = GUESSES // len(clients)
    try:
        # every connection guesses at the same time, on both processes
        with ThreadPoolExecutor(len(clients)) as pool:
            statuses_of = list(
                pool.map(lambda c: [log_in(c, "dsk_guess") for _ in range(each)], clients)
            )
        statuses = [s for got in statuses_of for s in got]
        assert len(statuses) == GUESSES
        assert set(statuses) <= {401, 429}, statuses
        through = statuses.count(401)
        assert 1 <= through <= LIMIT, statuses  # 20 when each process counted its own
        # both processes refused guesses: the other's attempts counted in each
        for pid, conns in by_process.items():
            refused = [
                s for c, got in zip(clients, statuses_of, strict=True) if c in conns for s in got
            ]
            assert 429 in refused, (pid, refused)
        # now even the right token waits, on either process
        for conns in by_process.values():
            assert log_in(conns[0], two_processes["token"]) == 429
    finally:
        for client in clients:
            client.close()
    with open_store(two_processes["url"]) as store, store.engine.connect() as conn:
        counted = conn.execute(sa.select(sa.func.count()).select_from(login_attempts)).scalar()
        failed = conn.execute(
            sa.select(audit_events.c.detail).where(audit_events.c.kind == "login_failed")
        ).all()
    assert counted == through  # refused attempts are not counted
    # each guess let through is in the audit log (one that names no account's token)
    assert len(failed) == through
    assert all(row.detail == {"reason": "no account holds this token"} for row in failed)


# -- the store's counter ------------------------------------------------------------------


def test_attempts_slide_out_of_the_window_and_are_pruned(store: Any) -> None:
    t0 = 2_000_000_000.0
    for i in range(LIMIT):
        assert take_attempt(store, "10.0.0.1", LIMIT, now=t0 + i) == 0
    # the eleventh waits until the first leaves the minute: 60 - 10.5 s, rounded up
    assert take_attempt(store, "10.0.0.1", LIMIT, now=t0 + 10.5) == 50
    assert take_attempt(store, "10.0.0.2", LIMIT, now=t0 + 10.5) == 0  # another address
    # a minute after the first, one place is free again; and only one
    assert take_attempt(store, "10.0.0.1", LIMIT, now=t0 + WINDOW_S + 0.5) == 0
    assert take_attempt(store, "10.0.0.1", LIMIT, now=t0 + WINDOW_S + 0.6) >= 1
    # long after: everything older than the window is removed by the next count
    assert take_attempt(store, "10.0.0.3", LIMIT, now=t0 + 10 * WINDOW_S) == 0
    with store.engine.connect() as conn:
        left = conn.execute(sa.select(login_attempts.c.address)).scalars().all()
    assert left == ["10.0.0.3"]


def test_concurrent_attempts_from_two_engines_let_through_only_the_limit(
    database_url: str,
) -> None:
    # two stores (two engines and pools, as two server processes have), eight threads
    with open_store(database_url) as first, open_store(database_url) as second:
        start = threading.Barrier(8)

        def attempts(i: int) -> list[int]:
            store = first if i % 2 else second
            start.wait()
            return [take_attempt(store, "10.9.9.9", LIMIT) for _ in range(5)]

        with ThreadPoolExecutor(8) as pool:
            waits = [w for got in pool.map(attempts, range(8)) for w in got]
    assert waits.count(0) == LIMIT
    assert all(1 <= w <= 60 for w in waits if w)
