"""Downloads of a cluster in other tools' formats (``/api/v1/clusters/{id}/export/...``):
the task timeline for Perfetto, the profiles for speedscope, the spans as an
OpenTelemetry trace. The same bytes as ``daskscope export``, under the same file name."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from daskscope.export.common import BadWindow, ExportError, file_name
from daskscope.web.errors import BadRequest, NotFound
from daskscope.web.routes.common import store_of, visible_cluster_id

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["exports"])

_COMPUTATION = Query(None, description="Only this computation.")
_START = Query(None, description="Start of the window, epoch seconds.")
_STOP = Query(None, description="End of the window, epoch seconds.")


def _attachment(name: str) -> dict[str, str]:
    # the names are made of [A-Za-z0-9._-] (export.common.file_name): no quoting needed
    return {"Content-Disposition": f'attachment; filename="{name}"'}


def _http_error(exc: ExportError) -> Exception:
    """An empty window is a 400; an unknown computation or nothing recorded a 404, the
    message saying which and what to do."""
    if isinstance(exc, BadWindow):
        return BadRequest(str(exc))
    return NotFound(str(exc))


@api.get(
    "/clusters/{cluster_id}/export/perfetto",
    summary="The task timeline for ui.perfetto.dev: Chrome trace-event JSON or Perfetto protobuf",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"application/json": {}, "application/octet-stream": {}},
            "description": "A trace file.",
        }
    },
)
def perfetto_download(
    request: Request,
    cluster_id: str,
    computation: str | None = _COMPUTATION,
    start: float | None = _START,
    stop: float | None = _STOP,
    format: Literal["json", "proto"] = Query(
        "json", description="Chrome trace-event JSON, or Perfetto's protobuf trace."
    ),
) -> StreamingResponse:
    """Streamed page by page: a cluster of millions of tasks never sits in memory."""
    from daskscope.export.perfetto import perfetto_chunks
    from daskscope.export.perfetto_proto import PERFETTO_EXTENSIONS, perfetto_proto_chunks

    cluster_id = visible_cluster_id(request, cluster_id)
    write = perfetto_proto_chunks if format == "proto" else perfetto_chunks
    try:
        chunks: Iterable[str | bytes] = write(
            store_of(request), cluster_id, computation=computation, start=start, stop=stop
        )
    except ExportError as exc:
        raise _http_error(exc) from exc
    name = file_name(cluster_id, "timeline", PERFETTO_EXTENSIONS[format], computation)
    media = "application/octet-stream" if format == "proto" else "application/json"
    return StreamingResponse(chunks, media_type=media, headers=_attachment(name))


@api.get(
    "/clusters/{cluster_id}/export/speedscope",
    summary="The stored profiles as speedscope JSON (opens in speedscope.app)",
    response_class=Response,
    responses={200: {"content": {"application/json": {}}, "description": "A profile file."}},
)
def speedscope_download(
    request: Request,
    cluster_id: str,
    computation: str | None = _COMPUTATION,
    start: float | None = _START,
    stop: float | None = _STOP,
) -> Response:
    from daskscope.export.speedscope import speedscope_document

    cluster_id = visible_cluster_id(request, cluster_id)
    try:
        document = speedscope_document(
            store_of(request), cluster_id, computation=computation, start=start, stop=stop
        )
    except ExportError as exc:
        raise _http_error(exc) from exc
    name = file_name(cluster_id, "profile", "speedscope.json", computation)
    return Response(json.dumps(document), media_type="application/json", headers=_attachment(name))


@api.get(
    "/clusters/{cluster_id}/export/otlp",
    summary="The cluster, its computations and Dask spans as an OpenTelemetry trace",
    response_class=Response,
    responses={
        200: {
            "content": {"application/x-protobuf": {}, "application/json": {}},
            "description": "OTLP ExportTraceServiceRequest, protobuf or OTLP/JSON.",
        }
    },
)
def otlp_download(
    request: Request,
    cluster_id: str,
    format: Literal["protobuf", "json"] = Query(
        "protobuf", description="OTLP protobuf or OTLP/JSON."
    ),
    groups: bool = Query(False, description="A span per task group too."),
) -> Response:
    from daskscope.export.otlp import otlp_json, otlp_request

    cluster_id = visible_cluster_id(request, cluster_id)
    trace = otlp_request(store_of(request), cluster_id, groups=groups)
    if format == "json":
        name = file_name(cluster_id, "trace", "otlp.json")
        body = json.dumps(otlp_json(trace)).encode()
        return Response(body, media_type="application/json", headers=_attachment(name))
    name = file_name(cluster_id, "trace", "otlp.pb")
    return Response(
        trace.SerializeToString(), media_type="application/x-protobuf", headers=_attachment(name)
    )
