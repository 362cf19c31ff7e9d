"""``/api/docs``: FastAPI's Swagger UI page over ``/openapi.json``, its scripts and styles
served by this app from the ``fastapi-offline`` package (``/assets/swagger-ui/``), so
that it works with no network."""

from __future__ import annotations

import base64
import hashlib
import re

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter()

_INLINE = re.compile(rb"<script>(.*?)</script>", re.DOTALL)


def _csp(body: bytes) -> str:
    """The pages' policy, plus the page's own inline start-up script by its hash."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(m[1]).digest()).decode() + "'"
        for m in _INLINE.finditer(body)
    )
    return (
        f"default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )


@pages.get("/api/docs", response_class=HTMLResponse)
def swagger_page(request: Request) -> HTMLResponse:
    openapi_url = request.app.openapi_url or "/openapi.json"
    page = get_swagger_ui_html(
        openapi_url=openapi_url,
        title=f"{request.app.title} API",
        swagger_js_url="/assets/swagger-ui/swagger-ui-bundle.js",
        swagger_css_url="/assets/swagger-ui/swagger-ui.css",
        swagger_favicon_url="data:,",
        # Swagger UI would send the document to an online validator
        swagger_ui_parameters={"validatorUrl": None},
    )
    page.headers["Content-Security-Policy"] = _csp(bytes(page.body))
    return page
