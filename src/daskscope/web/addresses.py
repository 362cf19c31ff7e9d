"""Which addresses each token was used from, for the audit log's "used from a new
address" (store/audit.py).

A request's token and client address are looked up in memory first: a pair this
process has seen costs a set lookup and nothing else, on the event loop or a worker
thread alike. A pair it has not seen is confirmed in the database on a worker thread
(``token_addresses``, one insert that does nothing when the pair is known), and only
the process whose insert adds the pair writes the audit event. A browser session counts
as the token that opened it (its first request after the login is from the login's
address).
"""

from __future__ import annotations

import hashlib
import threading

from daskscope import config
from daskscope.store import Store
from daskscope.store.audit import prune_if_due, token_hint, token_id, used_from
from daskscope.store.identity import Identity

__all__ = ["audit_written", "bearer_known", "note_bearer", "note_session"]

#: Pairs remembered per store; past this the memory starts again (each pair then costs
#: one more insert that finds it).
MAX_KNOWN = 65_536

_lock = threading.Lock()


def _known(store: Store) -> set[tuple[str, str]]:
    """The pairs remembered for ``store`` (a cache the Store keeps: one per store)."""
    return store.kept("web.addresses", set)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _is_known(store: Store, key: tuple[str, str]) -> bool:
    with _lock:
        return key in _known(store)


def _remember(store: Store, key: tuple[str, str]) -> None:
    with _lock:
        known = _known(store)
        if len(known) >= MAX_KNOWN:
            known.clear()
        known.add(key)


def bearer_known(store: Store, token: str, address: str) -> bool:
    """Whether this process already saw ``token`` used from ``address``: memory only."""
    return _is_known(store, (token_id(_digest(token)), address))


def note_bearer(store: Store, token: str, identity: Identity, address: str) -> None:
    """``token`` (valid, ``identity``'s) was used from ``address``: audited the first
    time. Queries the database for a pair this process has not seen: a worker thread's."""
    key = (token_id(_digest(token)), address)
    if _is_known(store, key):
        return
    new = used_from(
        store,
        key[0],
        address,
        account=identity.account,
        user=identity.user,
        hint=token_hint(token),
        via="api",
    )
    _remember(store, key)
    if new:
        audit_written(store)


def note_session(store: Store, token_id: str, hint: str, identity: Identity, address: str) -> None:
    """A session opened by the token ``token_id`` was used from ``address``."""
    key = (token_id, address)
    if _is_known(store, key):
        return
    new = used_from(
        store,
        token_id,
        address,
        account=identity.account,
        user=identity.user,
        hint=hint,
        via="session",
    )
    _remember(store, key)
    if new:
        audit_written(store)


def audit_written(store: Store) -> None:
    """After the server wrote an audit event: remove those past ``audit-log-days``
    (at most once an hour per process)."""
    prune_if_due(store, float(config.get("audit-log-days", 365) or 0))
