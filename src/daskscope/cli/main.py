"""``daskscope`` on the command line: thin commands over the store, analysis and render.

Every :class:`~daskscope.store.StoreError` (bad URL, unreachable or foreign database,
unknown cluster id) ends the command with one ``error: ...`` line on stderr and exit
status 2; usage errors stay click's.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import click
from rich.console import Console

from daskscope.cli.advise import advise_command
from daskscope.cli.audit import audit_group
from daskscope.cli.compare import COMMANDS as COMPARE_COMMANDS
from daskscope.cli.costs import costs_command
from daskscope.cli.critical_path import critical_path_command
from daskscope.cli.export import export_group
from daskscope.cli.identity import account_group, token_group, user_group
from daskscope.cli.importing import import_command
from daskscope.cli.prune import prune_command, retention_group
from daskscope.cli.report import report_command
from daskscope.cli.runs import run_command, runs_command
from daskscope.cli.spool import spool_group
from daskscope.cli.timeline import timeline_command
from daskscope.store import (
    AmbiguousCluster,
    BadDatabaseURL,
    DatabaseUnreachable,
    NotADaskscopeDatabase,
    StoreError,
    UnknownCluster,
)
from daskscope.store.queries import MAX_PAGE

if TYPE_CHECKING:
    from daskscope.views import ClusterView

__all__ = ["cli", "main"]

EXIT_STORE_ERROR = 2


@dataclass
class State:
    database: str | None


def error_line(exc: StoreError) -> str:
    """The store's message, with what to do next on the command line."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, UnknownCluster):
        message += "; run `daskscope clusters` to list ids"
    elif isinstance(exc, AmbiguousCluster):
        message += "; give more of the id"
    elif isinstance(exc, (BadDatabaseURL, DatabaseUnreachable, NotADaskscopeDatabase)):
        message += "; or open another store: --database URL (or DASKSCOPE_DATABASE)"
    return f"error: {message}"


class _Group(click.Group):
    """Turns store errors into one line on stderr, wherever a command raises them."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except StoreError as exc:
            click.echo(error_line(exc), err=True)
            ctx.exit(EXIT_STORE_ERROR)


def _console() -> Console:
    # soft_wrap off and a generous width when piped keep tables readable in logs.
    return Console(width=None if sys.stdout.isatty() else 160)


@click.group(cls=_Group)
@click.option(
    "--database",
    metavar="URL",
    envvar="DASKSCOPE_DATABASE",
    show_envvar=True,
    help="SQLAlchemy URL of the store (default: config daskscope.database, else the "
    "embedded SQLite file in the user's data directory).",
)
@click.version_option(package_name="daskscope")
@click.pass_context
def cli(ctx: click.Context, database: str | None) -> None:
    """daskscope: performance analytics for Dask clusters."""
    ctx.obj = State(database=database or None)


# -- reading ---------------------------------------------------------------------------


@cli.command("clusters")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--limit", type=click.IntRange(min=1, max=MAX_PAGE), default=50, show_default=True)
@click.pass_obj
def clusters_command(state: State, as_json: bool, limit: int) -> None:
    """List recorded clusters, newest first."""
    from daskscope.cli.render import clusters_table
    from daskscope.store import open_store
    from daskscope.views import cluster_listing, to_pretty_json
    from daskscope.views.listing import ListingQuery

    with open_store(state.database) as store:
        listing = cluster_listing(store, ListingQuery(limit=limit))
    if as_json:
        click.echo(to_pretty_json(listing))
    else:
        _console().print(clusters_table(listing.clusters))


#: Task groups read for the tables (the first by start) and for ``show --json`` (the
#: longest) unless ``--all-groups``: a cluster may have tens of thousands, and all of
#: them made 31 MB of JSON in 3 s (docs/benchmarks.md).
TABLE_GROUPS = 50
JSON_GROUPS = 1000


def load_cluster(
    database: str | None,
    id_or_prefix: str,
    *,
    max_groups: int | None = TABLE_GROUPS,
    groups_by: Literal["start", "duration"] = "start",
) -> ClusterView:
    """The view of one cluster, named by its id or a unique prefix; of its task groups
    at most ``max_groups`` (None: all), ``task_group_summary`` counting them all."""
    from daskscope.store import open_store
    from daskscope.views import cluster_view

    with open_store(database) as store:
        return cluster_view(
            store,
            store.resolve_cluster_id(id_or_prefix),
            groups=max_groups,
            groups_by=groups_by,
        )


def print_cluster(view: ClusterView, console: Console | None = None) -> None:
    from daskscope.cli.render import cluster_summary

    console = console or _console()
    console.print(cluster_summary(view))
    count = view.task_group_summary.count
    if len(view.task_groups) < count:
        console.print(
            f"task groups: the {len(view.task_groups)} first by start of {count:,} are shown; "
            f"`daskscope show {view.cluster.id} --json --all-groups` lists all of them",
            style="dim",
        )


@cli.command("show")
@click.argument("cluster_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option(
    "--all-groups",
    is_flag=True,
    help=f"With --json: every task group (by default the {JSON_GROUPS} longest, "
    "task_group_summary counting them all).",
)
@click.pass_obj
def show_command(state: State, cluster_id: str, as_json: bool, all_groups: bool) -> None:
    """Everything recorded about one cluster (a unique id prefix is enough).

    ``--json`` prints what ``/api/v1/clusters/ID?groups=1000`` answers."""
    if all_groups and not as_json:
        raise click.UsageError(
            "--all-groups lists every task group in JSON: add --json (the tables show "
            f"the first {TABLE_GROUPS})"
        )
    if as_json:
        from daskscope.views import to_pretty_json

        limit = None if all_groups else JSON_GROUPS
        view = load_cluster(state.database, cluster_id, max_groups=limit, groups_by="duration")
        click.echo(to_pretty_json(view))
    else:
        print_cluster(load_cluster(state.database, cluster_id))


# -- the demo --------------------------------------------------------------------------


@cli.command("demo")
@click.option("--database", metavar="URL", help="Store URL (overrides the global --database).")
@click.option("--serve/--no-serve", default=True, help="Open the dashboard afterwards.")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.pass_obj
def demo_command(state: State, database: str | None, serve: bool, workers: int, seed: int) -> None:
    """Run a small workload on a local cluster, record it, and show what was recorded."""
    from daskscope.cli.demo import record_demo

    database = database or state.database
    console = _console()
    cluster_id, _ = record_demo(database, workers=workers, seed=seed, console=console)
    print_cluster(load_cluster(database, cluster_id), console)
    if serve:
        from daskscope.cli.serve import run_server

        run_server(database, "127.0.0.1", 8787, open_browser=True)


# -- schema ----------------------------------------------------------------------------


@cli.group("db")
def db_group() -> None:
    """The store's schema."""


@db_group.command("upgrade")
@click.pass_obj
def db_upgrade(state: State) -> None:
    """Create the schema or bring it to the newest revision."""
    from daskscope.store import open_store

    with open_store(state.database, upgrade=False) as store:
        before = store.current_revision()
        store.upgrade()
        after = store.current_revision()
        where = store.display_url
    if before == after:
        click.echo(f"{where}: schema already at revision {after}")
    else:
        click.echo(f"{where}: schema upgraded from {before or 'empty'} to {after}")


@db_group.command("current")
@click.pass_obj
def db_current(state: State) -> None:
    """Print the schema revision stored in the database ("none" when it has none)."""
    from daskscope.store import open_store

    with open_store(state.database, upgrade=False) as store:
        current, head = store.current_revision(), store.head_revision()
    suffix = "" if current == head else f" (newest known: {head}; run `daskscope db upgrade`)"
    click.echo(f"{current or 'none'}{suffix}")


from daskscope.cli.serve import serve_command, upload_report_command  # noqa: E402

cli.add_command(serve_command)
cli.add_command(account_group)
cli.add_command(user_group)
cli.add_command(token_group)
cli.add_command(audit_group)  # cli/audit.py
cli.add_command(upload_report_command)
cli.add_command(spool_group)
cli.add_command(export_group)  # cli/export.py
cli.add_command(timeline_command)  # cli/timeline.py
cli.add_command(advise_command)  # cli/advise.py
cli.add_command(critical_path_command)  # cli/critical_path.py
cli.add_command(costs_command)  # cli/costs.py
cli.add_command(prune_command)  # cli/prune.py
cli.add_command(retention_group)  # cli/prune.py
cli.add_command(report_command)  # cli/report.py
cli.add_command(import_command)  # cli/importing.py


for _command in (runs_command, run_command):  # workflow runs (cli/runs.py)
    cli.add_command(_command)
for _command in COMPARE_COMMANDS:  # compare, history, regressions (cli/compare.py)
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="daskscope")


if __name__ == "__main__":
    main()
