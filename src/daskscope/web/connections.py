"""Connections bounded in number and in how long a request head may take.

uvicorn closes a connection that idles *between* requests (``timeout_keep_alive``) and
answers 503 past ``limit_concurrency`` requests, but only once a request's headers are
complete: a client that opens sockets and never finishes a request head holds them for
ever, and enough of them (1,100 here) exhaust the server's file descriptors so that it
answers no one. This protocol closes a connection whose request head is not complete
within ``serve.header-timeout``, and closes at once any connection past
``serve.max-connections``.
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

import h11
from dask.utils import parse_timedelta
from uvicorn.protocols.http.h11_impl import H11Protocol

from daskscope import config

__all__ = ["GuardedH11Protocol", "header_timeout", "max_connections"]

#: File descriptors kept for everything but client sockets (database, logs, reports)
_SPARE_FDS = 64


def header_timeout() -> float:
    return float(parse_timedelta(config.get("serve.header-timeout", "10s")))


def max_connections() -> int:
    """``serve.max-connections``, and never more than the process can open."""
    wanted = int(config.get("serve.max-connections", 1000))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY:
        wanted = min(wanted, soft - _SPARE_FDS)
    return max(1, wanted)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head deadline and a connection cap."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._header_timeout = header_timeout()
        self._max_connections = max_connections()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self._max_connections:
            # No answer: writing one could block on a client that reads nothing
            transport.abort()
            return
        self._arm()  # a new connection owes a request head

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self._arm()  # bytes of a request head: it must be complete in time
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the head is in; the body and keep-alive have their own limits

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_deadline is None:
            self._head_deadline = self.loop.call_later(self._header_timeout, self._head_late)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.abort()
