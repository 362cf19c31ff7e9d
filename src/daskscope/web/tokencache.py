"""Bearer tokens of ingest, known without a query of their own.

Every batch a collector posts carries its token. Looking it up before the route runs
cost a connection of its own per batch (a pool checkout, its ping, the query, the
rollback on return; and, with many batches waiting, pool connections opened and closed
again); doing without it cut PostgreSQL's CPU per record by 29 % at 501-record batches
(docs/benchmarks.md). For the routes in :data:`REVERIFIED_PATHS` a token seen
valid in the last :data:`TTL_SECONDS` is taken from memory before the route, and the route
checks it again in the transaction that writes (:func:`verify_in_transaction`): a revoked
token writes nothing from the moment it is revoked. Unknown and revoked tokens are never
kept, so they are refused before a body is read, as before.
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import TYPE_CHECKING

from daskscope.store import Store
from daskscope.store.identity import Identity, token_owner_in

if TYPE_CHECKING:
    import sqlalchemy as sa

__all__ = [
    "REVERIFIED_PATHS",
    "TTL_SECONDS",
    "TokenRevoked",
    "cached_identity",
    "remembered_identity",
    "verify_in_transaction",
]

#: Routes that check the token again where they write: only these use the cache.
REVERIFIED_PATHS = frozenset({"/api/v1/ingest"})
#: How long a token seen valid is taken from memory before its route runs.
TTL_SECONDS = 60.0
#: Tokens kept a store (members' tokens in use: far fewer on any team server).
MAX_TOKENS = 4096

_lock = threading.Lock()


def _cache(store: Store) -> dict[str, tuple[float, Identity]]:
    """Token digest -> (valid until, its member), for ``store`` (a cache the Store keeps)."""
    return store.kept("web.tokens", dict)


class TokenRevoked(Exception):
    """The token was revoked (or its member changed) since it was cached."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def remembered_identity(store: Store, token: str) -> Identity | None:
    """The token's member when it was seen valid within the TTL, else None: memory
    only, no query, so the event loop can ask without handing the request to a thread
    (that hop was the larger part of authenticating a batch)."""
    now = time.monotonic()
    with _lock:
        hit = _cache(store).get(_digest(token))
    return hit[1] if hit is not None and hit[0] > now else None


def cached_identity(store: Store, token: str) -> Identity | None:
    """The token's member, from memory when it was seen valid within the TTL."""
    digest, now = _digest(token), time.monotonic()
    with _lock:
        cache = _cache(store)
        hit = cache.get(digest)
    if hit is not None and hit[0] > now:
        return hit[1]
    identity = store.identity_for_token(token)
    with _lock:
        if identity is None:
            cache.pop(digest, None)
        else:
            if len(cache) >= MAX_TOKENS:
                cache.clear()  # rare: refilled by the next batch of each member
            cache[digest] = (now + TTL_SECONDS, identity)
    return identity


def forget(store: Store, token: str) -> None:
    with _lock:
        _cache(store).pop(_digest(token), None)


def verify_in_transaction(
    conn: sa.Connection, store: Store, token: str, identity: Identity
) -> None:
    """Raise :class:`TokenRevoked` unless ``token`` is still ``identity``'s, read in the
    writing transaction (the same connection: no extra checkout)."""
    if token_owner_in(conn, token) != (identity.user, identity.account):
        forget(store, token)
        raise TokenRevoked("this token is unknown or revoked")
