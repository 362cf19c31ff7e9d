"""The audit log of a shared server: what happened to tokens and logins, and from where.

Kept in the database (``audit_events``), written where it happens: a token created or
revoked (store/identity.py), a token used from an address it was not used from before
(web/addresses.py: the first request from each address, by API token, login or
session), a failed login (web/auth.py). Each account's admins read their account's
events (web/routes/audit.py); ``daskscope audit export`` writes them as JSON lines.
Events that belong to no account (a login with a token nobody holds) are the
operator's: only the export without ``--account`` has them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from daskscope.model import stable_id
from daskscope.store.database import IMMEDIATE, Database
from daskscope.store.schema import audit_events, token_addresses, tokens, users
from daskscope.text import escape_text

__all__ = [
    "KINDS",
    "AuditEvent",
    "AuditPage",
    "Kind",
    "audit_page",
    "export_events",
    "login_failed",
    "prune_events",
    "prune_if_due",
    "record_event",
    "token_hint",
    "token_id",
    "used_from",
]

#: What the log records, as ``kind``.
Kind = Literal[
    "token_created",
    "token_used_from_new_address",
    "token_revoked",
    "login_failed",
]
KINDS: tuple[str, ...] = get_args(Kind)
#: The start of a token kept as its hint (``dsk_`` and six characters), as
#: ``daskscope user list`` shows it; of a token nobody holds, as much of what was sent.
HINT_CHARS = 10
#: How every token starts (store/identity.py).
TOKEN_PREFIX = "dsk_"
#: Events read at a time by the export.
EXPORT_BATCH = 1000


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One event: ``at`` epoch seconds, ``kind`` one of :data:`KINDS`, whose (account,
    user: None when no account holds the token), from which client ``address``, with
    which token (its ``token_hint``), and what else is known (``detail``)."""

    id: int
    at: float
    kind: str
    account: str | None
    user: str | None
    address: str | None
    token_hint: str | None
    detail: dict[str, Any] | None

    def to_data(self) -> dict[str, Any]:
        """As one line of the JSON-lines export: the fields, and ``time`` in ISO 8601."""
        when = dt.datetime.fromtimestamp(self.at, dt.UTC).isoformat(timespec="milliseconds")
        return {
            "id": self.id,
            "time": when.replace("+00:00", "Z"),
            "at": self.at,
            "kind": self.kind,
            "account": self.account,
            "user": self.user,
            "address": self.address,
            "token_hint": self.token_hint,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class AuditPage:
    """Events newest first, ``offset`` of ``total`` that match."""

    events: list[AuditEvent]
    total: int
    offset: int
    limit: int


def token_hint(token: str) -> str:
    return token[:HINT_CHARS]


def token_id(digest: str) -> str:
    """The ``tokens.id`` of the token whose SHA-256 is ``digest`` (store/identity.py)."""
    return stable_id("token", digest)


def record_event(
    conn: sa.Connection,
    kind: str,
    *,
    account: str | None = None,
    user: str | None = None,
    address: str | None = None,
    token_hint: str | None = None,
    detail: dict[str, Any] | None = None,
    at: float | None = None,
) -> None:
    """Add one event, in the caller's transaction (so it is kept exactly when what it
    records is)."""
    if kind not in KINDS:
        raise ValueError(f"unknown audit event kind {kind!r}")
    conn.execute(
        audit_events.insert().values(
            at=time.time() if at is None else at,
            kind=kind,
            account=account,
            user=user,
            address=address,
            token_hint=token_hint,
            detail=detail,
        )
    )


def used_from(
    store: Database,
    token_id: str,
    address: str,
    *,
    account: str,
    user: str,
    hint: str,
    via: str,
) -> bool:
    """Note that the token ``token_id`` was used from ``address`` (``via``: "api" or
    "session"); the first time for this pair, audit it. True when it was new.
    Whichever server process sees the pair first records it: the others find it."""
    now = time.time()
    values = {"token_id": token_id, "address": address, "first_seen_at": now}
    insert = (postgresql.insert if store.dialect == "postgresql" else sqlite.insert)(
        token_addresses
    )
    # RETURNING, not rowcount: the row exactly when this insert added it, on either
    # database (a driver may count a conflict's "nothing" as a row)
    adding = insert.values(values).on_conflict_do_nothing().returning(token_addresses.c.token_id)
    with store.engine.begin() as conn:
        added = conn.execute(adding).first() is not None
        if added:
            record_event(
                conn,
                "token_used_from_new_address",
                account=account,
                user=user,
                address=address,
                token_hint=hint,
                detail={"via": via},
                at=now,
            )
    return added


def login_failed(store: Database, token: str, address: str) -> None:
    """A login with ``token`` from ``address`` opened nothing: audited under the token's
    account when it is one of its members' (revoked), else under no account."""
    digest = hashlib.sha256(token.encode()).hexdigest()
    query = (
        sa.select(users.c.account, users.c.name, tokens.c.hint, tokens.c.revoked_at)
        .select_from(tokens.join(users, users.c.name == tokens.c.user))
        .where(tokens.c.token_hash == digest)
    )
    # SQLite: the write lock at BEGIN, as a read that a write follows could otherwise
    # fail at once ("database is locked") while another process writes
    with store.engine.connect() as conn, conn.execution_options(**{IMMEDIATE: True}).begin():
        row = conn.execute(query).first()
        if row is None:
            # the start of what was typed only when it looks like a token: a password
            # pasted by mistake is not kept, not even in part
            looks_like_one = token.startswith(TOKEN_PREFIX)
            reason = "no account holds this token" if looks_like_one else "not a token"
            reason = reason if token else "no token given"
            hint = escape_text(token_hint(token)) if looks_like_one else None
            fields: dict[str, Any] = {"token_hint": hint}
        else:
            reason = "the token was revoked" if row.revoked_at is not None else "refused"
            fields = {"account": row.account, "user": row.name, "token_hint": row.hint}
        record_event(conn, "login_failed", address=address, detail={"reason": reason}, **fields)


def _where(
    account: str | None, since: float | None, until: float | None, kinds: tuple[str, ...]
) -> list[sa.ColumnElement[bool]]:
    c = audit_events.c
    conditions: list[sa.ColumnElement[bool]] = []
    if account is not None:
        conditions.append(c.account == account)
    if since is not None:
        conditions.append(c.at >= since)
    if until is not None:
        conditions.append(c.at < until)
    if kinds:
        conditions.append(c.kind.in_(kinds))
    return conditions


def _event(row: Any) -> AuditEvent:
    return AuditEvent(**row._mapping)


def audit_page(
    store: Database,
    *,
    account: str | None,
    since: float | None = None,
    until: float | None = None,
    kinds: tuple[str, ...] = (),
    offset: int = 0,
    limit: int = 100,
) -> AuditPage:
    """One page of the log, newest first. ``account`` None: every event, those of no
    account included (a server without authentication, or its operator)."""
    where = _where(account, since, until, kinds)
    query = (
        sa.select(audit_events)
        .where(*where)
        .order_by(audit_events.c.id.desc())
        .offset(offset)
        .limit(limit)
    )
    with store.engine.connect() as conn:
        events = [_event(row) for row in conn.execute(query)]
        total = conn.execute(sa.select(sa.func.count()).select_from(audit_events).where(*where))
        return AuditPage(events, int(total.scalar_one()), offset, limit)


def export_events(
    store: Database,
    *,
    account: str | None,
    since: float | None = None,
    until: float | None = None,
    kinds: tuple[str, ...] = (),
) -> Iterator[AuditEvent]:
    """Every matching event, oldest first, read :data:`EXPORT_BATCH` at a time (each
    batch on a connection of its own: a long export holds no transaction open)."""
    where = _where(account, since, until, kinds)
    after = 0
    while True:
        query = (
            sa.select(audit_events)
            .where(audit_events.c.id > after, *where)
            .order_by(audit_events.c.id)
            .limit(EXPORT_BATCH)
        )
        with store.engine.connect() as conn:
            events = [_event(row) for row in conn.execute(query)]
        yield from events
        if len(events) < EXPORT_BATCH:
            return
        after = events[-1].id


def prune_events(store: Database, before: float) -> int:
    """Remove the events older than ``before`` (the retention, ``audit-log-days``)."""
    with store.engine.begin() as conn:
        return conn.execute(audit_events.delete().where(audit_events.c.at < before)).rowcount


#: How often a server process removes events past the retention.
PRUNE_EVERY_S = 3600.0


def prune_if_due(store: Database, keep_days: float, *, now: float | None = None) -> None:
    """Remove events older than ``keep_days`` (0: keep every event), at most once an
    hour per process and store: called by the server where it writes events."""
    now = time.time() if now is None else now
    if keep_days <= 0 or store.pruned_at.get("audit", 0.0) > now - PRUNE_EVERY_S:
        return
    store.pruned_at["audit"] = now
    prune_events(store, now - keep_days * 86400.0)
