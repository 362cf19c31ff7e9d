"""Rich renderings of stored rows for the terminal: functions in, renderables out.

No database, no Dask: every function takes the plain dicts the store and the analysis
return, so the same data can be shown by the web pages or exported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from daskscope.analysis.code import code_note
from daskscope.analysis.workers import extra_metrics

__all__ = [
    "cluster_summary",
    "clusters_table",
    "human_bytes",
    "human_seconds",
    "local_time",
]

Row = Mapping[str, Any]
MISSING = "-"  # shown where a number was not measured (never a made-up zero)


def human_bytes(n: float | None) -> str:
    if n is None:
        return MISSING
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def human_seconds(s: float | None) -> str:
    if s is None:
        return MISSING
    s = float(s)
    if abs(s) < 1:
        return f"{s * 1000:.0f} ms"
    if abs(s) < 60:
        return f"{s:.1f} s"
    if abs(s) < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def human_value(value: float | None, unit: str) -> str:
    """A metric value in its unit's human form (seconds, bytes, else the raw number)."""
    if value is None:
        return MISSING
    if unit == "seconds":
        return human_seconds(value)
    if unit == "bytes":
        return human_bytes(value)
    number = f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"
    return f"{number} {unit}" if unit and unit != "count" else number


def local_time(epoch: float | None) -> str:
    """UTC epoch seconds as local ISO time, to the second."""
    if epoch is None:
        return MISSING
    return datetime.fromtimestamp(float(epoch)).astimezone().isoformat(timespec="seconds")


def money(cost: Mapping[str, Any] | None) -> str:
    if not cost:
        return MISSING
    total = float(cost["total"])
    return f"{total:.4f} {cost['currency']}" if total < 1 else f"{total:.2f} {cost['currency']}"


def percent(fraction: float | None) -> str:
    return MISSING if fraction is None else f"{fraction * 100:.1f} %"


def short_id(cluster_id: str) -> str:
    return cluster_id[:8]


# -- listing -----------------------------------------------------------------------------


def clusters_table(rows: Sequence[Row]) -> Table:
    """The cluster listing; each row is a clusters row with its ``statistics``."""
    table = Table(title=f"{len(rows)} cluster(s)", title_justify="left")
    for name, justify in (
        ("id", "left"),
        ("name", "left"),
        ("user", "left"),
        ("start", "left"),
        ("duration", "right"),
        ("workers", "right"),
        ("threads", "right"),
        ("tasks", "right"),
        ("errors", "right"),
        ("memory processed", "right"),
        ("cost", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=name in ("id", "start"))
    for row in rows:
        stats = row.get("statistics") or {}
        errors = stats.get("tasks_erred", row.get("tasks_erred", 0))
        table.add_row(
            short_id(row["id"]),
            row.get("name") or "",
            row.get("user") or "",
            local_time(row.get("started_at")),
            human_seconds(stats.get("duration_s", row.get("duration_s"))),
            str(row.get("workers_peak", 0)),
            str(row.get("threads_peak", 0)),
            str(row.get("tasks_executed", 0)),
            Text(str(errors), style="bold red" if errors else ""),
            human_bytes(row.get("bytes_processed")),
            money(stats.get("cost")),
        )
    return table


# -- one cluster ---------------------------------------------------------------------------


def statistics_panel(cluster: Row, stats: Row) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    cost = stats.get("cost")
    basis = ""
    if cost:
        basis = f"  ({cost['per_core_hour']} {cost['currency']}/core-hour"
        if cost.get("per_gib_hour") is not None:
            basis += f" + {cost['per_gib_hour']} {cost['currency']}/GiB-hour"
        basis += f", account {cost.get('account')})"
    end = cluster.get("stopped_at")
    lines = [
        ("cluster", f"{cluster['id']}  {cluster.get('name') or ''}"),
        ("account / user", f"{cluster.get('account', '')} / {cluster.get('user', '')}"),
        ("scheduler", cluster.get("scheduler_address") or MISSING),
        (
            "versions",
            f"dask {cluster.get('dask_version')}, distributed "
            f"{cluster.get('distributed_version')}, python {cluster.get('python_version')}",
        ),
        ("started", local_time(cluster.get("started_at"))),
        ("stopped", local_time(end) if end else "still running (or not closed cleanly)"),
        ("duration", human_seconds(stats.get("duration_s"))),
        ("workers / threads peak", f"{stats['workers_peak']} / {stats['threads_peak']}"),
        ("core time", f"{stats['core_hours']:.4f} core-hours"),
        ("compute time", f"{stats['compute_hours']:.4f} hours"),
        ("utilisation", percent(stats.get("utilisation"))),
        ("tasks executed", str(stats["tasks_executed"])),
        ("tasks erred", str(stats["tasks_erred"])),
        ("memory processed", human_bytes(stats["bytes_processed"])),
        ("memory reserved", f"{stats['memory_gib_hours']:.4f} GiB-hours"),
        ("cost", money(cost) + basis),
    ]
    for key, value in lines:
        grid.add_row(key, value)
    return Panel(grid, title="statistics", title_align="left")


def _durations(durations: Mapping[str, float] | None) -> str:
    if not durations:
        return ""
    ranked = sorted(durations.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {human_seconds(v)}" for k, v in ranked if v)


def prefixes_table(prefixes: Sequence[Row]) -> Table:
    table = Table(title="task prefixes", title_justify="left")
    for name in ("prefix", "groups", "executed", "erred", "output", "duration", "by activity"):
        table.add_column(name, justify="left" if name in ("prefix", "by activity") else "right")
    for p in sorted(prefixes, key=lambda r: -float(r.get("duration_s") or 0)):
        table.add_row(
            p["name"],
            str(p.get("group_count", 0)),
            str(p.get("tasks_executed", 0)),
            str(p.get("tasks_erred", 0)),
            human_bytes(p.get("nbytes_total")),
            human_seconds(p.get("duration_s")),
            _durations(p.get("durations")),
        )
    return table


def groups_table(groups: Sequence[Row], limit: int = 50) -> Table:
    # Groups that never started (e.g. all their tasks failed) go last.
    ordered = sorted(
        groups,
        key=lambda r: (r.get("started_at") is None, r.get("started_at") or 0.0, r["name"]),
    )
    title = "task groups" + (f" (first {limit} of {len(groups)})" if len(groups) > limit else "")
    table = Table(title=title, title_justify="left")
    for name in ("group", "tasks", "executed", "erred", "output", "duration", "start"):
        table.add_column(name, justify="left" if name in ("group", "start") else "right")
    for g in ordered[:limit]:
        table.add_row(
            g["name"],
            str(g.get("tasks_total", 0)),
            str(g.get("tasks_executed", 0)),
            str(g.get("tasks_erred", 0)),
            human_bytes(g.get("nbytes_total")),
            human_seconds(g.get("duration_s")),
            local_time(g.get("started_at")),
        )
    return table


def computations_view(computations: Sequence[Row], max_lines: int = 25) -> RenderableType:
    items: list[RenderableType] = [Text("computations", style="bold italic")]
    if not computations:
        items.append(Text("  none recorded", style="dim"))
    for c in sorted(computations, key=lambda r: r.get("started_at") or 0.0):
        stop = c.get("stopped_at")
        took = human_seconds(stop - c["started_at"]) if stop is not None else "unfinished"
        groups = c.get("task_groups") or []
        head = Text.assemble(
            (local_time(c.get("started_at")), "bold"),
            f"  {took}  {c.get('tasks_executed', 0)} tasks",
            (f", {c['tasks_erred']} erred" if c.get("tasks_erred") else "", "red"),
            (f"  groups: {', '.join(groups[:8])}" + (" …" if len(groups) > 8 else ""))
            if groups
            else "",
        )
        items.append(head)
        note = code_note(c.get("code"))
        if note:
            items.append(Text(f"  {note}", style="yellow"))
        for snippet in c.get("code") or []:
            lines = snippet.splitlines()
            shown = "\n".join(lines[:max_lines]) + ("\n# …" if len(lines) > max_lines else "")
            items.append(Syntax(shown, "python", line_numbers=False, word_wrap=True))
    return Group(*items)


def _seconds_by_activity(metrics: Sequence[Row]) -> str:
    sums: dict[str, float] = {}
    for m in metrics:
        if m["unit"] == "seconds":
            sums[m["activity"]] = sums.get(m["activity"], 0.0) + m["value"]
    top = sorted(sums.items(), key=lambda kv: -kv[1])[:4]
    return ", ".join(f"{a} {human_seconds(v)}" for a, v in top)


def span_tree_view(roots: Sequence[Row]) -> Tree:
    """Spans nested as recorded; each shows its duration and its subtree's top activities."""
    tree = Tree(Text("spans", style="bold italic"))

    def add(parent: Tree, node: Row) -> None:
        name = node.get("name") or []
        label = Text.assemble(
            (name[-1] if name else node["span_id"], "bold"),
            f"  {human_seconds(node.get('duration_s'))} task time",
            f", {human_bytes(node.get('nbytes_total'))}",
        )
        summary = _seconds_by_activity(node.get("totals") or [])
        if summary:
            label.append(f"  [{summary}]", style="dim")
        branch = parent.add(label)
        for child in node.get("children") or []:
            add(branch, child)

    for root in roots:
        add(tree, root)
    if not roots:
        tree.add(Text("none recorded", style="dim"))
    return tree


def fine_metrics_matrix(title: str, rows: Sequence[Row], max_prefixes: int = 6) -> Table:
    """Fine metrics as activity (and unit) x task prefix; small prefixes go to "other".

    Only seconds and bytes are shown (counts are in ``--json``) to keep it readable.
    """
    rows = [r for r in rows if r["unit"] in ("seconds", "bytes")]
    weight: dict[str, float] = {}
    for r in rows:
        if r["unit"] == "seconds":
            weight[r["prefix"]] = weight.get(r["prefix"], 0.0) + r["value"]
    prefixes = sorted({r["prefix"] for r in rows}, key=lambda p: -weight.get(p, 0.0))
    shown = prefixes[:max_prefixes]
    has_other = len(prefixes) > max_prefixes
    cells: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        column = r["prefix"] if r["prefix"] in shown else "other"
        line = cells.setdefault((r["activity"], r["unit"]), {})
        line[column] = line.get(column, 0.0) + r["value"]
        line["total"] = line.get("total", 0.0) + r["value"]
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
        table.add_row(label, *(human_value(line.get(c), unit) for c in columns))
    return table


def errors_table(errors: Sequence[Row], tb_lines: int = 4) -> Table:
    table = Table(title="errors", title_justify="left")
    for name in ("time", "key", "worker", "exception", "traceback (last lines)"):
        table.add_column(name, overflow="fold")
    for e in sorted(errors, key=lambda r: r.get("at") or 0.0):
        tb = (e.get("traceback") or "").rstrip().splitlines()[-tb_lines:]
        table.add_row(
            local_time(e.get("at")),
            str(e.get("key")),
            e.get("worker") or MISSING,
            Text(e.get("exception") or "", style="red"),
            "\n".join(tb),
        )
    return table


def _number(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.6g}"


def workers_table(workers: Sequence[Row]) -> Table:
    """Per worker; managed, unmanaged and spilled are its last sample's (Dask's split)."""
    table = Table(title="workers (memory split: last sample)", title_justify="left")
    left = ("worker", "first seen", "last seen")
    for name in (
        "worker",
        "threads",
        "memory limit",
        "managed",
        "unmanaged",
        "spilled",
        "peak memory",
        "first seen",
        "last seen",
        "samples",
    ):
        table.add_column(name, justify="left" if name in left else "right", overflow="fold")
    for w in sorted(workers, key=lambda r: str(r.get("worker"))):
        table.add_row(
            str(w.get("worker")),
            str(w.get("nthreads", MISSING)),
            human_bytes(w.get("memory_limit")),
            human_bytes(w.get("managed_bytes")),
            human_bytes(w.get("unmanaged_bytes")),
            human_bytes(w.get("spilled_bytes")),
            human_bytes(w.get("peak_memory")),
            local_time(w.get("first_sample_at")),
            local_time(w.get("last_sample_at")),
            str(w.get("samples", MISSING)),
        )
    return table


def worker_metrics_table(workers: Sequence[Row], max_workers: int = 6) -> Table:
    """The other metrics of each worker's last sample (GPU, custom, ...): metric x worker.
    A worker whose samples predate daskscope keeping them shows "not recorded"."""
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
        cells = []
        for e in extras:
            value = None if e is None else e.get(name)
            cells.append(MISSING if value is None else _number(value))
        table.add_row(name, *cells)
    if any(e is None for e in extras):
        table.add_row("", *("not recorded" if e is None else "" for e in extras))
    return table


def events_table(events: Sequence[Row]) -> Table:
    table = Table(title="events", title_justify="left")
    for name in ("time", "event", "worker", "detail"):
        table.add_column(name, overflow="fold")
    for ev in sorted(events, key=lambda r: r.get("at") or 0.0):
        detail = ", ".join(f"{k}={v}" for k, v in (ev.get("detail") or {}).items())
        table.add_row(local_time(ev.get("at")), ev.get("kind", ""), ev.get("worker") or "", detail)
    return table


def cluster_summary(
    detail: Row,
    stats: Row,
    tree: Sequence[Row],
    metrics_by_root: Sequence[tuple[str, Sequence[Row]]],
) -> Group:
    """Everything ``daskscope show`` prints about one cluster.

    ``tree`` comes from :func:`daskscope.analysis.span_tree`; ``metrics_by_root`` pairs a
    root span's title with its fine metrics table rows.
    """
    parts: list[RenderableType] = [statistics_panel(detail["cluster"], stats)]
    if detail.get("task_prefixes"):
        parts.append(prefixes_table(detail["task_prefixes"]))
    parts.append(computations_view(detail.get("computations") or []))
    if detail.get("task_groups"):
        parts.append(groups_table(detail["task_groups"]))
    parts.append(span_tree_view(tree))
    for title, rows in metrics_by_root:
        if rows:
            parts.append(fine_metrics_matrix(title, rows))
    if detail.get("errors"):
        parts.append(errors_table(detail["errors"]))
    if detail.get("workers"):
        parts.append(workers_table(detail["workers"]))
        parts.append(worker_metrics_table(detail["workers"]))
    if detail.get("events"):
        parts.append(events_table(detail["events"]))
    return Group(*parts)
