"""Assets with something added: plotly.js from the installed ``plotly`` package (no CDN, no
copy in the repo), the page helpers with the formatter's definitions, pygments' CSS."""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import Response

from daskscope import format
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


@functools.cache
def _common_js() -> bytes:
    # The page helpers format numbers from format.SPEC itself, put before the script
    script = Path(__file__).parents[1].joinpath("static", "common.js").read_text("utf-8")
    spec = json.dumps(format.SPEC, ensure_ascii=False, sort_keys=True)
    return f"const DS_FORMAT = {spec};\n{script}".encode()


@pages.get("/static/common.js")
def common_js() -> Response:
    """``static/common.js`` after ``const DS_FORMAT = <format.SPEC>;`` (this route comes
    before the static mount, see ``web/app.py``)."""
    return Response(_common_js(), media_type="text/javascript")
