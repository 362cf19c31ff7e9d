"""``daskscope advise CLUSTER [--computation C]`` and ``daskscope advise --run RUN``:
what the advice rules found (:mod:`daskscope.views.advice`), one panel a finding, or
(``--json``) the API's JSON of the same view."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

if TYPE_CHECKING:
    from daskscope.views.advice import AdviceItem, AdviceView

__all__ = ["advice_text", "advise_command"]

_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold blue"}


def _panel(a: AdviceItem) -> Panel:
    lines = [Text(f"{a.title}" + (f" — {a.subject}" if a.subject else ""), style="bold")]
    for e in a.evidence:
        line = Text(f"  {e.label}: ")
        line.append(e.value_text, style="bold")
        if e.threshold_text is not None:
            line.append(f" (threshold {e.threshold_text})", style="dim")
        lines.append(line)
    lines += [Text(a.action), Text(f"rule {a.rule}", style="dim")]
    title = Text(a.severity.upper(), style=_STYLE.get(a.severity, ""))
    return Panel(Group(*lines), title=title, title_align="left")


def advice_text(view: AdviceView) -> Group:
    """The view for a terminal: a summary line, then each finding."""
    what = {"cluster": f"cluster {view.cluster_id}", "run": f"run {view.run_id}"}.get(
        view.scope, f"computation {view.computation_id} of cluster {view.cluster_id}"
    )
    rules = f"{view.rules_checked} rule{'s' if view.rules_checked != 1 else ''}"
    if not view.advice:
        return Group(Text(f"No advice for {what}: none of {rules} found anything."))
    n = len(view.advice)
    head = Text(f"{n} finding{'s' if n != 1 else ''} for {what} ({rules} checked):")
    return Group(head, *map(_panel, view.advice))


@click.command("advise")
@click.argument("cluster_id", required=False)
@click.option("--computation", metavar="ID", help="Only this computation (an id or unique start).")
@click.option(
    "--run", "run_id", metavar="RUN", help="A workflow run's advice instead of a cluster's."
)
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON instead of text.")
@click.pass_obj
def advise_command(
    state: Any, cluster_id: str | None, computation: str | None, run_id: str | None, as_json: bool
) -> None:
    """What the advice rules found for CLUSTER (a unique id prefix is enough), one of its
    computations (--computation), or a workflow run (--run RUN, no CLUSTER)."""
    from daskscope.store import open_store
    from daskscope.store.runs import AmbiguousRun, UnknownRun
    from daskscope.views import to_pretty_json
    from daskscope.views.advice import UnknownComputation, cluster_advice, run_advice

    if (cluster_id is None) == (run_id is None):
        raise click.UsageError("give a CLUSTER, or --run RUN (not both)")
    if run_id is not None and computation is not None:
        raise click.UsageError("--computation is for a CLUSTER's computation, not with --run")
    with open_store(getattr(state, "database", None)) as store:
        try:
            if run_id is not None:
                view = run_advice(store, run_id)
            else:
                full = store.resolve_cluster_id(cluster_id or "")
                view = cluster_advice(store, full, computation)
        except (UnknownComputation, UnknownRun, AmbiguousRun) as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
    if as_json:
        click.echo(to_pretty_json(view))
        return
    Console(width=None if sys.stdout.isatty() else 120).print(advice_text(view))
