"""Connections bounded in number, in how long a request head may take, and in what a
connection without a verified token or session may hold.

uvicorn closes a connection that idles *between* requests (``timeout_keep_alive``) and
answers 503 past ``limit_concurrency`` requests, but only once a request's headers are
complete: a client that opens sockets and never finishes a request head holds them for
ever, and enough of them (1,100 here) exhaust the server's file descriptors so that it
answers no one. This protocol:

- closes a connection whose request head is not complete within ``serve.header-timeout``;
- keeps at most ``serve.max-connections``, below the process's file limit (which ``serve``
  raises to its hard limit at start: :func:`raise_file_limit`); when a new connection
  would pass the cap, the oldest idle one (no request in progress: an unfinished head, or
  kept alive between requests) is closed for it, those that never carried a verified
  token or session first; only when none is idle is the new one closed;
- closes a connection whose answer was sent while its request's body still arrives, once
  the body is in or ``serve.body-timeout`` has passed (uvicorn read and dropped such a
  body for as long as it kept coming);
- with :class:`ConnectionTrust` in the app: on a server with authentication, closes a
  connection after its answer unless a request on it carried a verified token or
  session, so no unauthenticated connection holds a socket past its deadlines.
"""

from __future__ import annotations

import asyncio
import resource
import weakref
from typing import Any, cast

import h11
from dask.utils import parse_timedelta
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from daskscope import config
from daskscope.web.limits import body_deadline

__all__ = [
    "ACCEPT_BACKLOG",
    "ConnectionTrust",
    "GuardedH11Protocol",
    "header_timeout",
    "max_connections",
    "raise_file_limit",
]

#: File descriptors kept for everything but client sockets (database, logs, reports)
_SPARE_FDS = 64
#: Connections asyncio accepts in one go before any reaches its protocol (and so the cap
#: below), and the listen queue's length. uvicorn's default, 2048, let a burst of
#: half-open connections open more sockets than the file limit allowed: "Too many open
#: files", and no connection was accepted for a second.
ACCEPT_BACKLOG = 128
#: Sockets open beyond the cap in a burst: accepted in the last two turns of the event
#: loop and not yet counted, and those closed for them in the last turn, not yet shut
_IN_TRANSIT = 3 * ACCEPT_BACKLOG
#: The scope key under which a request's connection (its protocol) is found
CONNECTION = "daskscope.connection"


def header_timeout() -> float:
    return float(parse_timedelta(config.get("serve.header-timeout", "10s")))


def max_connections() -> int:
    """``serve.max-connections``, and never more than the process can open: its file
    limit less what a burst of accepts and everything else may take."""
    wanted = int(config.get("serve.max-connections", 1000))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY:
        wanted = min(wanted, soft - _SPARE_FDS - _IN_TRANSIT)
    return max(1, wanted)


def raise_file_limit() -> tuple[int, int]:
    """Raise the soft limit of open files to the hard one (the default soft limit, often
    1,024, is what a crowd of half-open connections exhausted); (before, now)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft == hard:
        return soft, soft
    # an unlimited hard limit is still bounded by the kernel (fs.nr_open, macOS' OPEN_MAX)
    targets = [hard] if hard != resource.RLIM_INFINITY else [2**20, 2**16, 10240]
    for target in targets:
        if target <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        return soft, target
    return soft, soft


class _Idle:
    """A server's connections with no request in progress, oldest first: those to close
    when a new one would pass the cap, the never-verified before the verified."""

    def __init__(self) -> None:
        self.unverified: dict[GuardedH11Protocol, None] = {}
        self.verified: dict[GuardedH11Protocol, None] = {}

    def add(self, protocol: GuardedH11Protocol) -> None:
        self.discard(protocol)  # to the end: the newest
        (self.verified if protocol.verified else self.unverified)[protocol] = None

    def discard(self, protocol: GuardedH11Protocol) -> None:
        self.unverified.pop(protocol, None)
        self.verified.pop(protocol, None)

    def oldest(self) -> GuardedH11Protocol | None:
        return next(iter(self.unverified), None) or next(iter(self.verified), None)


_idle: weakref.WeakKeyDictionary[ServerState, _Idle] = weakref.WeakKeyDictionary()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head deadline, a connection cap that closes
    idle connections first, and an end to bodies nobody reads (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._linger: asyncio.TimerHandle | None = None
        self._header_timeout = header_timeout()
        self._body_grace = body_deadline()[0]
        self._max_connections = max_connections()
        self._idle = _idle.setdefault(self.server_state, _Idle())
        #: a request on it carried a verified token or session (ConnectionTrust)
        self.verified = False
        #: close once the current answer is sent and its request's body is in
        self.close_after_response = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self._max_connections:
            oldest = self._idle.oldest()
            if oldest is None:
                # No answer: writing one could block on a client that reads nothing
                self.connections.discard(self)
                transport.abort()
                return
            oldest.evict()
        self._idle.add(self)  # owes a request head: idle until it is in
        self._arm()

    def evict(self) -> None:
        """Close at once to make room for a new connection."""
        self._idle.discard(self)
        self.connections.discard(self)  # counted out now: abort closes on the next turn
        self._disarm()
        self._end_linger()
        self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self._arm()  # bytes of a request head: it must be complete in time
        super().data_received(data)
        if self._between_requests():
            if self._linger is not None and self.conn.their_state is not h11.SEND_BODY:
                self._end_linger()  # the unread body is in
                self._after_response()
        elif self.conn.their_state is not h11.IDLE:
            # the head is in; the body and keep-alive have their own limits, and a
            # request in progress is not closed for another connection
            self._disarm()
            self._end_linger()  # a pipelined request after a dropped body
            self._idle.discard(self)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle and self.cycle is not None:
            # the request's task has not run yet: it finds its connection in its scope
            cast(dict[str, Any], self.cycle.scope)[CONNECTION] = self

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing() or not self._between_requests():
            return  # closed, or a pipelined request already started
        if self.conn.their_state is h11.SEND_BODY:
            # answered before its body was read (a refusal): the rest is read and
            # dropped until it is in or the body's grace has passed
            self._linger = self.loop.call_later(self._body_grace, self._linger_over)
            self._idle.add(self)
            return
        self._after_response()

    def connection_lost(self, exc: Exception | None) -> None:
        self._idle.discard(self)
        self._disarm()
        self._end_linger()
        super().connection_lost(exc)

    def request_received(self) -> bool:
        """The current request's body has arrived whole."""
        return self.conn.their_state in (h11.DONE, h11.MUST_CLOSE)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _after_response(self) -> None:
        if self.close_after_response:
            self.transport.close()
        else:
            self._idle.add(self)  # kept alive: idle until its next request

    def _arm(self) -> None:
        if self._head_deadline is None:
            self._head_deadline = self.loop.call_later(self._header_timeout, self._head_late)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _end_linger(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None

    def _head_late(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.abort()

    def _linger_over(self) -> None:
        self._linger = None
        if not self.transport.is_closing():
            self.transport.abort()


class ConnectionTrust:
    """Tells each request's connection (:class:`GuardedH11Protocol`) whether the request
    carried a verified token or session (``request.state.viewer``, set by web/auth.py
    before any route runs). On a server with authentication, a connection that never
    did is closed after its answer (``Connection: close``; or, while the request's body
    still arrives, once it is in or its grace has passed): a client without credentials
    gets its answer, not a socket to keep. Connections of other servers (the in-process
    test client) are left alone."""

    def __init__(self, app: ASGIApp, *, auth: bool) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = scope.get(CONNECTION) if scope["type"] == "http" else None
        if not isinstance(connection, GuardedH11Protocol):
            await self.app(scope, receive, send)
            return

        async def send_marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                if scope.get("state", {}).get("viewer") is not None:
                    connection.verified = True
                elif self.auth and not connection.verified:
                    headers = list(message.get("headers", []))
                    if not connection.request_received():
                        connection.close_after_response = True
                    elif not any(name.lower() == b"connection" for name, _ in headers):
                        headers.append((b"connection", b"close"))
                        message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_marked)
