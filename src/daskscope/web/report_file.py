"""A page of the dashboard as one self-contained HTML file (``daskscope report``, the
pages' "Download report" links): opens from disk, offline, in any recent browser, and
asks no host for anything.

The file is the page the server sends, not a second rendering of it: the page and the
JSON its scripts would ask for are requested from the app itself (in process), its
style sheets and scripts inlined, the answers embedded as JSON (``common.js`` reads them
there in a report, ``ds.json``), and plotly.js embedded gzip-compressed: the browser
unpacks it (``DecompressionStream``) before it runs the page's scripts in their order.
The file's own Content-Security-Policy forbids every request, so a script that would
still ask for something fails rather than reach a host.

A cluster's report also holds its task timeline (the whole cluster at the page's bin
size), a computation's the computation's. Views that need the server (a zoomed
timeline, another span's filter) say so on the page instead.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
from markupsafe import Markup

from daskscope.web.render import environment

__all__ = [
    "MAX_EMBEDDED",
    "Answer",
    "Get",
    "ReportFailed",
    "app_reader",
    "build_report",
    "cluster_report",
    "compare_report",
    "computation_report",
    "file_name",
    "run_report",
]

#: GET path -> (status, body); the app answering in process
Get = Callable[[str], Awaitable["Answer"]]
#: Computations (and spans) whose graph, profile or filter a report embeds, the first
#: by start: past this, their views say they are on the server.
MAX_EMBEDDED = 25
_STATIC = Path(__file__).with_name("static")


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str = ""


class ReportFailed(Exception):
    """The page or one of its parts could not be read; the message says what to do."""


@asynccontextmanager
async def app_reader(
    app: Any,
    *,
    base_url: str = "http://127.0.0.1",
    headers: dict[str, str] | None = None,
    client: tuple[str, int] = ("127.0.0.1", 0),
) -> AsyncIterator[Get]:
    """GET from ``app`` in process, as the browser would (its credentials in
    ``headers``): the same pages and JSON the server sends, the same access checks."""
    transport = httpx.ASGITransport(app=app, client=client)
    # uncompressed: gzip would only be undone here
    sent_headers = {"Accept-Encoding": "identity", **(headers or {})}
    async with httpx.AsyncClient(
        transport=transport, base_url=base_url, headers=sent_headers, timeout=None
    ) as http:

        async def get(path: str) -> Answer:
            sent = await http.get(path)
            return Answer(sent.status_code, sent.content, sent.headers.get("content-type", ""))

        yield get


def js_quote(text: str) -> str:
    """``encodeURIComponent(text)``: the URLs the page scripts build, key for key."""
    return quote(text, safe="-_.!~*'()")


@dataclass
class _Page:
    """One page of the app taken apart: its styles, main content and scripts."""

    styles: list[str] = field(default_factory=list)
    main: str = ""
    data: str = ""  # the page-data script element, as sent
    scripts: list[str] = field(default_factory=list)  # URLs, in order
    plotly: str | None = None  # its URL, when the page draws charts


_LINK = re.compile(r'<link rel="stylesheet" href="([^"]+)">')
_SCRIPT = re.compile(r'<script src="([^"]+)"( defer)?></script>')
_DATA = re.compile(r'<script type="application/json" id="([a-z-]+)">.*?</script>', re.DOTALL)
_MAIN = re.compile(r'<main id="main" tabindex="-1">(.*)</main>', re.DOTALL)
_TITLE = re.compile(r"<title>(.*?)</title>", re.DOTALL)


def _error_text(answer: Answer) -> str:
    """What the app said was wrong, from its JSON error or its error page."""
    try:
        body = json.loads(answer.body)
        error = body["error"]
        return str(error["message"])
    except (ValueError, KeyError, TypeError):
        pass
    text = answer.body.decode("utf-8", "replace")
    found = re.search(r'<p class="error-message">(.*?)</p>', text, re.DOTALL)
    if found is None:
        found = _TITLE.search(text)
    message = re.sub(r"<[^>]+>", "", found.group(1)) if found else f"HTTP {answer.status}"
    return html.unescape(" ".join(message.split()))


async def _read(get: Get, path: str) -> Answer:
    answer = await get(path)
    if answer.status != 200:
        raise ReportFailed(_error_text(answer))
    return answer


def _parse(text: str) -> _Page:
    page = _Page()
    head, _, rest = text.partition("<body>")
    main = _MAIN.search(rest)
    if main is None:
        raise ReportFailed("the page has no main content: not a daskscope page")
    after = rest[main.end() :]
    data = _DATA.search(after)
    page.data = data.group(0) if data else ""
    # style sheets and scripts wherever they are (the advice box brings its own into
    # the main content); deferred scripts run after the others, as in a browser
    page.styles = _LINK.findall(head) + _LINK.findall(main.group(1))
    found = _SCRIPT.findall(main.group(1)) + _SCRIPT.findall(after)
    deferred: list[str] = []
    for url, defer in found:
        if url.startswith("/assets/plotly"):
            page.plotly = url
        elif url not in page.scripts and url not in deferred:
            (deferred if defer else page.scripts).append(url)
    page.scripts += deferred
    # a page that loads plotly.js itself once drawn (ds.plotly) names it in a meta tag;
    # in the file it runs before the page's scripts, so they find it there
    named = re.search(r'<meta name="daskscope-plotly" content="([^"]+)">', head)
    if named is not None:
        page.plotly = html.unescape(named.group(1))
    page.main = _SCRIPT.sub("", _LINK.sub("", main.group(1)))
    return page


@functools.cache
def _packed(body: bytes) -> str:
    """plotly.js gzip-compressed (the best level: done once a process) and in base64."""
    return base64.b64encode(gzip.compress(body, compresslevel=9, mtime=0)).decode("ascii")


def _inline_json(value: Any) -> Markup:
    """JSON safe inside a script element (no ``</script>``, as Jinja's tojson)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        text = text.replace(char, escaped)
    return Markup(text)


def _inlined(body: bytes, element: str) -> Markup:
    """A script or style sheet's text for its element: its own ``</script`` (or
    ``</style``) would end the element early; none of ours has one."""
    text = body.decode("utf-8")
    if f"</{element}" in text.lower():
        raise ReportFailed(f"an asset holds '</{element}': it cannot be inlined")
    return Markup(text)


async def build_report(
    get: Get,
    path: str,
    *,
    kind: str,
    subject: str,
    json_paths: Sequence[str] = (),
    timeline_path: str | None = None,
) -> bytes:
    """The page at ``path`` as a report file, with the answers to ``json_paths`` (the
    requests its scripts make) embedded, and the timeline page at ``timeline_path``
    below it."""
    sent = await _read(get, path)
    page = _parse(sent.body.decode("utf-8"))
    timeline = None
    if timeline_path is not None:
        timeline = _parse((await _read(get, timeline_path)).body.decode("utf-8"))
    responses: dict[str, Any] = {}
    # the advice boxes' own requests (advice_box.js), read off the page
    adviced = re.findall(r'data-advice-url="([^"]+)"', page.main)
    for url in [*json_paths, *(html.unescape(u) for u in adviced if u not in json_paths)]:
        answer = await get(url)
        if answer.status == 200:  # else the page says what it would say on the server
            responses[url] = json.loads(answer.body)
    styles: list[str] = []
    scripts: list[str] = []
    for part in (page, timeline):
        if part is None:
            continue
        styles += [u for u in part.styles if u not in styles]
        scripts += [u for u in part.scripts if u not in scripts]
    plotly = page.plotly or (timeline.plotly if timeline else None)
    css = [_inlined((await _read(get, u)).body, "style") for u in styles]
    js = [_inlined((await _read(get, u)).body, "script") for u in scripts]
    main = page.main
    if timeline is not None and timeline_path is not None:
        # the page's link to its timeline leads to the timeline below
        for href in {timeline_path, html.escape(timeline_path)}:
            main = main.replace(f'href="{href}"', 'href="#report-timeline"', 1)
    context = {
        "title": _title_of(sent),
        "kind": kind,
        "subject": subject,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "version": version("daskscope"),
        "css": css,
        "main": Markup(main),
        "data": Markup(page.data),
        "timeline_main": Markup(timeline.main) if timeline else None,
        "timeline_data": Markup(timeline.data.replace('id="page-data"', 'id="timeline-data"', 1))
        if timeline
        else None,
        "responses": _inline_json(responses),
        "plotly": _packed((await _read(get, plotly)).body) if plotly else None,
        "scripts": js,
        "loader": Markup(_STATIC.joinpath("report_file.js").read_text("utf-8")),
        "report_css": Markup(_STATIC.joinpath("report_file.css").read_text("utf-8")),
    }
    text = environment().get_template("report_file.html").render(**context)
    return text.encode("utf-8")


def _title_of(answer: Answer) -> str:
    found = _TITLE.search(answer.body.decode("utf-8", "replace"))
    return html.unescape(found.group(1)).removesuffix(" · daskscope") if found else ""


async def cluster_report(get: Get, cluster: str) -> bytes:
    """A cluster's page (``cluster`` an id or a unique start of one) with its timeline."""
    head = await _read(get, f"/api/v1/clusters/{js_quote(cluster)}")
    view = json.loads(head.body)
    cid = view["cluster"]["id"]
    base = f"/api/v1/clusters/{js_quote(cid)}"
    paths = [f"{base}/workers", f"{base}/metrics", f"{base}/metrics/intervals"]
    if view.get("profiles"):
        paths.append(f"{base}/profile")
    computations = sorted(view.get("computations") or [], key=lambda c: c.get("started_at") or 0)
    for comp in computations[:MAX_EMBEDDED]:
        cq = js_quote(comp["id"])
        paths += [f"{base}/computations/{cq}/graph", f"{base}/advice?computation={cq}"]
        if view.get("profiles"):
            paths.append(f"{base}/profile?computation={cq}")
    page = f"/clusters/{js_quote(cid)}"
    for span in (view.get("spans") or [])[:MAX_EMBEDDED]:
        query = urlencode({"span": span["span_id"]})
        # the span filter's prefix chart (laid out by web/prefix_chart.py) and its metrics
        paths += [f"{page}/prefix-chart?{query}", f"{base}/metrics?{query}"]
    return await build_report(
        get,
        page,
        kind="cluster",
        subject=view["cluster"]["name"],
        json_paths=paths,
        timeline_path=f"{page}/timeline",
    )


async def computation_report(get: Get, cluster: str, computation: str) -> bytes:
    """A computation's page (its critical path, what-if chart and graph) and its timeline."""
    api = f"/api/v1/clusters/{js_quote(cluster)}/computations/{js_quote(computation)}"
    found = json.loads((await _read(get, f"{api}/critical-path")).body)
    cid, comp = found["cluster_id"], found["computation_id"]
    base = f"/api/v1/clusters/{js_quote(cid)}/computations/{js_quote(comp)}"
    page = f"/clusters/{js_quote(cid)}/computations/{js_quote(comp)}"
    return await build_report(
        get,
        page,
        kind="computation",
        subject=f"computation {comp} of cluster {cid}",
        json_paths=[f"{base}/graph?path=1"],
        timeline_path=f"/clusters/{js_quote(cid)}/timeline?computation={js_quote(comp)}",
    )


async def run_report(get: Get, run: str) -> bytes:
    """A workflow run's page."""
    found = json.loads((await _read(get, f"/api/v1/runs/{js_quote(run)}")).body)
    rid = found["run"]["id"]
    return await build_report(
        get, f"/runs/{js_quote(rid)}", kind="run", subject=found["run"].get("name") or rid
    )


async def compare_report(get: Get, a: str, b: str) -> bytes:
    """The comparison of two clusters, computations, spans or runs."""
    query = urlencode({"a": a, "b": b})
    await _read(get, f"/api/v1/compare?{query}")
    return await build_report(get, f"/compare?{query}", kind="comparison", subject=f"{a} vs {b}")


def file_name(subject: str) -> str:
    """A download's file name, as the exports' (``daskscope-<id>-...``)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", subject).strip("-")[:120] or "page"
    return f"daskscope-{safe}-report.html"
