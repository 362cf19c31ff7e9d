"""A workflow run's summary as Rich tables, rendered from its
:class:`~daskscope.views.run.RunView` (a live run and the same run read back from the
store print the same tables): ``MetricsCollector.print_summary()`` and ``daskscope run``.
A figure that was not measured reads ``format.MISSING`` and says why."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from daskscope import catalogue
from daskscope.format import MISSING, count_text, value_text
from daskscope.views.run import RunFigure, RunView, run_view, section_figures
from daskscope.workflow.run import WorkflowRun

__all__ = ["chunk_table", "print_summary", "summary_tables"]

_DIM = "dim"
#: Under the throughput table: the two event rates divide by different seconds, and
#: roastcoffea's "Event Rate (Total CPU)" is the second of them
RATE_NOTE = (
    "per CPU-second: events ÷ Σ thread-CPU seconds of the tasks; per chunk-second: "
    'events ÷ Σ chunk wall seconds — roastcoffea\'s "Event Rate (Total CPU)" '
    "(event_rate_cpu_total_khz) is the per chunk-second rate"
)


def _missing(why: str | None) -> Text:
    return Text(f"{MISSING} (not measured: {why})" if why else MISSING, style=_DIM)


def _cell(figure: RunFigure) -> Text | str:
    return figure.text if figure.value is not None else _missing(figure.why)


def _view(run: WorkflowRun | RunView) -> RunView:
    return run if isinstance(run, RunView) else run_view(run)


def summary_tables(run: WorkflowRun | RunView) -> list[Table]:
    """The figures by group, the datasets, the chunks' distribution and the sections."""
    view = _view(run)
    tables = []
    for group in view.figures:
        table = Table(
            title=f"{group.title} — {view.run.name}",
            show_header=False,
            title_justify="left",
            caption=RATE_NOTE if group.title == "Throughput" else None,
            caption_justify="left",
        )
        table.add_column("metric")
        table.add_column("value", justify="right")
        for figure in group.figures:
            table.add_row(Text(figure.label), _cell(figure))
        tables.append(table)
    tables.append(_dataset_table(view))
    tables.append(_chunk_stats(view))
    tables.append(_section_table(view))
    return tables


def _dataset_table(view: RunView) -> Table:
    table = Table(title="Datasets", title_justify="left")
    table.add_column("dataset")
    if view.datasets_why:
        table.add_row(_missing(view.datasets_why))
        return table
    for figure in view.datasets[0].figures:
        table.add_column(figure.label, justify="right")
    for row in view.datasets:
        table.add_row(Text(row.name), *(_cell(f) for f in row.figures))
    return table


def _chunk_stats(view: RunView) -> Table:
    table = Table(title="Chunks", title_justify="left")
    for col in ("", "n", "mean", "median", "min", "max"):
        table.add_column(col, justify="right" if col else "left")
    if view.chunks_why:
        table.add_row(_missing(view.chunks_why))
        return table
    for stat in view.chunk_stats:
        if not stat.n:
            table.add_row(stat.label, "0", _missing(None), "", "", "")
            continue
        table.add_row(
            stat.label, count_text(stat.n),
            *(value_text(v, stat.unit) for v in (stat.mean, stat.median, stat.min, stat.max)),
        )  # fmt: skip
    return table


def _section_table(view: RunView) -> Table:
    table = Table(title="Sections", title_justify="left")
    table.add_column("section")
    table.add_column("kind")
    described = [
        (catalogue.figure("section", key), field) for key, field in section_figures(view.sections)
    ]
    for figure, _ in described:
        table.add_column(figure.label, justify="right")
    if view.sections_why:
        table.add_row(_missing(view.sections_why))
    for s in view.sections:
        texts = [f.text(getattr(s, field)) for f, field in described]
        table.add_row(Text(s.name), s.kind or MISSING, *texts)
    return table


def chunk_table(view: RunView) -> Table:
    """Every chunk attempt of the run, in start order."""
    table = Table(title=f"chunks ({len(view.chunks)})", title_justify="left")
    for col in ("#", "status", "dataset", "file", "entries", "events", "wall", "CPU", "bytes read"):
        table.add_column(col, justify="left" if col in ("status", "dataset", "file") else "right")
    for c in view.chunks:
        entries = MISSING if c.entry_start is None else f"{c.entry_start}-{c.entry_stop}"
        table.add_row(
            str(c.chunk_index), c.status, Text(c.dataset or MISSING), Text(c.filename or MISSING),
            entries, value_text(c.events, "count"), value_text(c.wall_s, "seconds"),
            value_text(c.cpu_s, "seconds"), value_text(c.bytes_read, "bytes"),
        )  # fmt: skip
    return table


def print_summary(run: WorkflowRun | RunView, console: Any = None) -> None:
    (console or Console()).print(Group(*summary_tables(run)))
