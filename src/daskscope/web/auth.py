"""Who is asking: tokens and login sessions for a shared daskscope server.

With authentication off (the embedded single-user mode on loopback) every request sees
everything. With it on, every page and API route needs a token — ``Authorization:
Bearer <token>`` from programs, or the ``daskscope_token`` cookie that ``/login`` sets
for browsers — except the login page itself, static assets and the OpenAPI document.
A member sees their own account's clusters; an admin also sees every member's usage.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from daskscope.store.identity import Identity, identity_for_token
from daskscope.web.errors import Unauthorized
from daskscope.web.render import page, render_page

__all__ = ["COOKIE", "authenticate", "pages", "viewer_of"]

COOKIE = "daskscope_token"
PUBLIC_PREFIXES = ("/login", "/logout", "/static/", "/assets/", "/openapi.json", "/api/docs")

pages = APIRouter(include_in_schema=False)


def _token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.cookies.get(COOKIE) or None


def authenticate(request: Request) -> None:
    """App-wide dependency: sets ``request.state.viewer`` or refuses with 401."""
    request.state.viewer = None
    if not request.app.state.auth or request.url.path.startswith(PUBLIC_PREFIXES):
        return
    token = _token(request)
    viewer = identity_for_token(request.app.state.store, token) if token else None
    if viewer is None:
        raise Unauthorized(
            "this daskscope server needs a token: log in, or send "
            "'Authorization: Bearer <token>' (daskscope token create --user NAME)"
        )
    request.state.viewer = viewer


def viewer_of(request: Request) -> Identity | None:
    """The identity behind the request; None when authentication is off (sees all)."""
    return getattr(request.state, "viewer", None)


@pages.get("/login", response_class=HTMLResponse)
def login_page(request: Request, next: str = "/") -> HTMLResponse:
    return page(request, "login.html", title="Log in", next=_safe_next(next), message=None)


@pages.post("/login", response_model=None)
def login(
    request: Request, token: Annotated[str, Form()], next: Annotated[str, Form()] = "/"
) -> HTMLResponse | RedirectResponse:
    if identity_for_token(request.app.state.store, token.strip()) is None:
        html = render_page(
            request,
            "login.html",
            title="Log in",
            next=_safe_next(next),
            message="That token is unknown or revoked.",
        )
        return HTMLResponse(html, status_code=401)
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(
        COOKIE,
        token.strip(),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        max_age=30 * 86400,
    )
    return response


@pages.post("/logout")
def logout() -> RedirectResponse:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE)
    return response


def _safe_next(target: str) -> str:
    # Only paths on this server: never an open redirect to another site
    return target if target.startswith("/") and not target.startswith("//") else "/"
