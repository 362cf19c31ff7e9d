"""A sliding one-minute window of login attempts per client address (guessing).

Counted in the store (store/login_limit.py), which every server process shares: with
``serve --workers N``, or several servers on one database, a client gets the limit
once, not N times.
"""

from __future__ import annotations

from daskscope.store import Store
from daskscope.store.login_limit import take_attempt

__all__ = ["RateLimiter"]


class RateLimiter:
    def __init__(self, store: Store, per_minute: int) -> None:
        self.store = store
        self.per_minute = max(1, per_minute)

    def attempt(self, client: str) -> int:
        """Count one attempt; 0 if allowed, else the seconds until the next one is.
        A database query: call it on a worker thread."""
        return take_attempt(self.store, client, self.per_minute)
