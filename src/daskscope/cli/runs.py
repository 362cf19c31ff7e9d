"""``daskscope runs`` and ``daskscope run RUN_ID``: workflow runs from the store, rendered
from their views (``--json`` prints the API's JSON of the same view)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from daskscope.format import MISSING, duration_text, timestamp_text
from daskscope.store.queries import MAX_OFFSET, MAX_PAGE

__all__ = ["run_command", "runs_command"]

EXIT_STORE_ERROR = 2


def _console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 160)


@contextmanager
def _hinted() -> Iterator[None]:
    """An unknown or ambiguous run id: the store's error, and what to do next."""
    from daskscope.store.runs import AmbiguousRun, UnknownRun

    try:
        yield
    except UnknownRun as exc:
        click.echo(f"error: {exc}; `daskscope runs` lists them", err=True)
        click.get_current_context().exit(EXIT_STORE_ERROR)
    except AmbiguousRun as exc:
        click.echo(f"error: {exc}; give more of the id", err=True)
        click.get_current_context().exit(EXIT_STORE_ERROR)


@click.command("runs")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("-q", "--search", help="A part of the name or user, or the id's start.")
@click.option("--user", help="Only this user's runs.")
@click.option("--status", type=click.Choice(["ok", "failed"]))
@click.option("--since", metavar="DAY", help="Started on or after this UTC day (2026-01-31).")
@click.option("--until", metavar="DAY", help="Started on or before this UTC day.")
@click.option(
    "--sort",
    type=click.Choice(["started", "name", "user", "backend", "status", "wall", "chunks"]),
    default="started",
    show_default=True,
)
@click.option("--order", type=click.Choice(["asc", "desc"]), default="desc", show_default=True)
@click.option(
    "--offset", type=click.IntRange(min=0, max=MAX_OFFSET), default=0, help="Runs to skip."
)
@click.option("--limit", type=click.IntRange(min=1, max=MAX_PAGE), default=100, show_default=True)
@click.pass_obj
def runs_command(state: Any, /, as_json: bool, search: str | None, **asked: Any) -> None:
    """List workflow runs (MetricsCollector), newest first; the same filters, order and
    paging as /api/v1/runs, whose JSON --json prints."""
    from daskscope.store import open_store
    from daskscope.views.encode import to_pretty_json
    from daskscope.views.run import RunQuery, run_list

    with open_store(state.database) as store:
        try:
            listing = run_list(store, RunQuery(q=search, **asked))
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    if as_json:
        click.echo(to_pretty_json(listing))
        return
    table = Table(title="workflow runs")
    for col in ("id", "name", "user", "status", "started (UTC)", "wall time", "events",
                "event rate", "data rate", "cluster"):  # fmt: skip
        table.add_column(col)
    for run in listing.runs:
        table.add_row(
            run.id[:8], Text(run.name), Text(run.user or MISSING), run.status,
            timestamp_text(run.started_at), duration_text(run.wall_time_s),
            *(f.text for f in run.headline), (run.cluster_id or MISSING)[:8],
        )  # fmt: skip
    shown = f"{listing.query.offset + 1:,} to {listing.query.offset + len(listing.runs):,}"
    table.caption = f"runs {shown} of {listing.total:,}"
    _console().print(table if listing.runs else (listing.message or ""))


@click.command("run")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.pass_obj
def run_command(state: Any, run_id: str, as_json: bool) -> None:
    """One workflow run (an id or a unique prefix): figures, sections and chunks."""
    from daskscope.cli.run_summary import chunk_table, summary_tables
    from daskscope.store import open_store
    from daskscope.views.encode import to_pretty_json
    from daskscope.views.run import stored_run_view

    with open_store(state.database) as store, _hinted():
        view = stored_run_view(store, run_id)
    if as_json:
        click.echo(to_pretty_json(view))
        return
    run = view.run
    head = Table(title=Text(f"workflow run {run.id} — {run.name}"), show_header=False)
    head.add_column("")
    head.add_column("")
    for label, value in (
        ("backend", run.backend),
        ("status", run.status if run.error is None else f"{run.status}: {run.error}"),
        ("cluster", run.cluster_id or f"{MISSING} (no recorder attached)"),
        ("span", run.span_id or MISSING),
        ("computations", ", ".join(run.computation_ids) or MISSING),
        ("started (UTC)", timestamp_text(run.started_at)),
        ("stopped (UTC)", timestamp_text(run.stopped_at)),
        ("wall time", duration_text(run.wall_time_s)),
    ):
        head.add_row(label, Text(str(value)))
    _console().print(Group(head, *summary_tables(view), chunk_table(view)))
