"""HTTP errors: the status lives on the class; one handler turns any of them (and
unknown routes, bad parameters, unknown clusters) into an HTML page or JSON."""

from __future__ import annotations

import re
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from daskscope.store import AmbiguousCluster, UnknownCluster

__all__ = [
    "BadRequest",
    "Forbidden",
    "HTTPError",
    "NotFound",
    "PayloadTooLarge",
    "Unauthorized",
    "handle_exception",
    "install",
    "redact",
]


class HTTPError(Exception):
    """Base class: raise a subclass anywhere in a route; ``status`` says which."""

    status = 500
    title = "Internal error"

    def __init__(
        self,
        message: str,
        *,
        data: dict[str, Any] | None = None,
        hint: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        #: fields of the JSON error besides status, title and message
        self.data = data or {}
        #: what the page adds for a reader in a browser (not in the JSON)
        self.hint = hint
        #: response headers (``Retry-After`` of a refusal that passes)
        self.headers = headers or {}


class BadRequest(HTTPError):
    status = 400
    title = "Bad request"


class Unauthorized(HTTPError):
    status = 401
    title = "Log in first"


class Forbidden(HTTPError):
    status = 403
    title = "Not yours to see"


class NotFound(HTTPError):
    status = 404
    title = "Not found"


class PayloadTooLarge(HTTPError):
    status = 413
    title = "Upload too large"


class TooEarly(HTTPError):
    """A request that will succeed later, unchanged (RFC 8470's 425): e.g. a batch
    whose cluster record has not arrived yet."""

    status = 425
    title = "Too early"


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
        return NotFound(str(exc), data=exc.data(), hint="The account page lists the clusters.")
    if isinstance(exc, AmbiguousCluster):
        return BadRequest(
            str(exc), data=exc.data(), hint="Give more of the id: the account page lists them."
        )
    if isinstance(exc, RequestValidationError):
        parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        return BadRequest("; ".join(parts) or "invalid request")
    if isinstance(exc, StarletteHTTPException):
        error = HTTPError(str(exc.detail))
        error.status = exc.status_code
        error.title = {404: "Not found", 405: "Method not allowed"}.get(exc.status_code, "Error")
        if exc.status_code == 404:
            error.message = "there is no page at this address"
        return error
    return HTTPError("the server failed; see its log")


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or request.url.path == "/openapi.json"


async def handle_exception(request: Request, exc: Exception) -> Response:
    """The one place where errors become responses."""
    error = _as_http_error(exc)
    if error.status >= 500:
        import logging

        logging.getLogger("daskscope.web").exception("error serving %s", request.url.path)
    if isinstance(error, Unauthorized) and not _wants_json(request):
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
