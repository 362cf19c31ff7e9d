"""Uploaded Dask performance reports (``/reports``).

A report is third-party HTML with scripts. It is only ever served from
``/reports/{id}/raw`` with a ``Content-Security-Policy: sandbox allow-scripts`` header
(no ``allow-same-origin``, no ``allow-top-navigation``), so it runs in an opaque origin:
it cannot read the dashboard's cookies, storage or DOM, nor send to its API. The report
page embeds it in an ``<iframe sandbox>`` as a second fence; a browser opening the raw
URL as a tab of its own is sent to that page, since a sandboxed top-level page could
still navigate its own tab.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from daskscope.store import Store
from daskscope.store.reports import (
    ACCEPTED,
    NotAReport,
    ReportTooLarge,
    check_report,
    max_report_bytes,
    save_report,
)
from daskscope.web import bokeh_assets
from daskscope.web.errors import HTTPError
from daskscope.web.render import page
from daskscope.web.report_file import (
    Get,
    ReportFailed,
    app_reader,
    cluster_report,
    compare_report,
    computation_report,
    file_name,
    run_report,
)
from daskscope.web.routes.common import account_scope, store_of, visible_cluster_id
from daskscope.web.security import CSRF_FIELD, check_csrf

__all__ = ["REPORT_CSP", "api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["reports"])

#: The report runs its own inline scripts (Bokeh) in an opaque origin; saved in CDN mode,
#: it loads Bokeh's scripts from this server (web/bokeh_assets.py) or, when this server
#: cannot serve that version, from Bokeh's CDN if the browser reaches it; it may fetch
#: nothing else. This server is named by its origin: the document's own origin is opaque.
REPORT_CSP = (
    "sandbox allow-scripts; default-src 'none'; "
    "script-src 'unsafe-inline' 'unsafe-eval' {origin}/assets/bokeh/ https://cdn.bokeh.org; "
    "style-src 'unsafe-inline' https://cdn.bokeh.org; img-src data: blob:; font-src data:; "
    "connect-src 'none'; form-action 'none'; base-uri 'none'; frame-ancestors 'self'"
)
# Room for the multipart envelope and the cluster field around the file itself.
_ENVELOPE = 64 * 1024


#: The title of its 422 (the status's phrase says less)
NOT_A_REPORT = "Not a performance report"


async def _receive_upload(
    request: Request, store: Store, *, form_page: bool = False
) -> dict[str, Any]:
    limit = max_report_bytes()
    length = request.headers.get("content-length")
    if length is None:
        raise HTTPError(411, "send the upload with a Content-Length header")
    if not length.isdigit():
        raise HTTPError(400, "invalid Content-Length")
    if int(length) > limit + _ENVELOPE:
        raise HTTPError(413, f"the upload has {length} bytes; reports may have {limit}")
    form = await request.form(max_files=1, max_fields=5)
    if form_page:  # the page's form, sent with the session cookies: CSRF-checked
        check_csrf(request, form.get(CSRF_FIELD))
    upload = form.get("file")
    if upload is None or isinstance(upload, str):
        raise HTTPError(400, "send the report as the multipart form field 'file'")
    content = await upload.read()
    if not content:
        raise HTTPError(400, "the uploaded file is empty")
    if len(content) > limit:
        raise HTTPError(413, f"the report has {len(content)} bytes; the limit is {limit}")
    try:
        check_report(content, repr(upload.filename or "the upload"))
    except NotAReport as exc:
        raise HTTPError(
            422,
            str(exc),
            title=NOT_A_REPORT,
            data={"accepted": ACCEPTED},
            hint="Go back to the performance reports page and choose the report's HTML file.",
        ) from None
    cluster = form.get("cluster")
    cluster_id = None
    if isinstance(cluster, str) and cluster.strip():
        cluster_id = visible_cluster_id(request, cluster.strip())
    try:
        return save_report(
            store,
            content,
            name=upload.filename or "report.html",
            cluster_id=cluster_id,
            account=account_scope(request),
        )
    except ReportTooLarge as exc:
        raise HTTPError(413, str(exc)) from None


def _info(request: Request, report_id: str) -> dict[str, Any]:
    info = store_of(request).report_info(report_id, account=account_scope(request))
    if info is None:
        raise HTTPError(404, f"no performance report with id {report_id!r}")
    return info


@pages.get("/reports", response_class=HTMLResponse)
def reports_page(request: Request) -> HTMLResponse:
    store = store_of(request)
    return page(
        request,
        "reports.html",
        title="Performance reports",
        reports=store.list_reports(account=account_scope(request)),
        limit=max_report_bytes(),
    )


@pages.post("/reports")
async def upload_from_page(request: Request) -> RedirectResponse:
    info = await _receive_upload(request, store_of(request), form_page=True)
    return RedirectResponse(f"/reports/{info['id']}", status_code=303)


@pages.get("/reports/{report_id}", response_class=HTMLResponse)
def report_page(request: Request, report_id: str) -> HTMLResponse:
    info = _info(request, report_id)
    content = store_of(request).read_report(report_id, account=account_scope(request))
    state = bokeh_assets.offline(content or b"")
    return page(request, "report.html", title=info["name"], report=info, offline=state)


@pages.get("/reports/{report_id}/raw")
def report_raw(request: Request, report_id: str) -> Response:
    content = store_of(request).read_report(report_id, account=account_scope(request))
    if content is None:
        raise HTTPError(404, f"no performance report with id {report_id!r}")
    if request.headers.get("sec-fetch-dest") == "document":
        # Opened as the tab itself, a sandboxed page may still navigate that tab: show
        # it inside the viewer's iframe instead, which may not.
        return RedirectResponse(f"/reports/{report_id}", status_code=303)
    # The stored file stays as uploaded; what is sent loads Bokeh from here if it can
    origin = str(request.base_url).rstrip("/")
    return Response(
        bokeh_assets.rewrite(content),
        media_type="text/html; charset=utf-8",
        headers={
            "Content-Security-Policy": REPORT_CSP.format(origin=origin),
            "X-Content-Type-Options": "nosniff",
            "X-Frame-Options": "SAMEORIGIN",  # the viewer page frames it
            "Referrer-Policy": "no-referrer",
            "Cross-Origin-Resource-Policy": "same-origin",
            "Cache-Control": "no-store",
        },
    )


@api.get("/reports", summary="Uploaded performance reports, newest first")
def reports_json(request: Request) -> dict[str, Any]:
    store = store_of(request)
    reports = store.list_reports(account=account_scope(request))
    return {"reports": reports, "max_bytes": max_report_bytes()}


@api.post(
    "/reports",
    status_code=201,
    summary="Upload a Dask performance report",
    responses={
        411: {"description": "no Content-Length"},
        413: {"description": "past daskscope.max-report-bytes (or the account's quota)"},
        422: {"description": "not a Dask performance report; `accepted` says what is"},
    },
    description="multipart/form-data with the HTML file in field `file` and optionally a "
    "cluster id (or unique prefix) in field `cluster`. 413 past `daskscope.max-report-bytes`; "
    "422 for a file that is not a Dask performance report.",
)
async def upload_json(request: Request) -> JSONResponse:
    info = await _receive_upload(request, store_of(request))
    return JSONResponse({**info, "url": f"/reports/{info['id']}"}, status_code=201)


@api.get("/reports/{report_id}", summary="One report's details")
def report_json(request: Request, report_id: str) -> dict[str, Any]:
    info = _info(request, report_id)
    return {**info, "url": f"/reports/{report_id}", "raw_url": f"/reports/{report_id}/raw"}


# --- report files of the dashboard's own pages (web/report_file.py) -----------------------


async def _report_file(
    request: Request, make: Callable[[Get], Awaitable[bytes]], name: str
) -> Response:
    """The page as one offline HTML file, sent as an attachment. It is read from this
    app as the viewer would read it (their cookies or token): what they may not see is
    not in it."""
    forwarded = {k: v for k, v in request.headers.items() if k in ("cookie", "authorization")}
    client = (request.client.host, request.client.port) if request.client else ("127.0.0.1", 0)
    async with app_reader(
        request.app, base_url=str(request.base_url), headers=forwarded, client=client
    ) as get:
        try:
            content = await make(get)
        except ReportFailed as exc:
            raise HTTPError(404, str(exc)) from None
    return Response(
        content,
        media_type="text/html; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
        },
    )


@pages.get("/clusters/{cluster_id}/report")
async def cluster_report_file(request: Request, cluster_id: str) -> Response:
    """The cluster's page and task timeline as one file that opens offline."""
    return await _report_file(
        request, lambda get: cluster_report(get, cluster_id), file_name(cluster_id)
    )


@pages.get("/clusters/{cluster_id}/computations/{computation_id}/report")
async def computation_report_file(
    request: Request, cluster_id: str, computation_id: str
) -> Response:
    return await _report_file(
        request,
        lambda get: computation_report(get, cluster_id, computation_id),
        file_name(f"{cluster_id}-{computation_id}"),
    )


@pages.get("/runs/{run_id}/report")
async def run_report_file(request: Request, run_id: str) -> Response:
    return await _report_file(
        request, lambda get: run_report(get, run_id), file_name(f"run-{run_id}")
    )


@pages.get("/compare/report")
async def compare_report_file(request: Request, a: str, b: str) -> Response:
    return await _report_file(
        request, lambda get: compare_report(get, a, b), file_name(f"compare-{a}-{b}")
    )
