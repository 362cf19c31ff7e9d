"""What ``daskscope.cluster(...)``, ``daskscope.run(...)`` and ``daskscope.compare(...)``
return: a recorded thing's views, shown in a notebook as HTML (``_repr_html_``) and as
plain text (``repr``), and kept as attributes for code to read.

Each object is a snapshot taken when it was made: the views are read from the store once
(and the store closed again when it was opened here); call the function again for newer
figures.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlencode

from daskscope.notebook.dashboard import Dashboard, dashboard
from daskscope.notebook.render import (
    cluster_html,
    cluster_text,
    compare_html,
    compare_text,
    run_html,
    run_text,
)
from daskscope.store import Store, UnknownCluster, open_store
from daskscope.views.cluster import ClusterView, cluster_view
from daskscope.views.compare import CompareView, compare_view
from daskscope.views.fine_metrics import FineMetricsView, fine_metrics_view
from daskscope.views.listing import ListingQuery, cluster_listing
from daskscope.views.run import RunView, stored_run_view

__all__ = ["Cluster", "Comparison", "Run", "cluster", "compare", "opened", "run"]

StoreLike = Store | str | None


@contextmanager
def opened(store: StoreLike) -> Iterator[Store]:
    """``store`` itself when it is an open :class:`Store`; else the store at that URL
    (None: the configured one), closed on leaving."""
    if isinstance(store, Store):
        yield store
        return
    own = open_store(store)
    try:
        yield own
    finally:
        own.close()


def cluster_id_of(store: Store, id_or_name: str) -> str:
    """The cluster named by its id, a unique start of it, or its name (the newest
    cluster of that name); UnknownCluster naming what to pass otherwise."""
    try:
        return store.resolve_cluster_id(id_or_name)
    except UnknownCluster:
        listing = cluster_listing(store, ListingQuery(q=id_or_name, limit=200))
        named = [c for c in listing.clusters if c.name == id_or_name]
        if not named:
            raise
        return max(named, key=lambda c: c.started_at).id


@dataclass(frozen=True, repr=False)
class Cluster:
    """A recorded cluster: ``view`` (what ``daskscope show`` and its page show) and
    ``fine_metrics`` (its fine performance metrics with their activities' colours)."""

    view: ClusterView
    fine_metrics: FineMetricsView
    dashboard: Dashboard

    @property
    def id(self) -> str:
        return self.view.cluster.id

    def _repr_html_(self) -> str:
        return cluster_html(self.view, self.fine_metrics, self.dashboard)

    def __repr__(self) -> str:
        return cluster_text(self.view, self.fine_metrics, self.dashboard)


@dataclass(frozen=True, repr=False)
class Run:
    """A stored workflow run: ``view`` (what ``daskscope run ID`` and its page show)."""

    view: RunView
    dashboard: Dashboard

    @property
    def id(self) -> str:
        return self.view.run.id

    def _repr_html_(self) -> str:
        return run_html(self.view, self.dashboard)

    def __repr__(self) -> str:
        return run_text(self.view, self.dashboard)


@dataclass(frozen=True, repr=False)
class Comparison:
    """Two recorded things side by side: ``view`` (what ``daskscope compare`` shows)."""

    view: CompareView
    dashboard: Dashboard

    def _repr_html_(self) -> str:
        return compare_html(self.view, self.dashboard)

    def __repr__(self) -> str:
        return compare_text(self.view, self.dashboard)


def cluster(id_or_name: str, *, store: StoreLike = None) -> Cluster:
    """The recorded cluster with this id (or unique start of it, or name)."""
    with opened(store) as s:
        cid = cluster_id_of(s, id_or_name)
        view = cluster_view(s, cid)
        fine = fine_metrics_view(s, cid)
        assert fine is not None  # None only for a span it does not have
        return Cluster(view, fine, dashboard(f"/clusters/{cid}", s.display_url))


def run(id_or_prefix: str, *, store: StoreLike = None) -> Run:
    """The stored workflow run with this id (or unique start of it)."""
    with opened(store) as s:
        view = stored_run_view(s, id_or_prefix)
        return Run(view, dashboard(f"/runs/{view.run.id}", s.display_url))


def _reference(side: str | Cluster | Run) -> str:
    if isinstance(side, Cluster):
        return side.id
    if isinstance(side, Run):
        return f"run:{side.id}"
    return side


def compare(
    a: str | Cluster | Run, b: str | Cluster | Run, *, store: StoreLike = None
) -> Comparison:
    """``a`` and ``b`` side by side: two clusters (ids, or what :func:`cluster` returned),
    computations (``CLUSTER/COMPUTATION``), span tags (``CLUSTER/span:TAG``) or runs
    (``run:RUN``, or what :func:`run` returned)."""
    a, b = _reference(a), _reference(b)
    with opened(store) as s:
        view = compare_view(s, a, b)
        path = "/compare?" + urlencode({"a": a, "b": b})
        return Comparison(view, dashboard(path, s.display_url))
