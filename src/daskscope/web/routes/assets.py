"""plotly.js, served from the installed ``plotly`` package: no CDN, no copy in the repo."""

from __future__ import annotations

import functools
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

from daskscope.web.errors import NotFound

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter()


@functools.cache
def _plotly_js() -> bytes:
    try:
        return resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise NotFound("plotly.min.js is missing: pip install 'daskscope[web]'") from exc


@pages.get("/assets/plotly.min.js")
def plotly_js() -> Response:
    return Response(
        _plotly_js(),
        media_type="text/javascript",
        headers={"Cache-Control": "public, max-age=86400"},
    )


@pages.get("/assets/code.css")
def code_css() -> Response:
    from daskscope.web.render import code_css as css

    return Response(css(), media_type="text/css")
