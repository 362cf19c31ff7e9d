"""Assets the dashboard serves from installed packages or with something added, never from
a CDN nor copied into the repo: plotly.js (``plotly``), Swagger UI (``fastapi-offline``),
Bokeh's scripts for performance reports (``bokeh``), the page helpers with the formatter's
definitions, pygments' CSS.

Every asset is sent with a strong ETag (a hash of its bytes) and ``Cache-Control:
no-cache``: the browser keeps it and asks each time whether it changed, a ``304`` answers
in a few bytes, and a new release (new bytes, new ETag) is fetched at once. Large ones are
compressed once and kept (gzip) rather than on every request.

plotly.js, which every page with a chart loads, is also served at a URL naming its hash
(``/assets/plotly-<hash>.min.js``, the one the pages use: :func:`plotly_url`) as
immutable: a browser that has it never asks again, and a new plotly is a new URL. It goes
out with V8's compile hint (``//# allFunctionsCalledOnLoad``) first: Chromium then
compiles its functions while the file streams in, on another thread, instead of on the
page's thread as each is first called (docs/benchmarks.md, first load).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles

from daskscope import format
from daskscope.web import bokeh_assets
from daskscope.web.errors import HTTPError

__all__ = ["CACHE_CONTROL", "IMMUTABLE", "StaticAssets", "api", "pages", "plotly_url"]

pages = APIRouter(include_in_schema=False)
api = APIRouter()

#: Kept by the browser, revalidated on each use (ETag): a new release is seen at once.
CACHE_CONTROL = "public, no-cache"
#: For an asset at a URL that names its hash: kept a year, never asked for again.
IMMUTABLE = "public, max-age=31536000, immutable"
#: V8's compile hint: compile every function of the file eagerly, while it streams in
#: (Chromium; a comment to every other browser)
COMPILE_HINT = b"//# allFunctionsCalledOnLoad\n"
#: Smaller bodies are left to the app's GZipMiddleware.
_PRECOMPRESS_BYTES = 64 * 1024
#: Swagger UI's files in ``fastapi-offline`` that /api/docs loads.
SWAGGER_FILES = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css"}


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str
    gzipped: bytes | None


def _asset(body: bytes, media_type: str) -> Asset:
    digest = hashlib.sha256(body).hexdigest()[:24]
    packed = gzip.compress(body, compresslevel=6) if len(body) >= _PRECOMPRESS_BYTES else None
    return Asset(body, media_type, f'"{digest}"', packed)


def _not_modified(request: Request, etag: str) -> bool:
    sent = request.headers.get("if-none-match", "")
    return any(tag.strip().removeprefix("W/") == etag for tag in sent.split(","))


def send(request: Request, asset: Asset, cache_control: str = CACHE_CONTROL) -> Response:
    """``asset`` as a response: 304 when the browser holds it, gzip when it takes that."""
    wants_gzip = asset.gzipped is not None and "gzip" in request.headers.get("accept-encoding", "")
    # Each encoding is its own representation, with its own ETag
    etag = asset.etag[:-1] + '-gz"' if wants_gzip else asset.etag
    headers = {"ETag": etag, "Cache-Control": cache_control, "Vary": "Accept-Encoding"}
    if _not_modified(request, etag):
        return Response(status_code=304, headers=headers)
    if wants_gzip and asset.gzipped is not None:
        headers["Content-Encoding"] = "gzip"
        return Response(asset.gzipped, media_type=asset.media_type, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


def _package_file(package: str, *parts: str) -> bytes:
    try:
        return resources.files(package).joinpath(*parts).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        name = "/".join(parts)
        raise HTTPError(404, f"{name} is missing: pip install 'daskscope[web]'") from exc


@functools.cache
def _plotly_js() -> Asset:
    body = _package_file("plotly", "package_data", "plotly.min.js")
    return _asset(COMPILE_HINT + body, "text/javascript")


def plotly_url() -> str:
    """The URL of plotly.js that pages load: its hash in the name, cached for good."""
    return f"/assets/plotly-{_plotly_js().etag.strip(chr(34))}.min.js"


@pages.get("/assets/plotly.min.js")
def plotly_js(request: Request) -> Response:
    return send(request, _plotly_js())


@pages.get("/assets/plotly-{version}.min.js")
def plotly_js_version(request: Request, version: str) -> Response:
    """plotly.js at the URL of its hash, immutable; an old hash (a page from before an
    upgrade) gets the current file, revalidated like any other asset."""
    asset = _plotly_js()
    same = version == asset.etag.strip('"')
    return send(request, asset, IMMUTABLE if same else CACHE_CONTROL)


@functools.cache
def _swagger(name: str) -> Asset:
    return _asset(_package_file("fastapi_offline", "static", name), SWAGGER_FILES[name])


@pages.get("/assets/swagger-ui/{name}")
def swagger_file(request: Request, name: str) -> Response:
    if name not in SWAGGER_FILES:
        raise HTTPError(404, f"no Swagger UI file {name!r}")
    return send(request, _swagger(name))


@functools.cache
def _bokeh(version: str, name: str) -> Asset | None:
    body = bokeh_assets.script(version, name)
    return None if body is None else _asset(body, "text/javascript")


@pages.get("/assets/bokeh/{version}/{name}")
def bokeh_js(request: Request, version: str, name: str) -> Response:
    """Bokeh's scripts from the installed ``bokeh`` package, for performance reports saved
    in CDN mode (see ``web/bokeh_assets.py``). No CORP header: the sandboxed report
    (an opaque origin) loads them."""
    asset = _bokeh(version, name)
    if asset is None:
        raise HTTPError(404, f"Bokeh {version} has no script {name!r} here")
    return send(request, asset)


@functools.cache
def _code_css() -> Asset:
    from daskscope.web.render import code_css as css

    return _asset(css().encode(), "text/css")


@pages.get("/assets/code.css")
def code_css(request: Request) -> Response:
    return send(request, _code_css())


@functools.cache
def common_js_asset() -> Asset:
    # The page helpers format numbers from format.SPEC itself, put before the script
    script = Path(__file__).parents[1].joinpath("static", "common.js").read_text("utf-8")
    spec = json.dumps(format.SPEC, ensure_ascii=False, sort_keys=True)
    return _asset(f"const DS_FORMAT = {spec};\n{script}".encode(), "text/javascript")


@pages.get("/static/common.js")
def common_js(request: Request) -> Response:
    """``static/common.js`` after ``const DS_FORMAT = <format.SPEC>;`` (this route comes
    before the static mount, see ``web/app.py``)."""
    return send(request, common_js_asset())


class StaticAssets(StaticFiles):
    """``static/``: Starlette's files (ETag, 304) with the same caching as the rest."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = CACHE_CONTROL
        return response
