"""HTTP errors: one type, :class:`HTTPError`, carrying its status (its title from
:class:`http.HTTPStatus` unless the raise says more); one handler turns it (and
unknown routes, bad parameters, unknown clusters) into an HTML page or JSON."""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from daskscope.store import AmbiguousCluster, UnknownCluster

__all__ = ["HTTPError", "handle_exception", "install", "redact"]


class HTTPError(Exception):
    """Raise anywhere in a route (or middleware) to answer with ``status``, e.g.
    ``HTTPError(404, "cluster 3f2a has no span 'x'", hint="Its page lists them.")``.

    ``title`` defaults to the status's phrase (``HTTPStatus(404).phrase``); give one
    where it says more ("Unknown host"). The JSON answer is ``{"error": {**data,
    "status", "title", "message"}}``; the page shows title, message and ``hint``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        title: str | None = None,
        data: dict[str, Any] | None = None,
        hint: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.title = title or _phrase(status)
        self.message = message
        #: fields of the JSON error besides status, title and message
        self.data = data or {}
        #: what the page adds for a reader in a browser (not in the JSON)
        self.hint = hint
        #: response headers (``Retry-After`` of a refusal that passes: 425, 429)
        self.headers = headers or {}


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:  # a status Python does not name
        return "Error"


# What a database or driver message may carry about where the store lives: URLs,
# addresses, ports, socket paths, role names, process ids. None of it is the caller's.
_PRIVATE = [
    (re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I), "<store>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b|\[[0-9a-f:]+\]", re.I), "<host>"),
    (re.compile(r"(?:/[\w.-]+)+/?\.s\.PGSQL\.\d+|(?:/[\w.@-]+){2,}", re.I), "<path>"),
    (
        re.compile(r"\b(port|pid|process|user|role|database|host)\s*[=:]?\s*\"?[\w.-]+\"?", re.I),
        r"\1 <hidden>",
    ),
]


def redact(text: str) -> str:
    """``text`` (a database's or driver's message) without where the store lives."""
    for pattern, replacement in _PRIVATE:
        text = pattern.sub(replacement, text)
    return text


def _as_http_error(exc: Exception) -> HTTPError:
    if isinstance(exc, HTTPError):
        return exc
    if isinstance(exc, UnknownCluster):
        return HTTPError(
            404, str(exc), data=exc.data(), hint="The account page lists the clusters."
        )
    if isinstance(exc, AmbiguousCluster):
        hint = "Give more of the id: the account page lists them."
        return HTTPError(400, str(exc), data=exc.data(), hint=hint)
    if isinstance(exc, RequestValidationError):
        parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        return HTTPError(400, "; ".join(parts) or "invalid request")
    if isinstance(exc, StarletteHTTPException):
        if exc.status_code == 404:
            return HTTPError(404, "there is no page at this address")
        return HTTPError(exc.status_code, str(exc.detail))
    return HTTPError(500, "the server failed; see its log")


#: Paths read by programs, not people, outside ``/api/``: their errors are JSON, and a
#: missing token is a 401, not a redirect to the login page (Prometheus would record
#: the login page as a failed scrape)
_FOR_PROGRAMS = ("/openapi.json", "/metrics")


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or request.url.path in _FOR_PROGRAMS


async def handle_exception(request: Request, exc: Exception) -> Response:
    """The one place where errors become responses."""
    error = _as_http_error(exc)
    if error.status >= 500:
        import logging

        logging.getLogger("daskscope.web").exception("error serving %s", request.url.path)
    if error.status == 401 and not _wants_json(request):
        from urllib.parse import quote

        target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        return RedirectResponse(f"/login?next={target}", status_code=303)
    if _wants_json(request):
        fields = {"status": error.status, "title": error.title, "message": error.message}
        body = {"error": {**error.data, **fields}}
        return JSONResponse(body, status_code=error.status, headers=error.headers)
    from daskscope.web.render import render_page

    html = render_page(request, "error.html", title=error.title, error=error)
    return HTMLResponse(html, status_code=error.status, headers=error.headers)


def install(app: Any) -> None:
    for exc_type in (
        HTTPError,
        UnknownCluster,
        AmbiguousCluster,
        RequestValidationError,
        StarletteHTTPException,
        Exception,
    ):
        app.add_exception_handler(exc_type, handle_exception)
