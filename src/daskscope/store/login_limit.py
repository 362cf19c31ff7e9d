"""Login attempts per client address over the last minute, counted in the database, so
that every server process of ``serve --workers N`` (and every host sharing the store)
counts the same attempts.

The count and the new attempt are one transaction that holds a lock on the address
(PostgreSQL: a transaction-level advisory lock on the address's hash; SQLite: the
database's write lock, taken at BEGIN), so two processes cannot both let a guess through
on the same last free place. Attempts older than the window are pruned by whoever
counts next.
"""

from __future__ import annotations

import math
import time

import sqlalchemy as sa

from daskscope.store.database import IMMEDIATE, Database
from daskscope.store.schema import login_attempts

__all__ = ["WINDOW_S", "take_attempt"]

WINDOW_S = 60.0
# The first key of PostgreSQL's two-key advisory locks: apart from any other lock taken
# by this project ("login" in ASCII); the second key is the address's hash.
_PG_LOCK_CLASS = 0x6C6F6769
# Attempts older than the window are removed at most this often per process.
_PRUNE_EVERY_S = WINDOW_S


def take_attempt(
    store: Database, address: str, per_minute: int, *, now: float | None = None
) -> int:
    """Count one login attempt from ``address``: 0 when it may go ahead (and it is
    counted), else the seconds until the next one may (then nothing is counted)."""
    given = now
    c = login_attempts.c
    with store.engine.connect() as conn:
        conn = conn.execution_options(**{IMMEDIATE: True})
        with conn.begin():
            if store.dialect == "postgresql":
                lock = sa.func.pg_advisory_xact_lock(_PG_LOCK_CLASS, sa.func.hashtext(address))
                conn.execute(sa.select(lock))
            # read once the lock is held: an attempt counted while we waited is older
            now = time.time() if given is None else given
            count, oldest = conn.execute(
                sa.select(sa.func.count(), sa.func.min(c.at)).where(
                    c.address == address, c.at > now - WINDOW_S
                )
            ).one()
            if count >= max(1, per_minute):
                return min(math.ceil(WINDOW_S), max(1, math.ceil(float(oldest) + WINDOW_S - now)))
            conn.execute(login_attempts.insert().values(address=address, at=now))
    _prune(store, now)
    return 0


def _prune(store: Database, now: float) -> None:
    """Remove attempts past the window (rows no count reads any more), at most once a
    minute per process and store; on PostgreSQL one process at a time (the others skip),
    so that two deletions of the same rows cannot wait on each other."""
    if store.pruned_at.get("login", 0.0) > now - _PRUNE_EVERY_S:
        return
    store.pruned_at["login"] = now
    with store.engine.begin() as conn:
        if store.dialect == "postgresql":
            mine = sa.func.pg_try_advisory_xact_lock(_PG_LOCK_CLASS, 0)
            if not conn.execute(sa.select(mine)).scalar():
                return
        conn.execute(login_attempts.delete().where(login_attempts.c.at <= now - WINDOW_S))
