"""Rich renderings of the views for the terminal: views in, renderables out.

No database, no Dask: every function takes a view of :mod:`daskscope.views` (or its
parts); every number reads as :mod:`daskscope.format` writes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from daskscope.analysis.workers import extra_metrics
from daskscope.catalogue import figure
from daskscope.format import (
    MISSING,
    bytes_text,
    count_text,
    duration_text,
    money_text,
    number_text,
    timestamp_text,
    value_text,
)
from daskscope.views.cluster import (
    ClusterInfo,
    ClusterView,
    ComputationSummary,
    Event,
    FineMetric,
    SpanLine,
    TaskError,
    TaskGroup,
    TaskPrefix,
    WorkerSummary,
)
from daskscope.views.listing import ClusterStatistics, ClusterSummary

__all__ = ["cluster_summary", "clusters_table", "worker_metrics_table"]


def short_id(cluster_id: str) -> str:
    return cluster_id[:8]


def _cost(stats: ClusterStatistics) -> str:
    return MISSING if stats.cost is None else money_text(stats.cost.total, stats.cost.currency)


# -- listing -----------------------------------------------------------------------------


def clusters_table(rows: Sequence[ClusterSummary]) -> Table:
    """The cluster listing."""
    table = Table(title=f"{len(rows)} cluster(s)", title_justify="left")
    for name, justify in (
        ("id", "left"),
        ("name", "left"),
        ("user", "left"),
        ("start (UTC)", "left"),
        ("duration", "right"),
        ("workers", "right"),
        ("threads", "right"),
        ("tasks", "right"),
        ("errors", "right"),
        ("memory processed", "right"),
        ("cost", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=name in ("id", "start (UTC)"))  # type: ignore[arg-type]
    for row in rows:
        stats = row.statistics
        table.add_row(
            short_id(row.id),
            row.name,
            row.user,
            timestamp_text(row.started_at),
            duration_text(stats.duration_s),
            count_text(stats.workers_peak),
            count_text(stats.threads_peak),
            count_text(stats.tasks_executed),
            Text(count_text(stats.tasks_erred), style="bold red" if stats.tasks_erred else ""),
            bytes_text(stats.bytes_processed),
            _cost(stats),
        )
    return table


# -- one cluster ---------------------------------------------------------------------------


def _figure(key: str, value: float | None) -> tuple[str, str]:
    """A line of the statistics panel: the catalogue's label and text of a figure."""
    found = figure("cluster", key)
    return found.label, found.text(value)


def statistics_panel(cluster: ClusterInfo, stats: ClusterStatistics) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    cost = stats.cost
    basis = ""
    if cost is not None:
        basis = f"  ({money_text(cost.per_core_hour, cost.currency)}/core-hour"
        if cost.per_gib_hour is not None:
            basis += f" + {money_text(cost.per_gib_hour, cost.currency)}/GiB-hour"
        basis += f", account {cost.account})"
    end = cluster.stopped_at
    lines = [
        ("cluster", f"{cluster.id}  {cluster.name}"),
        ("account / user", f"{cluster.account} / {cluster.user}"),
        ("scheduler", cluster.scheduler_address or MISSING),
        (
            "versions",
            f"dask {cluster.dask_version}, distributed {cluster.distributed_version}, "
            f"python {cluster.python_version}",
        ),
        ("started (UTC)", timestamp_text(cluster.started_at)),
        (
            "stopped (UTC)",
            timestamp_text(end) if end else "still running (or not closed cleanly)",
        ),
        _figure("duration_s", stats.duration_s),
        (
            f"{figure('cluster.workers_peak').label} / threads",
            f"{count_text(stats.workers_peak)} / {count_text(stats.threads_peak)}",
        ),
        _figure("core_hours", stats.core_hours),
        _figure("compute_hours", stats.compute_hours),
        _figure("utilisation", stats.utilisation),
        _figure("tasks_executed", stats.tasks_executed),
        _figure("tasks_erred", stats.tasks_erred),
        _figure("bytes_processed", stats.bytes_processed),
        _figure("memory_gib_hours", stats.memory_gib_hours),
        (figure("cluster.cost.total").label, _cost(stats) + basis),
    ]
    for key, value in lines:
        grid.add_row(key, value)
    return Panel(grid, title="statistics", title_align="left")


def _by_activity(durations: Mapping[str, float], limit: int | None = None) -> str:
    ranked = sorted(durations.items(), key=lambda kv: -kv[1])[:limit]
    return ", ".join(f"{k} {duration_text(v)}" for k, v in ranked if v)


def prefixes_table(prefixes: Sequence[TaskPrefix]) -> Table:
    table = Table(title="task prefixes", title_justify="left")
    for name in ("prefix", "groups", "executed", "erred", "output", "duration", "by activity"):
        table.add_column(name, justify="left" if name in ("prefix", "by activity") else "right")
    for p in sorted(prefixes, key=lambda r: -r.duration_s):
        table.add_row(
            p.name,
            count_text(p.group_count),
            count_text(p.tasks_executed),
            count_text(p.tasks_erred),
            bytes_text(p.nbytes_total),
            duration_text(p.duration_s),
            _by_activity(p.durations),
        )
    return table


def groups_table(groups: Sequence[TaskGroup], total: int) -> Table:
    """``groups`` in the store's order (start, never started last); ``total``: how many
    the cluster has."""
    title = "task groups" + (f" (first {len(groups)} of {total:,})" if total > len(groups) else "")
    table = Table(title=title, title_justify="left")
    for name in ("group", "tasks", "executed", "erred", "output", "duration", "start (UTC)"):
        table.add_column(name, justify="left" if name in ("group", "start (UTC)") else "right")
    for g in groups:
        table.add_row(
            g.name,
            count_text(g.tasks_total),
            count_text(g.tasks_executed),
            count_text(g.tasks_erred),
            bytes_text(g.nbytes_total),
            duration_text(g.duration_s),
            timestamp_text(g.started_at),
        )
    return table


def computations_view(computations: Sequence[ComputationSummary], max_lines: int = 25) -> Group:
    items: list[RenderableType] = [Text("computations", style="bold italic")]
    if not computations:
        items.append(Text("  none recorded", style="dim"))
    for c in sorted(computations, key=lambda r: r.started_at):
        took = duration_text(c.duration_s) if c.stopped_at is not None else "unfinished"
        groups = c.task_groups
        head = Text.assemble(
            (timestamp_text(c.started_at), "bold"),
            f"  {took}  {count_text(c.tasks_executed)} tasks",
            (f", {count_text(c.tasks_erred)} erred" if c.tasks_erred else "", "red"),
            (f"  groups: {', '.join(groups[:8])}" + (" …" if c.task_groups_total > 8 else ""))
            if groups
            else "",
        )
        items.append(head)
        if c.code_note:
            items.append(Text(f"  {c.code_note}", style="yellow"))
        for snippet in c.code:
            lines = snippet.splitlines()
            shown = "\n".join(lines[:max_lines]) + ("\n# …" if len(lines) > max_lines else "")
            items.append(Syntax(shown, "python", line_numbers=False, word_wrap=True))
    return Group(*items)


def span_tree_view(spans: Sequence[SpanLine]) -> Tree:
    """Spans nested as recorded; each shows its duration and its subtree's top activities."""
    tree = Tree(Text("spans", style="bold italic"))
    branches: list[Tree] = []  # the open branch at each depth
    for span in spans:
        label = Text.assemble(
            (span.name[-1] if span.name else span.span_id, "bold"),
            f"  {duration_text(span.duration_s)} task time",
            f", {bytes_text(span.nbytes_total)}",
        )
        summary = _by_activity(span.seconds_by_activity, limit=4)
        if summary:
            label.append(f"  [{summary}]", style="dim")
        del branches[span.depth :]
        branches.append((branches[-1] if branches else tree).add(label))
    if not spans:
        tree.add(Text("none recorded", style="dim"))
    return tree


def fine_metrics_matrix(title: str, rows: Sequence[FineMetric], max_prefixes: int = 6) -> Table:
    """Fine metrics as activity (and unit) x task prefix; small prefixes go to "other".

    Only seconds and bytes are shown (counts are in ``--json``) to keep it readable.
    """
    rows = [r for r in rows if r.unit in ("seconds", "bytes")]
    weight: dict[str, float] = {}
    for r in rows:
        if r.unit == "seconds":
            weight[r.prefix] = weight.get(r.prefix, 0.0) + r.value
    prefixes = sorted({r.prefix for r in rows}, key=lambda p: -weight.get(p, 0.0))
    shown = prefixes[:max_prefixes]
    has_other = len(prefixes) > max_prefixes
    cells: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        column = r.prefix if r.prefix in shown else "other"
        line = cells.setdefault((r.activity, r.unit), {})
        line[column] = line.get(column, 0.0) + r.value
        line["total"] = line.get("total", 0.0) + r.value
    table = Table(title=title, title_justify="left")
    table.add_column("activity")
    columns = [*shown, *(["other"] if has_other else []), "total"]
    for column in columns:
        table.add_column(column, justify="right", style="bold" if column == "total" else None)
    ordered = sorted(
        cells.items(), key=lambda kv: (kv[0][1] != "seconds", kv[0][1], -kv[1]["total"])
    )
    for (activity, unit), line in ordered:
        label = activity if unit == "seconds" else f"{activity} ({unit})"
        table.add_row(label, *(value_text(line.get(c), unit) for c in columns))
    return table


def errors_table(errors: Sequence[TaskError], tb_lines: int = 4) -> Table:
    table = Table(title="errors", title_justify="left")
    for name in ("time (UTC)", "key", "worker", "exception", "traceback (last lines)"):
        table.add_column(name, overflow="fold")
    for e in sorted(errors, key=lambda r: r.at):
        tb = e.traceback.rstrip().splitlines()[-tb_lines:]
        table.add_row(
            timestamp_text(e.at),
            e.key,
            e.worker or MISSING,
            Text(e.exception, style="red"),
            "\n".join(tb),
        )
    return table


def workers_table(workers: Sequence[WorkerSummary]) -> Table:
    """Per worker; managed, unmanaged and spilled are its last sample's (Dask's split)."""
    table = Table(title="workers (memory split: last sample)", title_justify="left")
    left = ("worker", "first seen (UTC)", "last seen (UTC)")
    for name in (
        "worker",
        "threads",
        "memory limit",
        "managed",
        "unmanaged",
        "spilled",
        "peak memory",
        "first seen (UTC)",
        "last seen (UTC)",
        "samples",
    ):
        table.add_column(name, justify="left" if name in left else "right", overflow="fold")
    for w in sorted(workers, key=lambda r: r.worker):
        table.add_row(
            w.worker,
            count_text(w.nthreads),
            bytes_text(w.memory_limit),
            bytes_text(w.managed_bytes),
            bytes_text(w.unmanaged_bytes),
            bytes_text(w.spilled_bytes),
            bytes_text(w.peak_memory),
            timestamp_text(w.first_sample_at),
            timestamp_text(w.last_sample_at),
            count_text(w.samples),
        )
    return table


def worker_metrics_table(workers: Sequence[Mapping[str, Any]], max_workers: int = 6) -> Table:
    """The other metrics of each worker's last sample (GPU, custom, ...): metric x worker.

    ``workers``: mappings with ``worker`` and ``metrics`` (None: the worker's samples
    predate daskscope keeping them, shown as "not recorded")."""
    ordered = sorted(workers, key=lambda r: str(r.get("worker")))
    shown = ordered[:max_workers]
    title = "worker metrics (last sample)"
    if len(ordered) > max_workers:
        title += f", first {max_workers} of {len(ordered)} workers (--json has all)"
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    extras = [extra_metrics(w.get("metrics")) for w in shown]
    for w in shown:
        table.add_column(str(w.get("worker")), justify="right", overflow="fold")
    names = sorted({name for e in extras if e for name in e})
    for name in names:
        table.add_row(name, *(number_text(None if e is None else e.get(name)) for e in extras))
    if any(e is None for e in extras):
        table.add_row("", *("not recorded" if e is None else "" for e in extras))
    return table


def events_table(events: Sequence[Event]) -> Table:
    table = Table(title="events", title_justify="left")
    for name in ("time (UTC)", "event", "worker", "detail"):
        table.add_column(name, overflow="fold")
    for ev in sorted(events, key=lambda r: r.at):
        detail = ", ".join(f"{k}={v}" for k, v in ev.detail.items())
        table.add_row(timestamp_text(ev.at), ev.kind, ev.worker or "", detail)
    return table


def imported_note(imported: Mapping[str, Any]) -> Text:
    """What ``daskscope import`` made the cluster of, and what that file cannot hold."""
    lines = [
        f"imported from {imported.get('file')} ({imported.get('format')}): not recorded "
        "by daskscope; not in the file:",
        *(f"  - {line}" for line in imported.get("missing", [])),
    ]
    return Text("\n".join(lines), style="yellow")


def cluster_summary(view: ClusterView) -> Group:
    """Everything ``daskscope show`` prints about one cluster."""
    parts: list[RenderableType] = [statistics_panel(view.cluster, view.statistics)]
    if view.cluster.imported:
        parts.append(imported_note(view.cluster.imported))
    if view.task_prefixes:
        parts.append(prefixes_table(view.task_prefixes))
    parts.append(computations_view(view.computations))
    if view.task_groups:
        parts.append(groups_table(view.task_groups, view.task_group_summary.count))
    parts.append(span_tree_view(view.spans))
    if view.fine_metrics:
        parts.append(fine_metrics_matrix("fine metrics (all spans)", view.fine_metrics))
    if view.errors:
        parts.append(errors_table(view.errors))
    if view.workers:
        parts.append(workers_table(view.workers))
        extras = [{"worker": w.worker, "metrics": w.extra_metrics} for w in view.workers]
        parts.append(worker_metrics_table(extras))
    if view.events:
        parts.append(events_table(view.events))
    return Group(*parts)
