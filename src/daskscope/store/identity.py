"""Accounts, their members and the members' tokens, for a shared daskscope server.

A token is shown once when it is made and only its SHA-256 is kept: tokens are 256
random bits, so a fast hash is enough (nothing to guess), and a leaked database leaks no
usable token. The identity a token resolves to is what labels the clusters sent with it.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from daskscope.model import stable_id
from daskscope.store.audit import TOKEN_PREFIX, record_event
from daskscope.store.database import Database
from daskscope.store.errors import StoreError
from daskscope.store.schema import accounts, clusters, tokens, users, workflow_runs

__all__ = [
    "ClusterNotYetKnown",
    "Identity",
    "IdentityError",
    "add_user",
    "claim_rows",
    "create_account",
    "create_token",
    "identity_for_token",
    "list_members",
    "revoke_token",
]


class IdentityError(StoreError):
    """An account, user or token that does not exist, or already does."""


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    account: str
    is_admin: bool


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_account(store: Database, name: str) -> None:
    name = _valid_name(name, "account")
    with store.engine.begin() as conn:
        if conn.execute(sa.select(accounts.c.id).where(accounts.c.name == name)).first():
            raise IdentityError(f"account {name!r} exists already")
        conn.execute(
            accounts.insert().values(
                id=stable_id("account", name), name=name, created_at=time.time()
            )
        )


def add_user(store: Database, name: str, *, account: str, admin: bool = False) -> None:
    name = _valid_name(name, "user")
    with store.engine.begin() as conn:
        if not conn.execute(sa.select(accounts.c.id).where(accounts.c.name == account)).first():
            raise IdentityError(
                f"no account {account!r}; create it first: daskscope account create {account}"
            )
        if conn.execute(sa.select(users.c.id).where(users.c.name == name)).first():
            raise IdentityError(f"user {name!r} exists already")
        conn.execute(
            users.insert().values(
                id=stable_id("user", name),
                name=name,
                account=account,
                is_admin=admin,
                created_at=time.time(),
            )
        )


def create_token(store: Database, user: str) -> str:
    """A new token for ``user``; the only time it is ever shown."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with store.engine.begin() as conn:
        if not conn.execute(sa.select(users.c.id).where(users.c.name == user)).first():
            raise IdentityError(
                f"no user {user!r}; add them first: daskscope user add {user} --account ACCOUNT"
            )
        conn.execute(
            tokens.insert().values(
                id=stable_id("token", _hash(token)),
                user=user,
                token_hash=_hash(token),
                hint=token[: len(TOKEN_PREFIX) + 6],
                created_at=time.time(),
                revoked_at=None,
            )
        )
        _audit_tokens(conn, "token_created", [(user, token[: len(TOKEN_PREFIX) + 6])])
    return token


def revoke_token(store: Database, *, token: str | None = None, user: str | None = None) -> int:
    """Revoke one token (by its value or its hint), or every token of a user."""
    if (token is None) == (user is None):
        raise IdentityError("revoke either one token or all tokens of one user")
    condition = (
        tokens.c.user == user
        if user is not None
        else sa.or_(tokens.c.token_hash == _hash(token or ""), tokens.c.hint == token)
    )
    with store.engine.begin() as conn:
        revoked = conn.execute(
            tokens.update()
            .where(condition, tokens.c.revoked_at.is_(None))
            .values(revoked_at=time.time())
            .returning(tokens.c.user, tokens.c.hint)
        ).all()
        _audit_tokens(conn, "token_revoked", [(r.user, r.hint) for r in revoked])
    if not revoked:
        raise IdentityError("no such active token; daskscope user list shows the hints")
    return len(revoked)


def _audit_tokens(conn: sa.Connection, kind: str, held: list[tuple[str, str]]) -> None:
    """Audit ``kind`` for tokens given as (user, hint), in the transaction that changed
    them (store/audit.py)."""
    accounts_of = dict(
        conn.execute(
            sa.select(users.c.name, users.c.account).where(users.c.name.in_({u for u, _ in held}))
        ).all()
    )
    for user, hint in held:
        record_event(conn, kind, account=accounts_of.get(user), user=user, token_hint=hint)


def identity_for_token(store: Database, token: str) -> Identity | None:
    """Who a token belongs to, or None for an unknown or revoked token."""
    query = (
        sa.select(users.c.name, users.c.account, users.c.is_admin)
        .select_from(tokens.join(users, users.c.name == tokens.c.user))
        .where(tokens.c.token_hash == _hash(token), tokens.c.revoked_at.is_(None))
    )
    with store.engine.connect() as conn:
        row = conn.execute(query).first()
    return (
        Identity(user=row.name, account=row.account, is_admin=bool(row.is_admin)) if row else None
    )


#: Built once: constructing the query (and its cache key) for every ingested batch cost
#: more of the server's CPU than running it.
_TOKEN_OWNER = (
    sa.select(users.c.name, users.c.account)
    .select_from(tokens.join(users, users.c.name == tokens.c.user))
    .where(tokens.c.token_hash == sa.bindparam("digest"), tokens.c.revoked_at.is_(None))
)


def token_owner_in(conn: sa.Connection, token: str) -> tuple[str, str] | None:
    """(member, account) of ``token`` while it is valid, read on ``conn`` (a writing
    transaction's own connection: no extra checkout); None when unknown or revoked."""
    row = conn.execute(_TOKEN_OWNER, {"digest": _hash(token)}).first()
    return None if row is None else (row.name, row.account)


def list_members(store: Database, account: str | None = None) -> list[dict[str, Any]]:
    """Users with their account, role and token hints (never the tokens)."""
    query = sa.select(users).order_by(users.c.account, users.c.name)
    if account is not None:
        query = query.where(users.c.account == account)
    with store.engine.connect() as conn:
        members = [dict(r._mapping) for r in conn.execute(query)]
        hints = conn.execute(
            sa.select(tokens.c.user, tokens.c.hint, tokens.c.created_at, tokens.c.revoked_at)
        ).all()
    for member in members:
        member["tokens"] = [
            {"hint": h.hint, "created_at": h.created_at, "revoked_at": h.revoked_at}
            for h in hints
            if h.user == member["name"]
        ]
    return members


def _valid_name(name: str, what: str) -> str:
    name = name.strip()
    if not name or len(name) > 100 or any(c in name for c in "\n\r\t"):
        raise IdentityError(f"{what} name must be 1 to 100 characters on one line, got {name!r}")
    return name


class ForeignRecord(IdentityError):
    """A record of a batch that would touch another account's data."""

    def __init__(self, index: int, field: str, message: str):
        super().__init__(f"records[{index}].data.{field}: {message}")
        self.index = index
        self.field = field


class ClusterNotYetKnown(ForeignRecord):
    """A record of a cluster whose cluster record has not arrived yet: not a refusal,
    the batch will be taken once it has (a run finished before its recorder's first
    flush, batches delivered out of order)."""


def claim_rows(
    conn: sa.Connection,
    rows_by_kind: dict[str, list[dict[str, Any]]],
    identity: Identity,
    *,
    order: Callable[[], Iterable[tuple[int, str, dict[str, Any]]]],
) -> None:
    """Make a batch ``identity``'s, in place: clusters are labelled with the token's
    account and user (whatever the collector claimed). Refused with
    :class:`ForeignRecord`, which names the first such record of ``order()`` (the rows
    with their indices in the batch as sent; asked only then): a cluster id of another
    account, or of another member (a cluster keeps its user once set); a workflow run
    stored as another member's; a workflow chunk added to a run of another cluster or
    member. A cluster not sent yet raises :class:`ClusterNotYetKnown`: the batch is to
    be sent again later. Workflow runs are labelled with the token's account and user
    too. Record ids of other clusters are refused when written (RecordConflict). Run it
    in the transaction that writes the rows, so that no other batch slips in between."""
    sent = set()
    for row in rows_by_kind.get("cluster", ()):
        row["account"], row["user"] = identity.account, identity.user
        sent.add(row["id"])
    for row in rows_by_kind.get("workflow_run", ()):  # a run is its sender's
        row["account"], row["user"] = identity.account, identity.user
    referenced: set[str | None] = set()
    for kind, rows in rows_by_kind.items():
        if kind != "cluster":
            referenced.update(row["cluster_id"] for row in rows)
    referenced.discard(None)  # workflow runs without a cluster
    owners = {
        cid: (account, user)
        for cid, account, user in conn.execute(_cluster_owners(), {"ids": list(sent | referenced)})
    }
    foreign = {cid for cid, (account, _) in owners.items() if account != identity.account}
    others = {cid for cid, (_, user) in owners.items() if user != identity.user} - foreign
    unknown = referenced - sent - owners.keys()
    misplaced = _chunks_of_other_runs(conn, rows_by_kind, identity)
    taken_runs = _runs_of_others(conn, rows_by_kind, identity)
    if not foreign and not others and not unknown and not misplaced and not taken_runs:
        return
    for i, kind, row in order():  # the first offender, as the batch was sent
        field = "id" if kind == "cluster" else "cluster_id"
        if row.get(field) in foreign:
            raise ForeignRecord(i, field, "this cluster id is taken by another account")
        if row.get(field) in others:
            raise ForeignRecord(
                i, field, "this cluster was recorded by another member; only they can write to it"
            )
        if row.get(field) in unknown:
            raise ClusterNotYetKnown(
                i,
                field,
                "this cluster's record has not arrived yet; nothing of this batch was "
                "stored: send it again later (the collector keeps it and does)",
            )
        if kind == "workflow_chunk" and row["id"] in misplaced:
            raise ForeignRecord(
                i,
                "run_id",
                "this workflow run belongs to another cluster or member; a chunk joins its own run",
            )
        if kind == "workflow_run" and row["id"] in taken_runs:
            raise ForeignRecord(i, "id", "this workflow run id was sent by another member")


@functools.cache
def _cluster_owners() -> sa.Select[str, str, str]:
    """Clusters' owners by id (``ids``): built once, not for every batch."""
    ids: sa.BindParameter[list[str]] = sa.bindparam("ids", expanding=True)
    return sa.select(clusters.c.id, clusters.c.account, clusters.c.user).where(
        clusters.c.id.in_(ids)
    )


def _chunks_of_other_runs(
    conn: sa.Connection, rows_by_kind: dict[str, list[dict[str, Any]]], identity: Identity
) -> set[str]:
    """Ids of the batch's workflow chunks whose run (sent in this batch, or stored) is on
    another cluster than the chunk, or was sent by someone else: appending to another
    member's run. A chunk whose run is not known yet is let through: its run record
    comes later, with the same cluster and owner."""
    chunks = rows_by_kind.get("workflow_chunk", ())
    if not chunks:
        return set()
    owner = (identity.account, identity.user)
    runs = {row["id"]: (row["cluster_id"], owner) for row in rows_by_kind.get("workflow_run", ())}
    wanted = {row["run_id"] for row in chunks} - runs.keys()
    if wanted:
        c = workflow_runs.c
        query = sa.select(c.id, c.cluster_id, c.account, c.user).where(c.id.in_(wanted))
        for run_id, cluster_id, account, user in conn.execute(query):
            # a run stored before owners were kept has none: its cluster decides
            runs[run_id] = (cluster_id, (account, user) if account is not None else owner)
    return {
        row["id"]
        for row in chunks
        if row["run_id"] in runs and runs[row["run_id"]] != (row["cluster_id"], owner)
    }


def _runs_of_others(
    conn: sa.Connection, rows_by_kind: dict[str, list[dict[str, Any]]], identity: Identity
) -> set[str]:
    """Ids of the batch's workflow runs already stored as another member's."""
    ids = {row["id"] for row in rows_by_kind.get("workflow_run", ())}
    if not ids:
        return set()
    c = workflow_runs.c
    query = sa.select(c.id, c.account, c.user).where(c.id.in_(ids), c.account.is_not(None))
    return {
        run_id
        for run_id, account, user in conn.execute(query)
        if (account, user) != (identity.account, identity.user)
    }
