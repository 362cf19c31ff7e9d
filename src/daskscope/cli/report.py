"""``daskscope report``: a cluster, a computation, a workflow run or a comparison as one
HTML file that opens offline (web/report_file.py), to keep or to send."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from daskscope.format import bytes_text

__all__ = ["report_command"]

#: Exit status of a reference that names nothing (as the store errors' in cli/main.py)
EXIT_NOT_FOUND = 2


def _what(reference: str) -> tuple[str, tuple[str, ...]]:
    """(kind, ids) of CLUSTER, CLUSTER/COMPUTATION or run:RUN."""
    if reference.startswith("run:"):
        return "run", (reference.removeprefix("run:"),)
    cluster, slash, computation = reference.partition("/")
    if slash:
        return "computation", (cluster, computation)
    return "cluster", (cluster,)


_LISTS = {
    "cluster": "`daskscope clusters` lists them",
    "computation": "`daskscope show CLUSTER` lists its computations",
    "run": "`daskscope runs` lists them",
    "comparison": "`daskscope clusters` and `daskscope runs` list them",
}


@click.command("report")
@click.argument("reference", required=False)
@click.option(
    "--compare",
    nargs=2,
    metavar="A B",
    help="A comparison of two clusters, computations, span tags or runs instead "
    "(each as `daskscope compare` takes it).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    required=True,
    help="The HTML file to write.",
)
@click.pass_obj
def report_command(
    state: object, reference: str | None, compare: tuple[str, str] | None, output: Path
) -> None:
    """Save the dashboard's page of REFERENCE as one HTML file that opens offline in any
    browser: every chart, its tables, the task timeline and the flame graph.

    REFERENCE is a cluster (its id or a unique start of it), CLUSTER/COMPUTATION, or
    run:RUN for a workflow run."""
    try:
        import fastapi  # noqa: F401
    except ImportError:
        raise click.ClickException(
            "the report file is the dashboard's page: pip install 'daskscope[web]'"
        ) from None
    from daskscope.web import create_app
    from daskscope.web.report_file import (
        ReportFailed,
        app_reader,
        cluster_report,
        compare_report,
        computation_report,
        run_report,
    )

    if (reference is None) == (compare is None):
        raise click.UsageError("give one REFERENCE, or --compare A B")
    ids: tuple[str, ...]
    if compare is not None:
        kind, ids = "comparison", compare
    else:
        assert reference is not None
        kind, ids = _what(reference)
    makers = {
        "cluster": cluster_report,
        "computation": computation_report,
        "run": run_report,
        "comparison": compare_report,
    }
    app = create_app(getattr(state, "database", None))

    async def build() -> bytes:
        async with app_reader(app) as get:
            made: bytes = await makers[kind](get, *ids)  # type: ignore[operator]
            return made

    try:
        content = asyncio.run(build())
    except ReportFailed as exc:
        click.echo(f"error: {exc}; {_LISTS[kind]}", err=True)
        sys.exit(EXIT_NOT_FOUND)
    finally:
        app.state.store.close()
    output.write_bytes(content)
    click.echo(f"wrote {output} ({bytes_text(len(content))}): open it in a browser, offline")
