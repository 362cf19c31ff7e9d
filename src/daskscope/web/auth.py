"""Who is asking: tokens and login sessions for a shared daskscope server.

With authentication off (the embedded single-user mode on loopback) every request sees
everything. With it on, every page and API route needs a token — ``Authorization:
Bearer <token>`` from programs — or, for browsers, a session opened at ``/login``
(cookie ``daskscope_session``: a random id, kept hashed on the server, ended at logout,
at expiry or when its token is revoked), except the login page itself, static assets
and the OpenAPI document. A member sees their own account's clusters; an admin also
sees every member's usage.
"""

from __future__ import annotations

from dask.utils import parse_timedelta
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from daskscope import config
from daskscope.store.audit import login_failed
from daskscope.store.identity import Identity
from daskscope.store.sessions import end_session, open_session, session_holder
from daskscope.web.addresses import audit_written, bearer_known, note_bearer, note_session
from daskscope.web.errors import HTTPError
from daskscope.web.ratelimit import RateLimiter
from daskscope.web.render import page, render_page
from daskscope.web.security import CSRF_FIELD, check_csrf, cookie_secure
from daskscope.web.tokencache import REVERIFIED_PATHS, cached_identity, remembered_identity

__all__ = ["COOKIE", "authenticate", "pages", "viewer_of"]

COOKIE = "daskscope_session"
# /api/docs shows only /openapi.json, which is public too
PUBLIC_PREFIXES = ("/login", "/logout", "/static/", "/assets/", "/openapi.json", "/api/docs")

pages = APIRouter(include_in_schema=False)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _identity(request: Request) -> Identity | None:
    """Who the request's token or session is, noting the address it came from (the
    audit log's "used from a new address": a memory lookup unless the pair is new)."""
    store = request.app.state.store
    token = _bearer(request)
    if token:
        if request.url.path in REVERIFIED_PATHS:
            identity = cached_identity(store, token)  # checked again where the route writes
        else:
            identity = store.identity_for_token(token)
        if identity is not None:
            note_bearer(store, token, identity, client_address(request))
        return identity
    session = request.cookies.get(COOKIE)
    held = session_holder(store, session) if session else None
    if held is None:
        return None
    identity, token_id, hint = held
    note_session(store, token_id, hint, identity, client_address(request))
    return identity


async def authenticate(request: Request) -> None:
    """App-wide dependency: sets ``request.state.viewer`` or refuses with 401.

    Asynchronous, so that what needs no query costs no thread: authentication off,
    public paths, and an ingest token seen valid within the cache's TTL (which the
    write checks again: web/tokencache.py). Everything else is looked up in the
    database on a worker thread, before the route (and its body) is read."""
    request.state.viewer = None
    if not request.app.state.auth:
        return
    path = request.url.path
    if path.startswith(PUBLIC_PREFIXES):
        return
    viewer = None
    if path in REVERIFIED_PATHS:
        token = _bearer(request)
        store = request.app.state.store
        if token and bearer_known(store, token, client_address(request)):
            viewer = remembered_identity(store, token)
    if viewer is None:
        viewer = await run_in_threadpool(_identity, request)
    if viewer is None:
        raise HTTPError(
            401,
            "this daskscope server needs a token: log in, or send "
            "'Authorization: Bearer <token>' (daskscope token create --user NAME)",
        )
    request.state.viewer = viewer


def viewer_of(request: Request) -> Identity | None:
    """The identity behind the request; None when authentication is off (sees all)."""
    return getattr(request.state, "viewer", None)


def _login_page(request: Request, next: str, message: str | None, status: int) -> HTMLResponse:
    html = render_page(
        request, "login.html", title="Log in", next=_safe_next(next), message=message
    )
    return HTMLResponse(html, status_code=status)


@pages.get("/login", response_class=HTMLResponse)
def login_page(request: Request, next: str = "/") -> HTMLResponse:
    return page(request, "login.html", title="Log in", next=_safe_next(next), message=None)


def _limiter(request: Request) -> RateLimiter:
    state = request.app.state
    if getattr(state, "login_limiter", None) is None:
        per_minute = int(config.get("login-attempts-per-minute", 10))
        state.login_limiter = RateLimiter(state.store, per_minute)
    limiter: RateLimiter = state.login_limiter
    return limiter


@pages.post("/login", response_model=None)
async def login(request: Request) -> Response:
    # Counted before the body is read: guessing costs the guesser, not the server. In
    # the database, which every server process shares (web/ratelimit.py).
    client = client_address(request)
    wait = await run_in_threadpool(_limiter(request).attempt, client)
    if wait:
        refused = _login_page(request, "/", f"Too many login attempts; try again in {wait} s.", 429)
        refused.headers["Retry-After"] = str(wait)
        return refused
    form = await request.form(max_files=0, max_fields=3)
    next_, token = form.get("next", "/"), form.get("token", "")
    next_ = next_ if isinstance(next_, str) else "/"
    try:
        check_csrf(request, form.get(CSRF_FIELD))
    except HTTPError as exc:  # check_csrf refuses with 403
        return _login_page(request, next_, exc.message, 403)
    lifetime = float(parse_timedelta(config.get("session-lifetime", "12h")))
    token = token.strip() if isinstance(token, str) else ""
    store = request.app.state.store
    session = await run_in_threadpool(open_session, store, token, lifetime) if token else None
    if session is None:
        await run_in_threadpool(login_failed, store, token, client)
        await run_in_threadpool(audit_written, store)
        return _login_page(request, next_, "That token is unknown or revoked.", 401)
    response = RedirectResponse(_safe_next(next_), status_code=303)
    response.set_cookie(
        COOKIE,
        session,
        httponly=True,
        samesite="strict",
        secure=cookie_secure() or request.url.scheme == "https",
        max_age=int(lifetime),
    )
    return response


@pages.post("/logout")
async def logout(request: Request) -> RedirectResponse:
    form = await request.form(max_files=0, max_fields=2)
    check_csrf(request, form.get(CSRF_FIELD))
    session = request.cookies.get(COOKIE)
    if session:
        end_session(request.app.state.store, session)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, httponly=True, samesite="strict", secure=cookie_secure())
    return response


def _safe_next(target: str) -> str:
    # Only paths on this server: never an open redirect to another site
    # ("/\\host" is "//host" to browsers)
    return target if target.startswith("/") and target[1:2] not in ("/", "\\") else "/"
