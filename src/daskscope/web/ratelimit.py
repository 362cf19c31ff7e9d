"""A sliding one-minute window of attempts per client address (login guessing).

Kept in the server process: with ``serve --workers N`` each process counts on its
own, so a client gets at most N times the limit, still far from guessing a token.
"""

from __future__ import annotations

import math
import time
from collections import deque

__all__ = ["RateLimiter"]

WINDOW_S = 60.0
# Addresses remembered at most; past this, the quietest are forgotten first.
MAX_CLIENTS = 10_000


class RateLimiter:
    def __init__(self, per_minute: int) -> None:
        self.per_minute = max(1, per_minute)
        self._seen: dict[str, deque[float]] = {}

    def attempt(self, client: str) -> int:
        """Count one attempt; 0 if allowed, else the seconds until the next one is."""
        now = time.monotonic()
        times = self._seen.setdefault(client, deque())
        while times and times[0] <= now - WINDOW_S:
            times.popleft()
        if len(times) >= self.per_minute:
            return max(1, math.ceil(times[0] + WINDOW_S - now))
        times.append(now)
        if len(self._seen) > MAX_CLIENTS:
            self._forget(now)
        return 0

    def _forget(self, now: float) -> None:
        for client in [c for c, t in self._seen.items() if not t or t[-1] <= now - WINDOW_S]:
            del self._seen[client]
        while len(self._seen) > MAX_CLIENTS:
            del self._seen[next(iter(self._seen))]
