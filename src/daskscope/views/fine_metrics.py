"""Fine performance metrics of a cluster, of the spans with a tag, or of one span's
subtree: what the cluster page draws as stacked bars (``/api/v1/clusters/{id}/metrics``).

Each activity comes with its colour and Dask's meaning of it from the catalogue, so the
page explains what it draws: a catalogued activity's colour is the same on every page;
one the catalogue does not know gets a colour of the catalogue's reserve, given over all
the cluster's activities, so it keeps it for every span, tag and unit.
"""

from __future__ import annotations

from dataclasses import dataclass

from daskscope.analysis import fine_metrics_table
from daskscope.catalogue import ACTIVITIES, SPAN_FIGURES_NOTE, activity, activity_colours
from daskscope.store import Store
from daskscope.views.cluster import FineMetric

__all__ = [
    "ActivityInfo",
    "FineMetricIntervalsView",
    "FineMetricsView",
    "fine_metric_intervals_view",
    "fine_metrics_view",
]

#: Units in the order the page offers them
_UNIT_ORDER = ("seconds", "bytes", "count")


@dataclass(frozen=True)
class ActivityInfo:
    name: str
    colour: str
    #: what Dask documents of it; None for an activity the catalogue does not know
    meaning: str | None


@dataclass(frozen=True)
class FineMetricsView:
    """Fine metrics summed by (activity, prefix, unit) over the spans asked for: all,
    those tagged ``tag``, or ``span_id`` and its descendants (spans are exclusive)."""

    cluster_id: str
    tag: str | None
    span_id: str | None
    #: the span's tags, when one span was asked for
    span_name: list[str] | None
    #: units present, seconds first
    units: list[str]
    #: per unit largest first
    metrics: list[FineMetric]
    #: the activities present, in the catalogue's order then by name
    activities: list[ActivityInfo]
    #: what a span's "duration" and "active CPU" mean
    note: str


def fine_metrics_view(
    store: Store, cluster_id: str, *, tag: str | None = None, span_id: str | None = None
) -> FineMetricsView | None:
    """The view; None when ``span_id`` names no span of the cluster."""
    spans, rows = store.span_tree_rows(cluster_id)
    span = next((s for s in spans if s["span_id"] == span_id), None)
    if span_id is not None and span is None:
        return None
    table = fine_metrics_table(rows, spans=spans, tag=tag, span_id=span_id)
    present = {r["unit"] for r in table}
    units = [u for u in _UNIT_ORDER if u in present] + sorted(present - set(_UNIT_ORDER))
    documented = [a.name for a in ACTIVITIES]
    names = {r["activity"] for r in table}
    ordered = [n for n in documented if n in names] + sorted(names - set(documented))
    # over every activity of the cluster: one the catalogue does not know keeps its
    # reserve colour whatever the span, tag or unit
    colours = activity_colours({r["activity"] for r in rows} | names)
    return FineMetricsView(
        cluster_id=cluster_id,
        tag=tag,
        span_id=span_id,
        span_name=list(span["name"] or []) if span is not None else None,
        units=units,
        metrics=[FineMetric(**r) for r in table],
        activities=[ActivityInfo(n, colours[n], _meaning(n)) for n in ordered],
        note=SPAN_FIGURES_NOTE,
    )


@dataclass(frozen=True)
class FineMetricIntervalsView:
    """Where the time went, interval by interval: what each activity gained between two
    of the recorder's flushes, over every span of the cluster and every context (a
    cluster recorded before the intervals were kept has none)."""

    cluster_id: str
    unit: str
    #: each interval's start and stop (epoch seconds), oldest first; contiguous
    starts: list[float]
    stops: list[float]
    #: the activities present, in the catalogue's order then by name
    activities: list[ActivityInfo]
    #: per activity, its gain in each interval (0 where it gained nothing)
    values: dict[str, list[float]]


def fine_metric_intervals_view(
    store: Store, cluster_id: str, *, unit: str = "seconds"
) -> FineMetricIntervalsView:
    """The view of one unit."""
    rows = store.fine_metric_intervals(cluster_id, unit=unit)
    bounds = sorted({(r["started_at"], r["stopped_at"]) for r in rows})
    at = {bound: i for i, bound in enumerate(bounds)}
    names = {r["activity"] for r in rows}
    documented = [a.name for a in ACTIVITIES]
    ordered = [n for n in documented if n in names] + sorted(names - set(documented))
    values = {name: [0.0] * len(bounds) for name in ordered}
    for r in rows:
        values[r["activity"]][at[(r["started_at"], r["stopped_at"])]] += r["value"]
    colours = activity_colours(names)
    return FineMetricIntervalsView(
        cluster_id=cluster_id,
        unit=unit,
        starts=[b[0] for b in bounds],
        stops=[b[1] for b in bounds],
        activities=[ActivityInfo(n, colours[n], _meaning(n)) for n in ordered],
        values=values,
    )


def _meaning(name: str) -> str | None:
    found = activity(name)
    return found.meaning if found is not None else None
