"""coffea's dask-awkward path: :class:`AwkwardMetricsCollector`.

There ``process()`` runs once, on the client, to build a graph: no per-chunk records
exist. The figures (``daskscope.workflow.awkward_figures``) come from uproot's report of
the read and the span's fine metrics split by the graph's layers; every formula is in
``docs/workflow.md`` ("The dask-awkward path").
"""

from __future__ import annotations

from typing import Any

from daskscope.workflow.awkward_figures import (
    HANDED_OVER,
    KINDS,
    NO_CHUNKS,
    NO_ENTRY_RANGES,
    NO_GRAPH,
    NO_REPORT,
    classify_layers,
    is_report,
    reads_with_uproot_dask,
    refresh_run,
    report_figures,
    report_rows,
    split_by_kind,
)
from daskscope.workflow.collector import MetricsCollector

__all__ = [
    "HANDED_OVER",
    "KINDS",
    "NO_CHUNKS",
    "NO_ENTRY_RANGES",
    "NO_GRAPH",
    "NO_REPORT",
    "AwkwardMetricsCollector",
    "classify_layers",
    "reads_with_uproot_dask",
    "refresh_run",
    "report_figures",
    "report_rows",
    "split_by_kind",
]


# -- the collector --------------------------------------------------------------------


class AwkwardMetricsCollector(MetricsCollector):
    """``MetricsCollector`` for coffea's dask-awkward path.

    ```python
    with AwkwardMetricsCollector(client, name="ttbar") as collector:
        out, report = apply_to_fileset(
            proc, fileset, uproot_options={"allow_read_errors_with_report": True}
        )
        result, report = collector.compute(out, report)
    collector.metrics["total_events"], collector.not_measured
    ```

    ``collector.compute`` is ``dask.compute`` that first shows the graph to the collector
    (``watch``) and then takes uproot's report from the results (``set_uproot_report``);
    both can be called by hand around a plain ``dask.compute``. A plain
    ``MetricsCollector`` that finds itself on this path hands over to these figures.
    """

    dask_awkward_path = True

    def __init__(self, client: Any = None, **kwargs: Any) -> None:
        if client is None and kwargs.get("enabled", True) and "backend" not in kwargs:
            raise ValueError(
                "the dask-awkward path needs a Dask client: pass the distributed.Client "
                "that runs dask.compute (AwkwardMetricsCollector(client, ...))"
            )
        super().__init__(client, **kwargs)

    def watch(self, *collections: Any) -> None:
        """Learn which task prefixes read, process and aggregate, from the graphs of the
        collections about to be computed (the outputs and the report)."""
        self._watch(*collections)

    def compute(self, *collections: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``dask.compute(*collections, **kwargs)``, measured: the graph is watched and
        the computed uproot report (found by its layer name) is taken."""
        import dask

        self.watch(*collections)
        results = dask.compute(*collections, **kwargs)
        reports = [r for c, r in zip(collections, results, strict=True) if is_report(c)]
        if reports:
            self._set_rows([row for report in reports for row in report_rows(report)])
        computed: tuple[Any, ...] = results
        return computed

    def set_uproot_report(self, report: Any) -> None:
        """Take uproot's computed report (``allow_read_errors_with_report=True``): events,
        bytes, partitions and read failures come from it. After the ``with`` block the
        figures are refreshed and the run is written to the store again."""
        self._set_rows(report_rows(report))

    @property
    def not_measured(self) -> dict[str, str]:
        """``{metric key: why it is absent}`` for the figures this path lacks."""
        return dict(self._finished().info.get("not_measured", {}))

    @property
    def report_rows(self) -> list[dict[str, Any]]:
        """uproot's report, one plain row per partition (see ``report_rows``)."""
        return list(self._finished().info.get("partitions", []))
