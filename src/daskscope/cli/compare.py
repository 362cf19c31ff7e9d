"""``daskscope compare A B``, ``daskscope history KIND NAME`` and ``daskscope
regressions``: the views of :mod:`daskscope.views.compare` and
:mod:`daskscope.views.history` as tables, or (``--json``) the API's JSON of the same
view. ``regressions`` exits 1 when a figure regressed, so a CI job can fail on it."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from daskscope.format import MISSING

if TYPE_CHECKING:
    from daskscope.views.compare import FigureRow

__all__ = ["COMMANDS", "compare_command", "history_command", "regressions_command"]

EXIT_REGRESSED = 1
EXIT_ERROR = 2

_VERDICT_STYLE = {"better": "green", "worse": "red", "same": "dim"}


def _console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 160)


@contextmanager
def _hinted() -> Iterator[None]:
    """A bad reference or unknown part: one line saying what to do, exit 2 (store errors
    are the main group's)."""
    from daskscope.store.compare import UnknownPart
    from daskscope.store.runs import AmbiguousRun, UnknownRun
    from daskscope.views.compare import REFERENCE_SYNTAX, BadReference

    try:
        yield
    except BadReference as exc:
        click.echo(f"error: {exc}", err=True)
        click.echo(f"each side is {REFERENCE_SYNTAX}", err=True)
        click.get_current_context().exit(EXIT_ERROR)
    except (UnknownPart, UnknownRun, AmbiguousRun, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        click.get_current_context().exit(EXIT_ERROR)


def _difference(text: str, verdict: str | None) -> Text:
    """A difference with its verdict when better or worse, coloured by it."""
    style = _VERDICT_STYLE.get(verdict or "", "")
    return Text(text + (f" ({verdict})" if verdict in ("better", "worse") else ""), style=style)


def _figure_table(title: str, rows: Sequence[FigureRow]) -> Table:
    table = Table(title=title)
    for name in ("figure", "a", "b", "b − a", "b ÷ a"):  # noqa: RUF001
        table.add_column(name, justify="left" if name == "figure" else "right")
    for r in rows:
        table.add_row(
            r.label, r.a_text, r.b_text, _difference(r.difference_text, r.verdict), r.ratio_text
        )
    return table


@click.command("compare")
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON instead of tables.")
@click.pass_obj
def compare_command(state: Any, a: str, b: str, as_json: bool) -> None:
    """Compare A and B side by side. Each is CLUSTER, CLUSTER/COMPUTATION,
    CLUSTER/span:TAG (every span of the cluster with that tag) or run:RUN, ids or unique
    starts of them; both of one kind."""
    from daskscope.store import open_store
    from daskscope.views.compare import compare_view
    from daskscope.views.encode import to_pretty_json

    with open_store(state.database) as store, _hinted():
        view = compare_view(store, a, b)
    if as_json:
        click.echo(to_pretty_json(view))
        return
    console = _console()
    console.print(Text(f"a: {view.a.title}\nb: {view.b.title}"))
    console.print(_figure_table(f"{view.kind} figures", view.figures))
    compute_title = "compute by task prefix (fine metrics thread-cpu + thread-noncpu, seconds)"
    for title, rows in ((f"by activity: {view.activities_source}", view.activities),
                        (compute_title, view.prefixes)):  # fmt: skip
        if not rows:
            continue
        table = Table(title=title)
        for name in ("", "a", "b", "b − a", "b ÷ a"):  # noqa: RUF001
            table.add_column(name, justify="left" if not name else "right")
        for r in rows:
            table.add_row(
                Text(r.key), r.a_text, r.b_text, _difference(r.difference_text, r.verdict),
                r.ratio_text,
            )  # fmt: skip
        console.print(table)
    groups = Table(title="task groups by prefix")
    for name in ("prefix", "", "tasks a", "tasks b", "task time a", "task time b", "b ÷ a"):
        groups.add_column(name, justify="left" if name in ("prefix", "") else "right")
    from daskscope.format import count_text, duration_text

    for p in view.task_prefixes:
        groups.add_row(
            Text(p.prefix), "" if p.status == "both" else p.status, count_text(p.a_tasks),
            count_text(p.b_tasks), duration_text(p.a_seconds), duration_text(p.b_seconds),
            _difference(p.ratio_text, p.verdict),
        )  # fmt: skip
    console.print(groups)
    console.print(_figure_table("the clusters they ran on", view.cluster))
    if view.code_diff:
        console.print(Text("code that changed", style="bold"))
        for line in view.code_diff:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else ""
            console.print(Text(line, style=style))
    else:
        console.print(Text(view.code_note or "", style="dim"))
    console.print(Text(view.same, style="dim"))


@click.command("history")
@click.argument("kind", type=click.Choice(["span", "run", "cluster"]))
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON instead of a table.")
@click.option(
    "--offset", type=click.IntRange(min=0), default=0, show_default=True,
    help="Skip this many of the newest runs (page back through a long history).",
)  # fmt: skip
@click.pass_obj
def history_command(state: Any, kind: str, name: str, as_json: bool, offset: int) -> None:
    """Each figure of a recurring span tag, workflow run name or cluster name over its
    newest runs (oldest first), with the regression check of each figure that has a
    direction; ``--offset`` pages back."""
    from daskscope.store import open_store
    from daskscope.views.encode import to_pretty_json
    from daskscope.views.history import history_view

    with open_store(state.database) as store, _hinted():
        view = history_view(store, kind, name, offset=offset)
    if as_json:
        click.echo(to_pretty_json(view))
        return
    console = _console()
    if not view.points:
        console.print(view.message or "")
        return
    shown = view.points[-12:]  # a terminal is narrow: the latest runs
    table = Table(title=f"{kind} {name!r}: last {len(shown)} of {len(view.points)} runs")
    table.add_column("figure")
    for p in shown:
        table.add_column(p.at_text[5:16], justify="right")
    table.add_column("check")
    first = len(view.points) - len(shown)
    for s in view.series:
        cells = [
            Text(t, style="bold red" if first + i in s.flagged else "")
            for i, t in enumerate(s.texts[first:])
        ]
        check = s.check.status if s.check else MISSING
        table.add_row(s.label, *cells, Text(check, style="red" if s.flagged else ""))
    console.print(table)
    for s in view.series:
        if s.check and s.check.status == "regressed":
            console.print(Text(f"regressed: {s.label}: {s.check.summary}", style="red"))
    console.print(Text(view.statistic, style="dim"))
    if view.older_runs or view.newer_runs:
        console.print(Text(
            f"{len(view.points):,} of {view.total_runs:,} runs: {view.older_runs:,} older and "
            f"{view.newer_runs:,} newer not shown (--offset {view.offset + view.limit} "
            "for the older)", style="dim",
        ))  # fmt: skip


@click.command("regressions")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON instead of a table.")
@click.option("--name", help="Only the span tag, run name or cluster name of this name.")
@click.pass_obj
def regressions_command(state: Any, as_json: bool, name: str | None) -> None:
    """Every span tag, run name and cluster name that recurs, checked for regressions.
    Exit status 1 when a figure regressed, 0 when none did, 2 on an error (a CI job can
    run ``daskscope regressions --name my-pipeline`` after its run)."""
    from daskscope.store import open_store
    from daskscope.views.encode import to_pretty_json
    from daskscope.views.history import regressions_view

    with open_store(state.database) as store:
        view = regressions_view(store, name=name)
    if as_json:
        click.echo(to_pretty_json(view))
    else:
        console = _console()
        if view.regressions:
            table = Table(title=f"regressions ({view.checked} recurring things checked)")
            for name in ("kind", "name", "figure", "last runs", "threshold", "before"):
                table.add_column(name)
            for r in view.regressions:
                table.add_row(
                    r.kind, Text(r.name), Text(r.label), ", ".join(r.check.recent_text),
                    r.check.threshold_text,
                    f"median {r.check.median_text}, σ {r.check.sigma_text} "  # noqa: RUF001
                    f"({r.check.baseline_runs} runs)",
                )  # fmt: skip
            console.print(table)
        else:
            console.print(f"no regressions ({view.checked} recurring things checked)")
        console.print(Text(view.statistic, style="dim"))
    if view.regressions:
        click.get_current_context().exit(EXIT_REGRESSED)


#: What cli/main.py registers
COMMANDS = (compare_command, history_command, regressions_command)
