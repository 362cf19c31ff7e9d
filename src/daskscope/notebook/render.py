"""The notebook's renderings of the views: a cluster (:class:`ClusterView` with its
:class:`FineMetricsView`), a workflow run (:class:`RunView`) and a comparison
(:class:`CompareView`), each as HTML and as plain text.

Views in, text out: every figure is the view's own, in the words of the catalogue and
the texts of :mod:`daskscope.format`, as the CLI and the pages show them.
"""

# ruff: noqa: RUF001 (the typographic minus and times of the comparison's texts)

from __future__ import annotations

from daskscope.catalogue import ACTIVITIES, activity_colours, figure
from daskscope.format import MISSING, count_text, duration_text, money_text, timestamp_text
from daskscope.notebook.dashboard import Dashboard
from daskscope.notebook.html import Bar, bars, escape, frame, note, table
from daskscope.views.cluster import ClusterView
from daskscope.views.compare import CompareView
from daskscope.views.fine_metrics import FineMetricsView
from daskscope.views.listing import ClusterStatistics
from daskscope.views.run import RunFigure, RunView

__all__ = [
    "TOP_PREFIXES",
    "cluster_html",
    "cluster_text",
    "compare_html",
    "compare_text",
    "run_html",
    "run_text",
]

#: task prefixes shown (the rest are on the dashboard page and in ``load(...)``)
TOP_PREFIXES = 8
#: task prefixes drawn as fine-metric bars beside the whole cluster's
BAR_PREFIXES = 6
_FIGURE_GROUPS = ("Throughput", "Events", "Resources", "Timing")


def in_catalogue_order(names: list[str]) -> list[str]:
    """Activities as every page orders them: the catalogue's first, then by name."""
    known = [a.name for a in ACTIVITIES]
    return [n for n in known if n in names] + sorted(set(names) - set(known))


# -- a cluster -----------------------------------------------------------------------------


def _cost(stats: ClusterStatistics) -> str:
    return MISSING if stats.cost is None else money_text(stats.cost.total, stats.cost.currency)


def cluster_statistics(view: ClusterView) -> list[tuple[str, str]]:
    """(label, text) of the cluster's headline figures, as ``daskscope show`` has them."""
    stats = view.statistics

    def of(key: str, value: float | None) -> tuple[str, str]:
        found = figure("cluster", key)
        return found.label, found.text(value)

    return [
        of("duration_s", stats.duration_s),
        (
            f"{figure('cluster.workers_peak').label} / threads",
            f"{count_text(stats.workers_peak)} / {count_text(stats.threads_peak)}",
        ),
        of("core_hours", stats.core_hours),
        of("compute_hours", stats.compute_hours),
        of("utilisation", stats.utilisation),
        of("tasks_executed", stats.tasks_executed),
        of("tasks_erred", stats.tasks_erred),
        of("bytes_processed", stats.bytes_processed),
        of("memory_gib_hours", stats.memory_gib_hours),
        (figure("cluster.cost.total").label, _cost(stats)),
    ]


def _prefix_rows(view: ClusterView) -> list[list[str]]:
    return [
        [
            p.name,
            count_text(p.group_count),
            count_text(p.tasks_executed),
            count_text(p.tasks_erred),
            figure("cluster", "bytes_processed").text(p.nbytes_total),
            duration_text(p.duration_s),
        ]
        for p in view.task_prefixes[:TOP_PREFIXES]
    ]


_PREFIX_HEADER = ("prefix", "groups", "executed", "erred", "output", "duration")


def fine_metric_bars(fine: FineMetricsView) -> list[Bar]:
    """Seconds by activity: the whole cluster's, then each of the prefixes with the
    most seconds (at most :data:`BAR_PREFIXES`)."""
    seconds = [m for m in fine.metrics if m.unit == "seconds"]
    order = [a.name for a in fine.activities]
    whole: dict[str, float] = {}
    by_prefix: dict[str, dict[str, float]] = {}
    for m in seconds:
        whole[m.activity] = whole.get(m.activity, 0.0) + m.value
        line = by_prefix.setdefault(m.prefix, {})
        line[m.activity] = line.get(m.activity, 0.0) + m.value

    def bar(label: str, values: dict[str, float]) -> Bar:
        parts = [(a, values[a], duration_text(values[a])) for a in order if a in values]
        return Bar(label, duration_text(sum(values.values())), parts)

    ranked = sorted(by_prefix.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    if not whole:
        return []
    return [bar("all tasks", whole), *(bar(p, v) for p, v in ranked[:BAR_PREFIXES])]


def _title(view: ClusterView) -> str:
    c = view.cluster
    state = "running" if view.running else "stopped"
    return f"cluster {c.name or c.id[:8]} ({c.id[:8]}), {state}"


def cluster_html(view: ClusterView, fine: FineMetricsView, dash: Dashboard) -> str:
    c = view.cluster
    state = "running" if view.running else "stopped"
    head = (
        f"<h3>daskscope · cluster {escape(c.name or c.id[:8])}"
        f' <span class="ds-badge" data-state="{state}">{state}</span></h3>'
        f'<p class="ds-muted"><code>{escape(c.id)}</code> · {escape(c.account)} / '
        f"{escape(c.user)} · started {escape(timestamp_text(c.started_at))} UTC · "
        f"dask {escape(c.dask_version)}</p>"
    )
    stats = table(None, cluster_statistics(view), numeric=(False, True), name="statistics")
    prefixes = (
        table(_PREFIX_HEADER, _prefix_rows(view), numeric=(False, *[True] * 5), name="prefixes")
        if view.task_prefixes
        else note("no task recorded")
    )
    shown = min(len(view.task_prefixes), TOP_PREFIXES)
    more = len(view.task_prefixes) - shown
    colours = {a.name: a.colour for a in fine.activities}
    drawn = fine_metric_bars(fine)
    fine_html = (
        bars(drawn, colours, name="fine-metrics")
        if drawn
        else note("no fine metrics recorded for this cluster")
    )
    body = (
        head
        + '<div class="ds-cols"><div><h4>Statistics</h4>'
        + stats
        + "</div><div><h4>Top task prefixes"
        + (f' <span class="ds-muted">({shown} of {len(view.task_prefixes)})</span>' if more else "")
        + "</h4>"
        + prefixes
        + "</div></div><h4>Fine metrics: seconds by activity</h4>"
        + fine_html
        + dash.html()
    )
    return frame(body, name="cluster")


def cluster_text(view: ClusterView, fine: FineMetricsView, dash: Dashboard) -> str:
    lines = [f"daskscope {_title(view)}", f"  id {view.cluster.id}"]
    width = max(len(label) for label, _ in cluster_statistics(view))
    lines += [f"  {label:<{width}}  {text}" for label, text in cluster_statistics(view)]
    if view.task_prefixes:
        lines.append("  top task prefixes (executed, duration):")
        lines += [
            f"    {p.name}: {count_text(p.tasks_executed)} tasks, {duration_text(p.duration_s)}"
            for p in view.task_prefixes[:TOP_PREFIXES]
        ]
    drawn = fine_metric_bars(fine)
    if drawn:
        whole = drawn[0]
        parts = ", ".join(f"{a} {t}" for a, _, t in whole.parts)
        lines.append(f"  fine metrics ({whole.total_text}): {parts}")
    lines.append("  " + dash.text())
    return "\n".join(lines)


# -- a workflow run --------------------------------------------------------------------------


def _value(f: RunFigure) -> str:
    if f.value is not None:
        return escape(f.text)
    why = escape(f"not measured: {f.why or ''}")
    return f'<span class="ds-muted" title="{why}">{escape(f.text)}</span>'


def run_activity_bar(view: RunView) -> tuple[list[Bar], dict[str, str]]:
    """The run's fine-metric seconds by activity (its figures ``activity_*_seconds``,
    labelled with Dask's activity names) as one bar, with the activities' colours."""
    group = next((g for g in view.figures if g.title == "Fine metrics by activity"), None)
    parts = [
        (f.label, float(f.value), f.text)
        for f in (group.figures if group else ())
        if f.key.endswith("_seconds") and isinstance(f.value, int | float) and f.value > 0
    ]
    if not parts:
        return [], {}
    order = in_catalogue_order([label for label, _, _ in parts])
    parts.sort(key=lambda p: order.index(p[0]))
    colours = activity_colours(order)
    total = duration_text(sum(v for _, v, _ in parts))
    return [Bar("all tasks", total, parts)], colours


def run_html(
    view: RunView, dash: Dashboard | None, *, live_note: str | None = None, live: bool = False
) -> str:
    """The run: its headline figures (not while ``live``: they are made at the end),
    fine-metric seconds by activity, chunk statistics and its dashboard page."""
    r = view.run
    head = (
        f"<h3>daskscope · run {escape(r.name)}"
        f' <span class="ds-badge" data-state="{escape(r.status)}">{escape(r.status)}</span></h3>'
        f'<p class="ds-muted"><code>{escape(r.id)}</code> · {escape(r.backend)} backend · '
        f"started {escape(timestamp_text(r.started_at))} UTC · wall time "
        f"{escape(duration_text(r.wall_time_s))}"
        + ("" if live else f" · {count_text(r.chunk_count)} chunks")
        + (f" · cluster <code>{escape(r.cluster_id[:8])}</code>" if r.cluster_id else "")
        + "</p>"
    )
    if r.error:
        head += f'<p class="ds-worse">Failed: {escape(r.error)}</p>'
    if live_note:
        head += note(live_note)
    groups = [] if live else [g for g in view.figures if g.title in _FIGURE_GROUPS]
    figures = "".join(
        f"<div><h4>{escape(g.title)}</h4>"
        + table(
            None,
            [[escape(f.label), _value(f)] for f in g.figures],
            numeric=(False, True),
            name=g.title,
            escaped=True,
        )
        + "</div>"
        for g in groups
    )
    drawn, colours = run_activity_bar(view)
    fine = (
        bars(drawn, colours, name="fine-metrics")
        if drawn
        else note("no fine metrics: " + (_why_no_fine(view) or "none reported"))
    )
    stats = [s for s in view.chunk_stats if s.n]
    chunks = (
        table(
            ("chunk figure", "chunks", "mean", "median", "min", "max"),
            [
                [s.label, count_text(s.n)]
                + [figure("chunk", s.key).text(v) for v in (s.mean, s.median, s.min, s.max)]
                for s in stats
            ],
            numeric=(False, True, True, True, True, True),
            name="chunks",
        )
        if stats
        else note(
            "the chunks' figures come when the run ends"
            if live
            else f"no chunks: {view.chunks_why}"
        )
    )
    body = (
        head
        + f'<div class="ds-cols">{figures}</div>'
        + "<h4>Fine metrics: seconds by activity</h4>"
        + fine
        + "<h4>Chunks</h4>"
        + chunks
        + (dash.html() if dash is not None else "")
    )
    return frame(body, name="run")


def _why_no_fine(view: RunView) -> str | None:
    f = view.figure("cpu_seconds")
    return None if f is None else f.why


def run_text(view: RunView, dash: Dashboard | None) -> str:
    r = view.run
    lines = [
        f"daskscope run {r.name} ({r.id[:8]}), {r.status}",
        f"  {r.backend} backend, wall time {duration_text(r.wall_time_s)}, "
        f"{count_text(r.chunk_count)} chunks",
    ]
    for g in view.figures:
        if g.title not in _FIGURE_GROUPS:
            continue
        shown = [f"{f.label} {f.text}" for f in g.figures if f.value is not None]
        if shown:
            lines.append(f"  {g.title}: " + ", ".join(shown))
    drawn, _ = run_activity_bar(view)
    if drawn:
        lines.append(
            f"  fine metrics ({drawn[0].total_text}): "
            + ", ".join(f"{a} {t}" for a, _, t in drawn[0].parts)
        )
    if dash is not None:
        lines.append("  " + dash.text())
    return "\n".join(lines)


# -- a comparison ---------------------------------------------------------------------------


def _verdict(text: str | None) -> str:
    if text in ("better", "worse"):
        return f'<span class="ds-{text}">{text}</span>'
    return escape(text or "")


def compare_bars(view: CompareView) -> tuple[list[Bar], dict[str, str]]:
    """A's and B's seconds by activity as two bars on one scale."""
    rows = [r for r in view.activities if (r.a or 0) > 0 or (r.b or 0) > 0]
    order = in_catalogue_order([r.key for r in rows])
    rows.sort(key=lambda r: order.index(r.key))
    colours = activity_colours(r.key for r in rows)
    out = []
    for side in ("a", "b"):
        parts = [(r.key, float(getattr(r, side) or 0.0), getattr(r, f"{side}_text")) for r in rows]
        out.append(Bar(side.upper(), duration_text(sum(v for _, v, _ in parts)), parts))
    return (out if rows else []), colours


def compare_html(view: CompareView, dash: Dashboard) -> str:
    head = (
        f"<h3>daskscope · {escape(view.kind)} comparison</h3>"
        + table(
            None,
            [["A", view.a.title, view.a.reference], ["B", view.b.title, view.b.reference]],
            name="sides",
        )
        + note(view.same)
    )
    figure_rows = [
        [escape(f.label), escape(f.a_text), escape(f.b_text), escape(f.difference_text),
         escape(f.ratio_text), _verdict(f.verdict)]
        for f in view.figures
        if f.a is not None or f.b is not None
    ]  # fmt: skip
    figures = table(
        ("figure", "A", "B", "B − A", "B ÷ A", ""),
        figure_rows,
        numeric=(False, True, True, True, True, False),
        name="figures",
        escaped=True,
    )
    drawn, colours = compare_bars(view)
    fine = bars(drawn, colours, name="fine-metrics") if drawn else note("no activity recorded")
    prefix_rows = [
        [escape(p.prefix), escape(p.status), count_text(p.a_tasks), count_text(p.b_tasks),
         duration_text(p.a_seconds), duration_text(p.b_seconds), escape(p.ratio_text),
         _verdict(p.verdict)]
        for p in view.task_prefixes[:TOP_PREFIXES]
    ]  # fmt: skip
    prefixes = table(
        ("prefix", "", "A tasks", "B tasks", "A seconds", "B seconds", "B ÷ A", ""),
        prefix_rows,
        numeric=(False, False, True, True, True, True, True, False),
        name="prefixes",
        escaped=True,
    )
    body = (
        head
        + "<h4>Figures</h4>"
        + figures
        + f"<h4>Seconds by activity ({escape(view.activities_source)})</h4>"
        + fine
        + "<h4>Task prefixes</h4>"
        + prefixes
        + dash.html()
    )
    return frame(body, name="compare")


def compare_text(view: CompareView, dash: Dashboard) -> str:
    lines = [
        f"daskscope {view.kind} comparison",
        f"  A: {view.a.title}",
        f"  B: {view.b.title}",
    ]
    for f in view.figures:
        if f.a is None and f.b is None:
            continue
        judged = f", {f.verdict}" if f.verdict else ""
        lines.append(f"  {f.label}: {f.a_text} → {f.b_text} ({f.ratio_text}{judged})")
    lines.append("  " + dash.text())
    return "\n".join(lines)
