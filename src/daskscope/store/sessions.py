"""Browser login sessions: opened with a member's token, ended at logout, at expiry, or
when that token is revoked.

The browser holds a random session id, never the token; the store keeps only the id's
SHA-256 (256 random bits: nothing to guess, so a fast hash is enough), so a leaked
database opens no session.
"""

from __future__ import annotations

import hashlib
import secrets
import time

import sqlalchemy as sa

from daskscope.store.database import IMMEDIATE, Database
from daskscope.store.identity import Identity
from daskscope.store.schema import sessions, tokens, users

__all__ = ["end_session", "identity_for_session", "open_session", "session_holder"]


def _hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def open_session(store: Database, token: str, lifetime_s: float) -> str | None:
    """A new session id for an active ``token`` (None if it is unknown or revoked)."""
    now = time.time()
    # SQLite: the write lock at BEGIN (a read that a write follows could otherwise fail
    # at once while another server process writes)
    with store.engine.connect() as conn, conn.execution_options(**{IMMEDIATE: True}).begin():
        token_id = conn.execute(
            sa.select(tokens.c.id).where(
                tokens.c.token_hash == _hash(token), tokens.c.revoked_at.is_(None)
            )
        ).scalar()
        if token_id is None:
            return None
        conn.execute(sessions.delete().where(sessions.c.expires_at <= now))  # keep it small
        session_id = secrets.token_urlsafe(32)
        conn.execute(
            sessions.insert().values(
                id_hash=_hash(session_id),
                token_id=token_id,
                created_at=now,
                expires_at=now + lifetime_s,
            )
        )
    return session_id


def identity_for_session(store: Database, session_id: str) -> Identity | None:
    """Who a live session belongs to; None once it expired, ended or lost its token."""
    held = session_holder(store, session_id)
    return held[0] if held is not None else None


def session_holder(store: Database, session_id: str) -> tuple[Identity, str, str] | None:
    """Who a live session belongs to, with the id and hint of the token that opened it
    (for the audit log); None once it expired, ended or lost its token."""
    query = (
        sa.select(users.c.name, users.c.account, users.c.is_admin, tokens.c.id, tokens.c.hint)
        .select_from(
            sessions.join(tokens, tokens.c.id == sessions.c.token_id).join(
                users, users.c.name == tokens.c.user
            )
        )
        .where(
            sessions.c.id_hash == _hash(session_id),
            sessions.c.expires_at > time.time(),
            tokens.c.revoked_at.is_(None),
        )
    )
    with store.engine.connect() as conn:
        row = conn.execute(query).first()
    if row is None:
        return None
    return (
        Identity(user=row.name, account=row.account, is_admin=bool(row.is_admin)),
        row.id,
        row.hint,
    )


def end_session(store: Database, session_id: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(sessions.delete().where(sessions.c.id_hash == _hash(session_id)))
