"""``daskscope export perfetto|speedscope|otlp CLUSTER``: a recorded cluster in another
tool's format, written to a file (by default named as the dashboard's download), to
stdout (``-o -``) or, for OTLP, sent to a collector (``--endpoint``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NoReturn

import click

from daskscope.export.common import ExportError, file_name

__all__ = ["export_group"]

EXIT_EXPORT_ERROR = 2


def _state_database(ctx: click.Context) -> str | None:
    database: str | None = getattr(ctx.find_root().obj, "database", None)
    return database


def _write(chunks: Iterable[str | bytes], output: str) -> None:
    """Write the chunks to ``output`` ("-": stdout) and say where they went."""
    if output == "-":
        stream = sys.stdout.buffer
        for chunk in chunks:
            stream.write(chunk.encode() if isinstance(chunk, str) else chunk)
        stream.flush()
        return
    path = Path(output)
    size = 0
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as out:  # whole or not at all: renamed once complete
        for chunk in chunks:
            data = chunk.encode() if isinstance(chunk, str) else chunk
            out.write(data)
            size += len(data)
    partial.replace(path)
    click.echo(f"wrote {path} ({size:,} bytes)", err=True)


def _fail(exc: ExportError) -> NoReturn:
    click.echo(f"error: {exc}", err=True)
    sys.exit(EXIT_EXPORT_ERROR)


def _window_options(f: click.decorators.FC) -> click.decorators.FC:
    f = click.option(
        "--stop", type=float, metavar="EPOCH_S", help="End of the window (epoch seconds)."
    )(f)
    f = click.option(
        "--start", type=float, metavar="EPOCH_S", help="Start of the window (epoch seconds)."
    )(f)
    return f


def _common_options(f: click.decorators.FC) -> click.decorators.FC:
    f = click.option(
        "-o",
        "--output",
        metavar="FILE",
        help="Where to write ('-': stdout). Default: the dashboard's file name, here.",
    )(f)
    f = click.option("--computation", metavar="ID", help="Only this computation.")(f)
    return click.argument("cluster_id")(f)


@click.group("export")
def export_group() -> None:
    """A recorded cluster in other tools' formats: Perfetto, speedscope, OpenTelemetry."""


@export_group.command("perfetto")
@_common_options
@_window_options
@click.option(
    "--format",
    "encoding",
    type=click.Choice(["json", "proto"]),
    default="json",
    show_default=True,
    help="Chrome trace-event JSON, or Perfetto's protobuf trace (smaller; for a whole "
    "cluster of millions of tasks).",
)
@click.pass_context
def perfetto_command(
    ctx: click.Context,
    cluster_id: str,
    computation: str | None,
    output: str | None,
    start: float | None,
    stop: float | None,
    encoding: str,
) -> None:
    """The task timeline for Perfetto: open it in https://ui.perfetto.dev.

    The whole cluster unless --computation or --start/--stop narrow it; written as a
    stream, so millions of tasks fit."""
    from daskscope.export.perfetto import perfetto_chunks
    from daskscope.export.perfetto_proto import PERFETTO_EXTENSIONS, perfetto_proto_chunks
    from daskscope.store import open_store, resolve_cluster_id

    with open_store(_state_database(ctx)) as store:
        full_id = resolve_cluster_id(store, cluster_id)
        write = perfetto_proto_chunks if encoding == "proto" else perfetto_chunks
        try:
            chunks: Iterable[str | bytes] = write(
                store, full_id, computation=computation, start=start, stop=stop
            )
        except ExportError as exc:
            _fail(exc)
        extension = PERFETTO_EXTENSIONS[encoding]
        _write(chunks, output or file_name(full_id, "timeline", extension, computation))


@export_group.command("speedscope")
@_common_options
@_window_options
@click.pass_context
def speedscope_command(
    ctx: click.Context,
    cluster_id: str,
    computation: str | None,
    output: str | None,
    start: float | None,
    stop: float | None,
) -> None:
    """The stored profiles as speedscope JSON: open it in https://www.speedscope.app.

    A profile for the cluster, then one per computation (or only --computation's)."""
    from daskscope.export.speedscope import speedscope_document
    from daskscope.store import open_store, resolve_cluster_id

    with open_store(_state_database(ctx)) as store:
        full_id = resolve_cluster_id(store, cluster_id)
        try:
            document = speedscope_document(
                store, full_id, computation=computation, start=start, stop=stop
            )
        except ExportError as exc:
            _fail(exc)
    _write(
        [json.dumps(document)],
        output or file_name(full_id, "profile", "speedscope.json", computation),
    )


@export_group.command("otlp")
@click.argument("cluster_id")
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="Where to write ('-': stdout). Default: the dashboard's file name, here.",
)
@click.option(
    "--format",
    "encoding",
    type=click.Choice(["protobuf", "json"]),
    default="protobuf",
    show_default=True,
    help="OTLP protobuf (ExportTraceServiceRequest) or OTLP/JSON.",
)
@click.option(
    "--endpoint",
    metavar="URL",
    help="POST the trace to this OTLP/HTTP collector instead of writing a file "
    "(e.g. http://localhost:4318; /v1/traces is added).",
)
@click.option("--groups", is_flag=True, help="A span per task group too.")
@click.pass_context
def otlp_command(
    ctx: click.Context,
    cluster_id: str,
    output: str | None,
    encoding: str,
    endpoint: str | None,
    groups: bool,
) -> None:
    """The cluster, its computations and Dask spans as an OpenTelemetry trace (OTLP),
    for Jaeger, Tempo or Grafana."""
    from daskscope.export.otlp import otlp_json, otlp_request, post_traces
    from daskscope.store import open_store, resolve_cluster_id

    if endpoint and output:
        raise click.UsageError("give --endpoint (send) or -o (write), not both")
    with open_store(_state_database(ctx)) as store:
        full_id = resolve_cluster_id(store, cluster_id)
        request = otlp_request(store, full_id, groups=groups)
    spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
    if endpoint:
        try:
            status = post_traces(request, endpoint)
        except ExportError as exc:
            _fail(exc)
        click.echo(
            f"sent {spans} spans of cluster {full_id} to {endpoint} (HTTP {status})", err=True
        )
        return
    if encoding == "json":
        body: Iterator[str | bytes] = iter([json.dumps(otlp_json(request))])
        name = file_name(full_id, "trace", "otlp.json")
    else:
        body = iter([request.SerializeToString()])
        name = file_name(full_id, "trace", "otlp.pb")
    _write(body, output or name)
