"""Downloads of a cluster in other tools' formats (``/api/v1/clusters/{id}/export/NAME``),
a route per name of :mod:`daskscope.export.registry`: the task timeline for Perfetto,
the profiles for speedscope, the spans as an OpenTelemetry trace. The same bytes as
``daskscope export``, under the same file name."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from daskscope.export.common import file_name
from daskscope.export.registry import Family, families
from daskscope.views.export import BadWindow, ExportError, export_view
from daskscope.web.errors import HTTPError
from daskscope.web.routes.common import store_of, visible_cluster_id

__all__ = ["api", "pages"]

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["exports"])


def _attachment(name: str) -> dict[str, str]:
    # the names are made of [A-Za-z0-9._-] (export.common.file_name): no quoting needed
    return {"Content-Disposition": f'attachment; filename="{name}"'}


def _http_error(exc: ExportError) -> Exception:
    """An empty window is a 400; an unknown computation or nothing recorded a 404, the
    message saying which and what to do."""
    if isinstance(exc, BadWindow):
        return HTTPError(400, str(exc))
    return HTTPError(404, str(exc))


def _query(name: str, annotation: Any, default: Any, description: str) -> inspect.Parameter:
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=Query(default, description=description),
        annotation=annotation,
    )


def _parameters(family: Family) -> list[inspect.Parameter]:
    """The query parameters of the family's route: its options, and its formats when
    it has several."""
    found = []
    for option in family.options:
        if option == "computation":
            found.append(_query("computation", str | None, None, "Only this computation."))
        elif option == "window":
            found.append(_query("start", float | None, None, "Start of the window, epoch seconds."))
            found.append(_query("stop", float | None, None, "End of the window, epoch seconds."))
        else:
            assert option == "groups", option
            found.append(_query("groups", bool, False, "A span per task group too."))
    if len(family.formats) > 1:
        choices = Literal[tuple(f.format for f in family.formats)]  # type: ignore[valid-type]
        found.append(_query("format", choices, family.default.format, family.format_help))
    return found


def _download(family: Family) -> Callable[..., Response]:
    def download(request: Request, cluster_id: str, **query: Any) -> Response:
        exporter = family.format(query.pop("format", family.default.format))
        cluster_id = visible_cluster_id(request, cluster_id)
        try:
            view = export_view(store_of(request), cluster_id, **query)
            chunks = exporter.render(view)
        except ExportError as exc:
            raise _http_error(exc) from exc
        name = file_name(cluster_id, exporter.subject, exporter.extension, query.get("computation"))
        headers = _attachment(name)
        if exporter.streamed:  # page by page: a cluster of millions of tasks never in memory
            return StreamingResponse(chunks, media_type=exporter.media_type, headers=headers)
        body = b"".join(c.encode() if isinstance(c, str) else c for c in chunks)
        return Response(body, media_type=exporter.media_type, headers=headers)

    plain = inspect.Parameter.POSITIONAL_OR_KEYWORD
    download.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("request", plain, annotation=Request),
            inspect.Parameter("cluster_id", plain, annotation=str),
            *_parameters(family),
        ],
        return_annotation=Response,
    )
    download.__doc__ = "\n\n".join(family.help.split("\n\n")[1:]) or None
    return download


def _register() -> None:
    """A route per name of the registry."""
    for family in families():
        streamed = any(f.streamed for f in family.formats)
        api.add_api_route(
            f"/clusters/{{cluster_id}}/export/{family.name}",
            _download(family),
            methods=["GET"],
            name=f"{family.name}_download",
            summary=family.summary,
            response_model=None,
            response_class=StreamingResponse if streamed else Response,
            responses={
                200: {
                    "content": {f.media_type: {} for f in family.formats},
                    "description": family.format_help,
                }
            },
        )


_register()
