"""Fine performance metrics of a cluster, of the spans with a tag, or of one span's
subtree: what the cluster page draws as stacked bars (``/api/v1/clusters/{id}/metrics``).

Each activity comes with one colour (the same on every page and for every filter) and
Dask's meaning of it from the catalogue, so the page explains what it draws.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from daskscope.analysis import fine_metrics_table
from daskscope.catalogue import ACTIVITIES, SPAN_FIGURES_NOTE, activity
from daskscope.store import Store
from daskscope.store.series import span_tree_rows
from daskscope.views.cluster import FineMetric

__all__ = [
    "ACTIVITY_PALETTE",
    "ActivityInfo",
    "FineMetricsView",
    "activity_colour",
    "fine_metrics_view",
]

#: Colours of Dask's documented activities: CPU blues, waiting purples, disk oranges,
#: (de)serialisation and compression greys and browns, transfers red, losses dark
ACTIVITY_PALETTE = {
    "thread-cpu": "#1f77b4",
    "thread-noncpu": "#9ecae1",
    "executor": "#9467bd",
    "other": "#bdbdbd",
    "memory-read": "#2ca02c",
    "disk-read": "#ff7f0e",
    "disk-write": "#d95f02",
    "compress": "#8c564b",
    "decompress": "#c49c94",
    "serialize": "#636363",
    "deserialize": "#969696",
    "network": "#d62728",
    "failed": "#67000d",
    "cancelled": "#e377c2",
    "missing": "#7f7f7f",
    "busy": "#bcbd22",
    "idle or other spans": "#dadaeb",
}
#: For activities Dask does not document (a ``context_meter`` label): by name's hash
_SPARE = ("#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#5254a3", "#6b6ecf")
#: Units in the order the page offers them
_UNIT_ORDER = ("seconds", "bytes", "count")


def activity_colour(name: str) -> str:
    """The activity's colour: fixed for Dask's, else stable by its name."""
    return ACTIVITY_PALETTE.get(name) or _SPARE[zlib.crc32(name.encode()) % len(_SPARE)]


@dataclass(frozen=True)
class ActivityInfo:
    name: str
    colour: str
    #: what Dask documents of it; None for an activity it does not document
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
    #: the activities present, in Dask's documented order then by name
    activities: list[ActivityInfo]
    #: what a span's "duration" and "active CPU" mean
    note: str


def fine_metrics_view(
    store: Store, cluster_id: str, *, tag: str | None = None, span_id: str | None = None
) -> FineMetricsView | None:
    """The view; None when ``span_id`` names no span of the cluster."""
    spans, rows = span_tree_rows(store, cluster_id)
    span = next((s for s in spans if s["span_id"] == span_id), None)
    if span_id is not None and span is None:
        return None
    table = fine_metrics_table(rows, spans=spans, tag=tag, span_id=span_id)
    present = {r["unit"] for r in table}
    units = [u for u in _UNIT_ORDER if u in present] + sorted(present - set(_UNIT_ORDER))
    documented = [a.name for a in ACTIVITIES]
    names = {r["activity"] for r in table}
    ordered = [n for n in documented if n in names] + sorted(names - set(documented))
    return FineMetricsView(
        cluster_id=cluster_id,
        tag=tag,
        span_id=span_id,
        span_name=list(span["name"] or []) if span is not None else None,
        units=units,
        metrics=[FineMetric(**r) for r in table],
        activities=[ActivityInfo(n, activity_colour(n), _meaning(n)) for n in ordered],
        note=SPAN_FIGURES_NOTE,
    )


def _meaning(name: str) -> str | None:
    found = activity(name)
    return found.meaning if found is not None else None
