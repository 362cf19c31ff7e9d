"""``daskscope costs [--tag TAG] [--since DAY --until DAY] [--by member|tag] [--json]``:
what the spans of a tag cost (:mod:`daskscope.views.costs`) as a table, or (``--json``)
the JSON of ``/api/v1/costs`` with the same query."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from daskscope.views.costs import CostsView

__all__ = ["costs_command", "costs_table"]


def costs_table(view: CostsView, by: str) -> Table:
    """The view's rows per member or per tag."""
    rows = view.members if by == "member" else view.tags
    what = f"span tag {view.tag!r}" if view.tag else "spans"
    table = Table(title=f"cost of {what} per {by}, {view.since_text} to {view.until_text} (UTC)")
    for name in (by, "spans", "clusters", "task time", "cost"):
        table.add_column(name, justify="left" if name == by else "right")
    for r in rows:
        table.add_row(Text(r.name), f"{r.spans:,}", f"{r.clusters:,}", r.task_text, r.cost_text)
    table.caption = "; ".join(
        [f"total {t.cost_text}" for t in view.totals]
        + ([f"{view.unpriced_spans:,} spans without a price"] if view.unpriced_spans else [])
    )
    return table


@click.command("costs")
@click.option("--tag", help="Only the spans of this tag (default: every tag, each on its own).")
@click.option("--since", metavar="DAY", help="Spans enqueued on or after this UTC day or time.")
@click.option("--until", metavar="DAY", help="Spans enqueued up to this UTC day (inclusive).")
@click.option(
    "--by", type=click.Choice(["member", "tag"]), default="member", show_default=True,
    help="Rows per member or per tag.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON instead of a table.")
@click.pass_obj
def costs_command(
    state: Any, tag: str | None, since: str | None, until: str | None, by: str, as_json: bool
) -> None:
    """What spans cost: each span's share of its cluster's core time times the cluster's
    cost, summed per member or per tag (for example --tag data-load --since 2026-11-01)."""
    from daskscope.store import open_store
    from daskscope.views import to_pretty_json
    from daskscope.views.costs import costs_view

    with open_store(getattr(state, "database", None)) as store:
        try:
            view = costs_view(store, tag=tag, since=since, until=until)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    if as_json:
        click.echo(to_pretty_json(view))
        return
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(costs_table(view, by) if view.spans else Text(view.message or ""))
    console.print(Text(view.formula, style="dim"))
