"""Request bodies bounded before they are read, and in time: an ASGI middleware.

Starlette reads a form (``POST /login``) or a multipart upload whole, spooling it to
disk, before a route can say no: 1 GiB of multipart reached the disk before ``/login``
answered 401. Here every request's body has a limit chosen by its path: a declared
``Content-Length`` past it is answered 413 before a byte is read, and a body without
one (chunked) is counted as it streams and cut off with 413 the moment it passes it.
A body must also keep coming while it is read (:func:`body_deadline`): one that does not
is answered 408, which senders retry.
"""

from __future__ import annotations

import asyncio
import html
import json
from http import HTTPStatus
from typing import Any

from dask.utils import parse_bytes, parse_timedelta
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from daskscope import config

__all__ = ["BodyLimit", "body_deadline", "body_limit"]

#: Room for the multipart envelope and form fields around an uploaded report
_ENVELOPE = 64 * 1024
_DEFAULT_MAX_REQUEST_BYTES = 64 * 1024


def body_limit(path: str) -> tuple[int, str]:
    """The largest body a request to ``path`` may have, and the setting that says so."""
    if path.endswith("/ingest"):
        return int(config.get("ingest.max-batch-bytes")), "daskscope.ingest.max-batch-bytes"
    if path.rstrip("/") in ("/reports", "/api/v1/reports"):
        from daskscope.store.reports import max_report_bytes

        return max_report_bytes() + _ENVELOPE, "daskscope.max-report-bytes"
    limit = config.get("max-request-bytes", None) or _DEFAULT_MAX_REQUEST_BYTES
    return int(limit), "daskscope.max-request-bytes"


class BodyLimit:
    """Refuse with 413 any request body past :func:`body_limit` of its path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, setting = body_limit(scope["path"])
        page = not scope["path"].startswith("/api/")
        declared = _content_length(scope)
        if declared == -1:
            await _refuse(send, 400, "Content-Length must be a number of bytes", page=page)
            return
        if declared is not None and declared > limit:
            message = (
                f"the body has {declared} bytes; this address takes at most {limit} ({setting})"
            )
            await _refuse(send, 413, message, page=page)
            return
        seen, refused, started = 0, False, False
        waited, body_done = 0.0, False
        grace, rate = body_deadline()

        async def counted() -> Message:
            nonlocal seen, refused, waited, body_done
            if refused:
                return {"type": "http.disconnect"}
            if body_done:
                message = await receive()  # the body is in: a wait for the disconnect
            else:
                # Only the time spent here counts, waiting for the client: not a route's
                # wait for its turn before it reads (web/admission.py)
                loop = asyncio.get_running_loop()
                start = loop.time()
                try:
                    async with asyncio.timeout(grace + seen / rate - waited):
                        message = await receive()
                except TimeoutError:
                    refused = True
                    if not started:
                        why = (
                            f"the body did not arrive in time: after {grace:g} s the server "
                            f"waits one more second for every {rate:g} bytes "
                            "(daskscope.serve.body-timeout, body-min-rate); send it again"
                        )
                        await _refuse(send, 408, why, page=page)
                    return {"type": "http.disconnect"}
                finally:
                    waited += loop.time() - start
                body_done = message["type"] != "http.request" or not message.get("more_body")
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    # Answer here, whoever is reading (a route, the CSRF check), and
                    # tell the reader the client left: it stops, its answer is dropped
                    refused = True
                    if not started:
                        text = f"the body passed {limit} bytes, the most this address takes"
                        why = f"{text} ({setting})"
                        await _refuse(send, 413, why, page=page)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            started = True
            await send(message)

        try:
            await self.app(scope, counted, guarded_send)
        except Exception:
            if not refused:
                raise  # a reader that fails on the disconnect: already answered


def body_deadline() -> tuple[float, float]:
    """How long the server waits for a body: ``serve.body-timeout`` seconds, plus one
    for every ``serve.body-min-rate`` bytes that arrived (a body trickling in at a byte a
    second held a connection, and an ingest slot, for as long as it liked)."""
    grace = float(parse_timedelta(config.get("serve.body-timeout", "10s")))
    rate = config.get("serve.body-min-rate", 65536)
    rate = parse_bytes(rate) if isinstance(rate, str) else rate
    return grace, max(1.0, float(rate))


def _content_length(scope: Scope) -> int | None:
    """The declared length; None when there is none, -1 when it is not a number."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else -1
    return None


async def _refuse(send: Send, status: int, message: str, *, page: bool) -> None:
    """JSON on the API, a small page for a browser's form (the page templates need the
    request state that inner middleware sets, which this outermost one comes before),
    as web/errors.py answers an HTTPError."""
    title = HTTPStatus(status).phrase
    if page:
        text = f"{status} · {html.escape(title)}"
        body = (
            f'<!doctype html><html lang="en"><meta charset="utf-8"><title>{text}</title>'
            f'<section class="error-page" data-status="{status}"><h1>{text}</h1>'
            f'<p class="message">{html.escape(message)}</p><p><a href="/">Back to the '
            "clusters</a></p></section></html>"
        ).encode()
        media = b"text/html; charset=utf-8"
    else:
        error = {"status": status, "title": title, "message": message}
        body, media = json.dumps({"error": error}).encode(), b"application/json"
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", media),
        (b"content-length", str(len(body)).encode()),
        # the client may still be sending: do not read the rest of it on this connection
        (b"connection", b"close"),
    ]
    start: dict[str, Any] = {"type": "http.response.start", "status": status, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": body})
