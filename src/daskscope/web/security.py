"""What a browser may do with this server: the checks every request passes first.

One ASGI middleware, outermost in the app, so that nothing a route does can skip it:

- ``Host`` must name this server (loopback names, the address the connection arrived
  at, the bound host, ``daskscope.allowed-hosts`` and the host of
  ``daskscope.public-url``): a DNS-rebinding page that reaches the loopback server
  under its own name is refused (400).
- Unsafe requests (POST, PUT, PATCH, DELETE) that carry an ``Origin`` must come from
  this server's own origin; without one (httpx, curl, the collector), a browser's
  ``Sec-Fetch-Site`` must not say cross-site (403).
- Unsafe API requests must say what they send: JSON, or multipart for report uploads
  (415). A cross-site ``text/plain`` "simple" POST never reaches a route.
- Unsafe requests to pages (the forms) need the CSRF cookie; the route compares it with
  the form's ``csrf`` field (double submit, :func:`check_csrf`).
- Every response gets the security headers a route did not set itself (CSP, no framing,
  ``nosniff``); the raw report sets its own sandbox policy.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from daskscope import config
from daskscope.web.errors import HTTPError

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "PAGE_CSP",
    "SecurityMiddleware",
    "allowed_hosts",
    "check_csrf",
    "cookie_secure",
    "csrf_token",
]

CSRF_COOKIE = "daskscope_csrf"
CSRF_FIELD = "csrf"
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})

#: Pages load scripts and styles from this server only; plotly sets inline styles.
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
    "frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
_HEADERS = (
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),
    ("cross-origin-opener-policy", "same-origin"),
)
#: Unsafe API routes that take something other than JSON, and what they take.
_NOT_JSON = {"/api/v1/reports": "multipart/form-data"}


#: The titles of its refusals (400, 403): they say more than the status's phrase
UNKNOWN_HOST, CROSS_SITE = "Unknown host", "Cross-site request refused"


def _hostname(value: str) -> str:
    """``example.org:8787`` / ``[::1]:80`` → ``example.org`` / ``::1`` (lowercase)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def public_url() -> str | None:
    value = config.get("public-url")
    return str(value).rstrip("/") if value else None


def cookie_secure() -> bool:
    """Cookies carry ``Secure`` when the operator says the server is reached by https."""
    url = public_url()
    return bool(url and url.lower().startswith("https://"))


def allowed_hosts(bound: Iterable[str] = ()) -> frozenset[str]:
    """Host names this server answers to (the address a connection arrived at is added
    per request). ``*`` in ``daskscope.allowed-hosts`` turns the check off."""
    names = set(LOOPBACK_NAMES)
    for host in bound:
        if host in WILDCARDS:
            names.add(socket.gethostname().lower())  # reached by the machine's name
        else:
            names.add(_hostname(host))
    configured = config.get("allowed-hosts") or []
    if isinstance(configured, str):
        configured = [h for h in configured.replace(",", " ").split() if h]
    names.update(_hostname(str(h)) for h in configured)
    url = public_url()
    if url:
        names.add(_hostname(urlsplit(url).netloc))
    return frozenset(names)


def _media_type(headers: Headers) -> str:
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _is_json(media: str) -> bool:
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _check(scope: Scope, headers: Headers, hosts: frozenset[str]) -> None:
    """Raise the HTTPError that refuses this request, if any."""
    host = _hostname(headers.get("host", ""))
    arrived_at = (scope.get("server") or ("",))[0]
    if "*" not in hosts and host not in hosts and host != arrived_at:
        raise HTTPError(
            400,
            "the Host header names a server this is not; if it is this server's public "
            "name, add it to daskscope.allowed-hosts (or set daskscope.public-url)",
            title=UNKNOWN_HOST,
        )
    method = scope["method"]
    if method not in UNSAFE:
        return
    origin = headers.get("origin")
    if origin is not None:
        same = urlsplit(origin).netloc.lower() == headers.get("host", "").lower()
        if not same and origin.rstrip("/") != public_url():
            raise HTTPError(
                403,
                "this server takes changes only from its own pages (the Origin header "
                "names another site); programs send no Origin header",
                title=CROSS_SITE,
            )
    elif headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        raise HTTPError(403, "this server takes changes only from its own pages", title=CROSS_SITE)
    path: str = scope["path"]
    media = _media_type(headers)
    if path.startswith("/api/") and method in ("POST", "PUT", "PATCH"):
        wanted = _NOT_JSON.get(path.rstrip("/"))
        if wanted is None and not _is_json(media):
            raise HTTPError(
                415, f"Content-Type: send this endpoint JSON as 'application/json' (got {media!r})"
            )
        if wanted is not None and media != wanted:
            raise HTTPError(415, f"Content-Type: send this endpoint {wanted!r} (got {media!r})")
    if not path.startswith("/api/") and CSRF_COOKIE not in Request(scope).cookies:
        raise HTTPError(
            403,
            "the form has no session check (cookie daskscope_csrf): reload the page and "
            "send the form again",
            title=CROSS_SITE,
        )


class SecurityMiddleware:
    """The checks of this module around the whole app (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        cookie = Request(scope).cookies.get(CSRF_COOKIE)
        fresh = None if cookie else secrets.token_urlsafe(32)
        scope.setdefault("state", {})["csrf"] = cookie or fresh
        csp = PAGE_CSP

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = list(message.get("headers", []))
                present = {name.lower() for name, _ in raw}
                if b"content-security-policy" not in present:
                    raw.append((b"content-security-policy", csp.encode()))
                raw.extend(
                    (name.encode(), value.encode())
                    for name, value in _HEADERS
                    if name.encode() not in present
                )
                if fresh is not None:
                    raw.append((b"set-cookie", _csrf_cookie(fresh).encode()))
                message = {**message, "headers": raw}
            await send(message)

        try:
            _check(scope, headers, self.hosts)
        except HTTPError as error:
            from daskscope.web.errors import handle_exception

            response = await handle_exception(Request(scope, receive), error)
            await response(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)


def _csrf_cookie(value: str) -> str:
    secure = "; Secure" if cookie_secure() else ""
    return f"{CSRF_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict{secure}"


def csrf_token(request: Request) -> str:
    """The value forms send back in their hidden ``csrf`` field."""
    return str(getattr(request.state, "csrf", ""))


def check_csrf(request: Request, sent: Any) -> None:
    """Refuse a form whose ``csrf`` field does not match the cookie (double submit)."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not (isinstance(sent, str) and cookie and secrets.compare_digest(sent, cookie)):
        why = "the form's session check failed: reload the page and send it again"
        raise HTTPError(403, why, title=CROSS_SITE)
