"""``daskscope critical-path CLUSTER COMPUTATION``: a computation's critical path (through
its tasks' dependencies where the task log has them, else through its task groups) and
its estimated wall time on 1, 2, 4, … threads and infinitely many. ``--json`` prints
what ``/api/v1/clusters/ID/computations/CID/critical-path`` answers."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from daskscope.format import MISSING, count_text, duration_text, percent_text

if TYPE_CHECKING:  # the views load when the command runs
    from daskscope.views.critical_path import CriticalPathView

__all__ = ["critical_path_command", "critical_path_summary"]


def critical_path_summary(view: CriticalPathView) -> RenderableType:
    """The view as text: the path with its groups' longest tasks, then the estimates."""
    head = Text()
    head.append(f"computation {view.computation_id}", style="bold")
    head.append(
        f" of cluster {view.cluster_id}\n{count_text(view.tasks_executed)} tasks in "
        f"{count_text(view.group_count)} groups · tasks' wall time "
        f"{duration_text(view.measured_wall_s)} on {count_text(view.measured_threads)} threads"
        f" · durations from the {view.durations_from}"
    )
    if not view.path:
        return Group(head, Text("no task ran in this computation: there is no path"))
    fraction = (
        f" ({percent_text(view.path_fraction)} of the wall time)"
        if view.path_fraction is not None
        else ""
    )
    through = f" through {count_text(view.path_tasks)} tasks" if view.path_tasks else ""
    head.append(f"\ncritical path: {duration_text(view.critical_path_s)}{fraction}{through}")
    head.append(f"\nmodel: {MODELS[view.model]}")
    if view.model_note:
        head.append(f" ({view.model_note})")
    if view.model == "task groups":
        title = "critical path (each group as long as its longest task)"
    else:
        title = "the critical path's groups"
    path = Table(title=title, title_justify="left")
    path.add_column("group")
    path.add_column("tasks", justify="right")
    path.add_column("longest task", justify="right")
    path.add_column("starts after", justify="right")
    by_name = {g.name: g for g in view.groups}
    for name in view.path:
        g = by_name[name]
        path.add_row(
            Text(name),
            count_text(g.tasks),
            duration_text(g.longest_s),
            duration_text(g.earliest_start_s),
        )
    what_if = Table(title="estimated wall time", title_justify="left")
    what_if.add_column("worker threads", justify="right")
    what_if.add_column("wall time", justify="right")
    rows = [(e.threads, e.wall_s, "") for e in view.estimates]
    if view.requested is not None:
        rows.append((view.requested.threads, view.requested.wall_s, " (asked for)"))
    for threads, seconds, note in rows:
        measured = " (as measured)" if threads == view.measured_threads else ""
        what_if.add_row(f"{count_text(threads)}{measured}{note}", duration_text(seconds))
    what_if.add_row("∞", duration_text(view.critical_path_s))
    return Group(head, path, what_if, task_path_table(view))


#: What each model is, in a line
MODELS = {
    "task dependencies": "through the task dependencies (each task waits for the dependency "
    "it waited for last, as the task log recorded it)",
    "task groups": "through the task groups as stages (each waits for every task of the "
    "groups it depends on)",
    "mixed": "through the task dependencies, and the task groups as stages where the task "
    "log has no dependencies",
}

#: Steps of the task-level path printed: the last ones (the end of the chain)
PRINTED_STEPS = 40


def task_path_table(view: CriticalPathView) -> RenderableType:
    """The chain of tasks that ended the computation, as the task log recorded it."""
    if not view.task_path:
        return Text(f"critical path through the tasks: {MISSING} ({view.task_path_note})")
    steps = view.task_path
    fraction = (
        f", {percent_text(view.task_path_fraction)} of the wall time"
        if view.task_path_fraction is not None
        else ""
    )
    shown = steps[-PRINTED_STEPS:]
    hidden = len(steps) - len(shown)
    left_out = f"; the first {hidden} not printed" if hidden else ""
    table = Table(
        title=(
            f"critical path through the tasks: {count_text(len(steps))} tasks over "
            f"{duration_text(view.task_path_s)}{fraction}, running "
            f"{duration_text(view.task_path_busy_s)} of it{left_out}"
        ),
        title_justify="left",
    )
    table.add_column("task")
    table.add_column("worker")
    table.add_column("starts at", justify="right")
    table.add_column("waited", justify="right")
    table.add_column("ran", justify="right")
    for t in shown:
        table.add_row(
            Text(t.key), Text(t.worker), duration_text(t.start_s),
            duration_text(t.waited_s), duration_text(t.duration_s),
        )  # fmt: skip
    return table


@click.command("critical-path")
@click.argument("cluster_id")
@click.argument("computation_id")
@click.option("--threads", type=click.IntRange(min=1), help="Also estimate for this many threads.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the API's) instead of text.")
@click.pass_obj
def critical_path_command(
    state: object, cluster_id: str, computation_id: str, threads: int | None, as_json: bool
) -> None:
    """A computation's critical path and how long it would take on more or fewer worker
    threads (unique starts of the cluster's and the computation's ids are enough)."""
    from daskscope.store import open_store
    from daskscope.views import to_pretty_json
    from daskscope.views.critical_path import critical_path_view

    database = getattr(state, "database", None)
    with open_store(database) as store:
        full_id = store.resolve_cluster_id(cluster_id)
        try:
            view = critical_path_view(store, full_id, computation_id, threads=threads)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    if view is None:
        raise click.UsageError(
            f"cluster {full_id} has no computation {computation_id!r}: "
            f"`daskscope show {full_id}` lists its computations"
        )
    if as_json:
        click.echo(to_pretty_json(view))
        return
    Console(width=None if sys.stdout.isatty() else 160).print(critical_path_summary(view))
