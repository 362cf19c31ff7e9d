"""``daskscope.load(...)``: a stored cluster or workflow run as plain Python data, and
its rows as tables that become pandas or Arrow frames.

``Measurement.data`` is the view the dashboard shows, as plain dicts and lists (its
JSON: :func:`daskscope.views.to_data`); ``chunks``, ``samples``, ``tasks`` and
``fine_metrics`` are :class:`Table` s of one row each: a chunk attempt of a workflow
run, a worker sample, a task execution of the task log, a fine metric summed by
(activity, task prefix, unit). Everything is read when ``load`` is called: the task
log of a long cluster is millions of rows, so narrow it to a run where you can.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from daskscope.notebook.objects import StoreLike, cluster_id_of, opened
from daskscope.notebook.tasklog import TASK_COLUMNS, task_columns
from daskscope.store import Store, UnknownCluster
from daskscope.store.runs import UnknownRun
from daskscope.views.cluster import FineMetric, cluster_view
from daskscope.views.encode import to_data
from daskscope.views.fine_metrics import fine_metrics_view
from daskscope.views.run import ChunkRow, stored_run_view

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa  # type: ignore[import-untyped]

__all__ = ["Measurement", "NotRecorded", "Table", "load"]

_CHUNK_COLUMNS = ("run_id", *(f.name for f in dataclasses.fields(ChunkRow)))
_METRIC_COLUMNS = tuple(f.name for f in dataclasses.fields(FineMetric))
#: a sample's columns that are not values (the JSON of metrics without a column stays
#: in ``metrics``, as text)
_SAMPLE_SKIP = frozenset({"id", "cluster_id", "revision"})


class NotRecorded(LookupError):
    """Neither a cluster nor a workflow run of the store goes by this name."""


@dataclass(frozen=True)
class Table:
    """Rows kept column-wise as plain Python values."""

    name: str
    columns: Mapping[str, Sequence[Any]]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()), ()))

    def to_arrow(self) -> pa.Table:
        import pyarrow as pa

        return pa.table({name: list(values) for name, values in self.columns.items()})

    def to_pandas(self) -> pd.DataFrame:
        frame: pd.DataFrame = self.to_arrow().to_pandas()
        return frame

    def rows(self) -> list[dict[str, Any]]:
        """One dict a row."""
        names = list(self.columns)
        rows = zip(*self.columns.values(), strict=True)
        return [dict(zip(names, values, strict=True)) for values in rows]

    def __repr__(self) -> str:
        return f"<Table {self.name}: {len(self):,} rows, {len(self.columns)} columns>"


@dataclass(frozen=True)
class Measurement:
    """A stored cluster or workflow run (``kind``), loaded: see the module's docstring."""

    kind: Literal["cluster", "run"]
    id: str
    data: dict[str, Any]
    chunks: Table
    samples: Table
    tasks: Table
    fine_metrics: Table

    def tables(self) -> dict[str, Table]:
        return {t.name: t for t in (self.chunks, self.samples, self.tasks, self.fine_metrics)}

    def to_pandas(self) -> dict[str, pd.DataFrame]:
        """Each table as a pandas frame, by name."""
        return {name: t.to_pandas() for name, t in self.tables().items()}

    def to_arrow(self) -> dict[str, pa.Table]:
        """Each table as an Arrow table, by name."""
        return {name: t.to_arrow() for name, t in self.tables().items()}

    def __repr__(self) -> str:
        counts = ", ".join(f"{name} {len(t):,}" for name, t in self.tables().items())
        return f"<Measurement {self.kind} {self.id}: {counts} rows>"


def _columns(names: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    return {n: [r.get(n) for r in rows] for n in names}


def _chunks(store: Store, run_ids: Sequence[str]) -> Table:
    rows: list[dict[str, Any]] = []
    for run_id in run_ids:
        view = stored_run_view(store, run_id)
        rows += [{"run_id": run_id, **dataclasses.asdict(c)} for c in view.chunks]
    return Table("chunks", _columns(_CHUNK_COLUMNS, rows))


def _samples(store: Store, cluster_id: str | None, window: tuple[float, float] | None) -> Table:
    import json

    rows = store.worker_samples(cluster_id) if cluster_id else []
    if window is not None:
        rows = [r for r in rows if window[0] <= r["sampled_at"] <= window[1]]
    names = [n for n in (rows[0] if rows else ()) if n not in _SAMPLE_SKIP]
    plain = [
        {n: json.dumps(v) if isinstance(v, dict | list) else v for n, v in r.items()} for r in rows
    ]
    return Table("samples", _columns(names or ["worker", "sampled_at"], plain))


def _fine(metrics: Sequence[FineMetric]) -> Table:
    rows = [dataclasses.asdict(m) for m in metrics]
    return Table("fine_metrics", _columns(_METRIC_COLUMNS, rows))


def _tasks(store: Store, cluster_id: str | None, computations: Sequence[str | None]) -> Table:
    if cluster_id is None or not computations:
        return Table("tasks", {n: [] for n in TASK_COLUMNS})
    return Table("tasks", task_columns(store, cluster_id, computations))


def _load_cluster(store: Store, cluster_id: str) -> Measurement:
    view = cluster_view(store, cluster_id)
    fine = fine_metrics_view(store, cluster_id)
    runs = [r["id"] for r in store.list_runs(cluster_id=cluster_id, limit=None)]
    return Measurement(
        kind="cluster",
        id=cluster_id,
        data=to_data(view),
        chunks=_chunks(store, runs),
        samples=_samples(store, cluster_id, None),
        tasks=_tasks(store, cluster_id, [None]),
        fine_metrics=_fine(fine.metrics if fine is not None else []),
    )


def _load_run(store: Store, id_or_prefix: str) -> Measurement:
    view = stored_run_view(store, id_or_prefix)
    r = view.run
    fine = None
    if r.cluster_id and r.span_id:
        fine = fine_metrics_view(store, r.cluster_id, span_id=r.span_id)
    return Measurement(
        kind="run",
        id=r.id,
        data=to_data(view),
        chunks=_chunks(store, [r.id]),
        samples=_samples(store, r.cluster_id, (r.started_at, r.stopped_at)),
        tasks=_tasks(store, r.cluster_id, list(r.computation_ids)),
        fine_metrics=_fine(fine.metrics if fine is not None else []),
    )


def load(ref: str, *, store: StoreLike = None) -> Measurement:
    """The cluster (its id, a unique start of it, or its name) or workflow run
    (``run:ID``, or an id no cluster has) named by ``ref``."""
    with opened(store) as s:
        if ref.startswith("run:"):
            return _load_run(s, ref[4:])
        try:
            return _load_cluster(s, cluster_id_of(s, ref))
        except UnknownCluster:
            try:
                return _load_run(s, ref)
            except UnknownRun:
                raise NotRecorded(
                    f"no cluster or workflow run is named {ref!r} in {s.display_url}: "
                    "`daskscope clusters` and `daskscope runs` list them (or pass store=URL)"
                ) from None
