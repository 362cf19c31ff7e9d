"""``daskscope export NAME CLUSTER``: a recorded cluster in another tool's format (the
formats of :mod:`daskscope.export.registry`, a command each), written to a file (by
default named as the dashboard's download), to stdout (``-o -``) or, for a format that
can be sent (OTLP), to a service (``--endpoint``).

The commands are made from the registry when ``daskscope export`` runs, so that other
commands never import the formats."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

if TYPE_CHECKING:
    from daskscope.export.registry import Family
    from daskscope.views.export import ExportError

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


def _options(option: str) -> list[click.Parameter]:
    """The command-line options of one of :data:`daskscope.export.exporter.OPTIONS`."""
    if option == "computation":
        return [click.Option(["--computation"], metavar="ID", help="Only this computation.")]
    if option == "window":
        return [
            click.Option(["--start"], type=float, metavar="EPOCH_S",
                         help="Start of the window (epoch seconds)."),
            click.Option(["--stop"], type=float, metavar="EPOCH_S",
                         help="End of the window (epoch seconds)."),
        ]  # fmt: skip
    assert option == "groups", option
    return [click.Option(["--groups"], is_flag=True, help="A span per task group too.")]


def _params(family: Family) -> list[click.Parameter]:
    params: list[click.Parameter] = [click.Argument(["cluster_id"])]
    params.append(
        click.Option(
            ["-o", "--output"],
            metavar="FILE",
            help="Where to write ('-': stdout). Default: the dashboard's file name, here.",
        )
    )
    for option in family.options:
        params.extend(_options(option))
    if len(family.formats) > 1:
        params.append(
            click.Option(
                ["--format", "encoding"],
                type=click.Choice([f.format for f in family.formats]),
                default=family.default.format,
                show_default=True,
                help=family.format_help,
            )
        )
    if family.sender is not None:
        params.append(click.Option(["--endpoint"], metavar="URL", help=family.sender.endpoint_help))
    return params


def _command(family: Family) -> click.Command:
    """``daskscope export NAME``: the formats of ``family``."""

    @click.pass_context
    def run(
        ctx: click.Context,
        /,
        cluster_id: str,
        output: str | None,
        encoding: str | None = None,
        endpoint: str | None = None,
        **options: Any,
    ) -> None:
        from daskscope.export.common import file_name
        from daskscope.store import open_store
        from daskscope.views.export import ExportError, export_view

        if endpoint and output:
            raise click.UsageError("give --endpoint (send) or -o (write), not both")
        exporter = family.format(encoding) if encoding else family.default
        computation = options.get("computation")
        with open_store(_state_database(ctx)) as store:
            full_id = store.resolve_cluster_id(cluster_id)
            try:
                view = export_view(store, full_id, **options)
                if endpoint:
                    assert family.sender is not None  # --endpoint is only offered then
                    click.echo(family.sender.send(view, endpoint), err=True)
                    return
                chunks: Iterable[str | bytes] = exporter.render(view)
            except ExportError as exc:
                _fail(exc)
            name = file_name(full_id, exporter.subject, exporter.extension, computation)
            _write(chunks, output or name)

    return click.Command(family.name, callback=run, params=_params(family), help=family.help)


class _Formats(click.Group):
    """A command per name of the registry, made when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from daskscope.export.registry import families

        return sorted(f.name for f in families())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from daskscope.export.registry import family

        try:
            return _command(family(cmd_name))
        except KeyError:
            return None


@click.group("export", cls=_Formats)
def export_group() -> None:
    """A recorded cluster in other tools' formats: Perfetto, speedscope, OpenTelemetry."""
