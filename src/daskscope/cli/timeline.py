"""``daskscope timeline CLUSTER``: the task timeline as a compact text summary: tasks,
workers and threads, utilisation over time, the longest idle gaps, the slowest tasks.
``--json`` prints what ``/api/v1/clusters/ID/timeline`` answers."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from daskscope.format import (
    bytes_text,
    count_text,
    duration_text,
    number_text,
    percent_text,
    timestamp_text,
)

if TYPE_CHECKING:  # the views (numpy, pyarrow) load when the command runs
    from daskscope.views.timeline import IdleGap, TimelineTask, TimelineView

__all__ = ["timeline_command", "timeline_summary"]

#: Block characters of the utilisation sparkline, from idle to every thread busy
BLOCKS = " ▁▂▃▄▅▆▇█"
#: Columns of the sparkline
SPARK_WIDTH = 50


def sparkline(fractions: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """``fractions`` (0..1) averaged into ``width`` columns, one block character each."""
    if not fractions:
        return ""
    width = min(width, len(fractions))
    out = []
    for i in range(width):
        part = fractions[i * len(fractions) // width : (i + 1) * len(fractions) // width]
        mean = sum(part) / len(part)
        out.append(BLOCKS[round(min(max(mean, 0.0), 1.0) * (len(BLOCKS) - 1))])
    return "".join(out)


def _gaps_table(title: str, gaps: Sequence[IdleGap], with_lane: bool) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("from (UTC)", no_wrap=True)
    table.add_column("to (UTC)", no_wrap=True)
    table.add_column("idle", justify="right")
    if with_lane:
        table.add_column("worker · thread")
    for g in gaps:
        row = [
            timestamp_text(g.start, millis=True),
            timestamp_text(g.stop, millis=True),
            duration_text(g.duration_s),
        ]
        table.add_row(*row, *([g.lane or ""] if with_lane else []))
    return table


def _slowest_table(view: TimelineView, tasks: Sequence[TimelineTask]) -> Table:
    table = Table(title="longest executions (first start to last stop)", title_justify="left")
    for name, justify in (
        ("key", "left"),
        ("worker · thread", "left"),
        ("start (UTC)", "left"),
        ("compute", "right"),
        ("total", "right"),
        ("output", "right"),
        ("state", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=name == "start (UTC)")  # type: ignore[arg-type]
    for t in tasks:
        table.add_row(
            t.key,
            view.lanes[t.lane].label,
            timestamp_text(t.start, millis=True),
            duration_text(t.compute_s),
            duration_text(t.stop - t.start),
            bytes_text(t.nbytes),
            t.state,
        )
    return table


def timeline_summary(view: TimelineView) -> RenderableType:
    """The view as text: totals, a utilisation sparkline, gaps and the slowest tasks."""
    t = view.totals
    filters = [
        f"{name} {value}"
        for name, value in (
            ("computation", view.filters.computation),
            ("span", view.filters.span),
            ("group", view.filters.group),
        )
        if value
    ]
    head = Text()
    head.append(f"cluster {view.cluster_id}", style="bold")
    if filters:
        head.append(" · only " + ", ".join(filters))
    head.append(
        f"\n{timestamp_text(view.start, millis=True)} to {timestamp_text(view.stop, millis=True)}"
        f" UTC ({duration_text((view.stop or 0) - (view.start or 0))})"
        f"\n{count_text(t.tasks)} task executions · {count_text(t.workers)} workers, "
        f"{count_text(t.threads)} threads in all · {duration_text(t.busy_s)} computing · "
        f"utilisation {percent_text(t.utilisation)}"
    )
    parts: list[RenderableType] = [head]
    if view.utilisation:
        line = sparkline([u.fraction for u in view.utilisation])
        spark = Text("utilisation over time (busy threads / threads): ")
        spark.append(f"|{line}|", style="cyan")
        spark.append(f"  0 ─ {percent_text(1.0)}", style="dim")
        parts.append(spark)
    precision = (
        "" if view.raw else f" (to within {duration_text(view.resolution_s)}: a bin of the window)"
    )
    if view.idle_gaps:
        parts.append(
            _gaps_table(f"longest gaps with no thread computing{precision}", view.idle_gaps, False)
        )
    else:
        parts.append(Text("no gap: some thread computed at every moment of the window"))
    if view.lane_gaps:
        parts.append(
            _gaps_table(f"longest idle gaps of one thread{precision}", view.lane_gaps[:5], True)
        )
    if view.slowest:
        parts.append(_slowest_table(view, view.slowest))
    return Group(*parts)


NOT_RECORDED = (
    "no task recorded for cluster {id}: it was recorded with daskscope.tasks.enabled off "
    "(or before daskscope kept tasks); turn the setting on "
    "(DASK_DASKSCOPE__TASKS__ENABLED=true) for the next cluster"
)


PRUNED = (
    "the task log of cluster {id} was pruned on {date} UTC by its account's retention "
    "(kept {days} days after the cluster ended; {tasks} task executions removed); its "
    "aggregates remain: daskscope show {id}"
)


@click.command("timeline")
@click.argument("cluster_id")
@click.option("--computation", metavar="ID", help="Only this computation's tasks.")
@click.option(
    "--span",
    "span",
    metavar="TAG",
    help="Only the tasks of the span with this tag (or this span id); those of the spans "
    "below it are not included.",
)
@click.option("--group", metavar="NAME", help="Only this task group's tasks.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the API's) instead of text.")
@click.pass_obj
def timeline_command(
    state: object,
    cluster_id: str,
    computation: str | None,
    span: str | None,
    group: str | None,
    as_json: bool,
) -> None:
    """The task timeline of a cluster (a unique id prefix is enough): utilisation over
    time, the longest idle gaps, the slowest tasks."""
    from daskscope.store import open_store
    from daskscope.views import to_pretty_json
    from daskscope.views.timeline import span_of_tag, timeline_view

    database = getattr(state, "database", None)
    with open_store(database) as store:
        full_id = store.resolve_cluster_id(cluster_id)
        span_id = None
        if span is not None:
            try:
                span_id = span_of_tag(store, full_id, span)
            except LookupError as exc:
                raise click.UsageError(str(exc)) from None
        view = timeline_view(
            store, full_id, computation_id=computation, span_id=span_id, group=group
        )
        pruned = None if view.recorded else store.pruned_task_log(full_id)
    if pruned is not None:
        message = PRUNED.format(
            id=full_id,
            date=timestamp_text(pruned.pruned_at),
            days=number_text(pruned.task_log_days),
            tasks=count_text(pruned.executions),
        )
        if as_json:  # the API's answer on stdout, the reason beside it
            click.echo(f"note: {message}", err=True)
            click.echo(to_pretty_json(view))
            return
        click.echo(f"error: {message}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(to_pretty_json(view))
        return
    if not view.recorded:
        click.echo(f"error: {NOT_RECORDED.format(id=full_id)}", err=True)
        sys.exit(2)
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(timeline_summary(view))
