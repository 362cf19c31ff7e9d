"""``daskscope prune [--dry-run] [--account A]``: remove the task log of clusters past
their account's retention, and ``daskscope retention show|set``: the policies.

Only the task log goes (every execution of every task); a cluster's aggregates stay
(docs/server.md, Retention).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from daskscope.format import bytes_text, count_text, number_text

__all__ = ["prune_command", "retention_group"]


def _store(state: Any) -> Any:
    from daskscope.store import open_store

    return open_store(state.database)


def _days_text(days: float | None) -> str:
    return "for ever" if days is None else f"{number_text(days)} days"


@click.command("prune")
@click.option("--dry-run", is_flag=True, help="Say what would go; remove nothing.")
@click.option("--account", help="Only this account's clusters.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_obj
def prune_command(state: Any, dry_run: bool, account: str | None, as_json: bool) -> None:
    """Remove the task log (every task execution) of the clusters that ended longer ago
    than their account keeps it. Aggregates (clusters, computations, task groups, spans,
    metrics, costs) are kept; each cluster is pruned in its own transaction."""
    from daskscope.store.retention import prune_task_log

    with _store(state) as store:
        report = prune_task_log(store, account=account, dry_run=dry_run)
    if as_json:
        accounts = [asdict(r) for r in report.accounts]
        click.echo(
            json.dumps({"dry_run": dry_run, "accounts": accounts, "partitions": report.partitions})
        )
        return
    verb = "would remove" if dry_run else "removed"
    if not report.accounts:
        click.echo(f"nothing to prune: no task log is past its account's retention ({verb} 0)")
        return
    title = f"task log past retention that prune {verb}" + (
        " (dry run: nothing removed)" if dry_run else ""
    )
    table = Table(title=title, title_justify="left")
    for name in ("account", "kept", "clusters", "segments", "task executions", "bytes"):
        table.add_column(name, justify="left" if name == "account" else "right")
    for r in report.accounts:
        table.add_row(
            r.account,
            _days_text(r.task_log_days),
            count_text(r.clusters),
            count_text(r.segments),
            count_text(r.executions),
            bytes_text(r.bytes),
        )
    Console(width=160).print(table)
    if report.partitions:
        what = "would drop" if dry_run else "dropped"
        click.echo(f"{what} whole month partitions: {', '.join(report.partitions)}")
    if dry_run:
        click.echo("run again without --dry-run to remove it")


@click.group("retention")
def retention_group() -> None:
    """How long each account keeps its clusters' task log."""


@retention_group.command("show")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def retention_show(state: Any, as_json: bool) -> None:
    """Each account's policy and the default (the setting retention.task-log-days)."""
    with _store(state) as store:
        rows = store.account_policies()
    if as_json:
        click.echo(json.dumps([{"account": n, "task_log_days": d, "own": o} for n, d, o in rows]))
        return
    table = Table("account", "task log kept", "policy")
    for name, days, is_own in rows:
        table.add_row(name, _days_text(days), "the account's own" if is_own else "the default")
    Console(width=160).print(table)


@retention_group.command("set")
@click.argument("account")
@click.argument("days")
@click.option("--by", "by", metavar="USER", help="The account admin setting it (recorded).")
@click.pass_obj
def retention_set(state: Any, account: str, days: str, by: str | None) -> None:
    """Keep ACCOUNT's task log DAYS days after each cluster ends ("forever": never
    prune it; "default": follow the setting retention.task-log-days)."""
    from daskscope.store.retention import clear_task_log_days, set_task_log_days

    with _store(state) as store:
        if days == "default":
            clear_task_log_days(store, account)
            click.echo(f"account {account!r} follows the default retention again")
            return
        value = None if days in ("forever", "for-ever") else days
        try:
            number = None if value is None else float(value)
        except ValueError:
            raise click.BadParameter(
                f"{days!r}: give a number of days, forever or default", param_hint="DAYS"
            ) from None
        set_task_log_days(store, account, number, by=by)
    click.echo(f"account {account!r} keeps its task log {_days_text(number)}")
