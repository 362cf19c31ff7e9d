"""``daskscope runs`` and ``daskscope run RUN_ID``: workflow runs from the store."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console, Group
from rich.table import Table

__all__ = ["run_command", "runs_command"]


def _console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 160)


def _dump(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "—"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _fmt(value: Any, spec: str = ".3g") -> str:
    return "not measured" if value is None else format(value, spec)


@click.command("runs")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.pass_obj
def runs_command(state: Any, as_json: bool, limit: int) -> None:
    """List workflow runs (MetricsCollector), newest first."""
    from daskscope.store import open_store
    from daskscope.store.runs import list_runs

    with open_store(state.database) as store:
        rows = list_runs(store, limit=limit)
    if as_json:
        _dump(rows)
        return
    table = Table(title="workflow runs")
    for col in ("id", "name", "started (UTC)", "wall s", "events", "chunks", "kHz", "Gbit/s",
                "cluster"):  # fmt: skip
        table.add_column(col)
    for row in rows:
        m = row["metrics"] or {}
        table.add_row(
            row["id"][:8], row["name"], _when(row["started_at"]), f"{row['wall_time_s']:.2f}",
            _fmt(m.get("total_events"), ","), str(row["chunk_count"]),
            _fmt(m.get("event_rate_wall_khz")), _fmt(m.get("data_rate_gbps")),
            (row["cluster_id"] or "—")[:8],
        )  # fmt: skip
    _console().print(table)


@click.command("run")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.pass_obj
def run_command(state: Any, run_id: str, as_json: bool) -> None:
    """One workflow run (an id or a unique prefix): metrics, sections and chunks."""
    from daskscope.store import open_store
    from daskscope.store.runs import resolve_run_id, run_detail

    with open_store(state.database) as store:
        detail = run_detail(store, resolve_run_id(store, run_id))
    if as_json:
        _dump(detail)
        return
    run = detail["run"]
    head = Table(title=f"workflow run {run['id']} — {run['name']}", show_header=False)
    head.add_column("")
    head.add_column("")
    for label, value in (
        ("backend", run["backend"]),
        ("cluster", run["cluster_id"] or "— (no recorder attached)"),
        ("span", run["span_id"] or "—"),
        ("computations", ", ".join(run["computation_ids"]) or "—"),
        ("started (UTC)", _when(run["started_at"])),
        ("wall time", f"{run['wall_time_s']:.3f} s"),
    ):
        head.add_row(label, str(value))
    metrics = Table(title="metrics")
    metrics.add_column("key")
    metrics.add_column("value", justify="right")
    for key, value in sorted((run["metrics"] or {}).items()):
        metrics.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
    chunks = Table(title=f"chunks ({len(detail['chunks'])})")
    for col in ("#", "dataset", "file", "entries", "events", "wall s", "cpu s", "bytes read"):
        chunks.add_column(col)
    for c in detail["chunks"]:
        chunks.add_row(
            str(c["chunk_index"]), str(c["dataset"] or "—"), str(c["filename"] or "—"),
            "—" if c["entry_start"] is None else f"{c['entry_start']}-{c['entry_stop']}",
            _fmt(c["events"], ","), _fmt(c["wall_s"], ".4f"), _fmt(c["cpu_s"], ".4f"),
            _fmt(c["bytes_read"], ","),
        )  # fmt: skip
    _console().print(Group(head, metrics, chunks))
