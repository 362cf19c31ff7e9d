"""The figures of coffea's dask-awkward path (``apply_to_fileset``,
``NanoEventsFactory(mode="dask")``); its collector is
:class:`daskscope.workflow.awkward.AwkwardMetricsCollector`, and a plain
``MetricsCollector`` that finds itself on this path uses these functions too (this
module imports no collector, so neither imports the other in a circle).

There ``process()`` runs once, on the client, to build a graph: no per-chunk records
exist. The figures come from two sources measured in the same run:

* uproot's report of the read (``uproot_options={"allow_read_errors_with_report":
  True}``): one row per partition with its entry range, its wall seconds inside uproot
  and its byte counters, or the exception that stopped it;
* the span's fine metrics, split by task prefix into uproot's read, the processor's
  partition-wise work and everything else (report bookkeeping, reductions), using the
  layers of the graph the collector was shown (``watch``/``compute``).

Every formula is in ``docs/workflow.md`` ("The dask-awkward path"). A figure this path
cannot measure is absent and ``not_measured`` says why.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from daskscope.collector.dask_adapter import IDLE_KEY
from daskscope.collector.snapshot import metric_parts
from daskscope.workflow.metrics import (
    DerivedMetric,
    apply_derived,
    parse_fine_metrics,
    workflow_metrics,
)
from daskscope.workflow.run import WorkflowRun
from daskscope.workflow.uproot_report import (
    NO_ENTRY_RANGES,
    per_dataset,
    report_figures,
    report_rows,
)

__all__ = [
    "HANDED_OVER",
    "KINDS",
    "NO_CHUNKS",
    "NO_ENTRY_RANGES",
    "NO_GRAPH",
    "NO_REPORT",
    "classify_layers",
    "is_report",
    "reads_with_uproot_dask",
    "refresh_run",
    "report_figures",
    "report_rows",
    "split_by_kind",
]

READ, PROCESSOR, OVERHEAD = "read", "processor", "overhead"
KINDS = (READ, PROCESSOR, OVERHEAD)
# uproot names its read layers "from-uproot" and the report's own layers after it
_READ_PREFIX = "from-uproot"
_REPORT_PREFIXES = ("from-uproot-report", "from-uproot-partitioned-report")

NO_CHUNKS = (
    "no per-chunk records on the dask-awkward path: process() runs once on the client "
    "to build the graph; per-partition figures come from uproot's report"
)
NO_REPORT = (
    "no uproot report: pass uproot_options={'allow_read_errors_with_report': True} to "
    "apply_to_fileset and give the computed report to set_uproot_report() (or use "
    "collector.compute(out, report); a plain MetricsCollector takes it in "
    "set_coffea_report())"
)
NO_GRAPH = (
    "the graph was not shown to the collector: call collector.watch(out, report) before "
    "dask.compute, or use collector.compute(out, report)"
)
#: What a plain ``MetricsCollector`` says when it finds itself on this path
HANDED_OVER = (
    "this run is coffea's dask-awkward path (process() builds a graph on the client, so "
    "there are no per-chunk records): measured as AwkwardMetricsCollector measures it — "
    "speedup and efficiency from the span's task seconds, events and bytes from uproot's "
    "report. Pass uproot_options={'allow_read_errors_with_report': True} to "
    "apply_to_fileset and give the computed report to set_coffea_report(); or use "
    "daskscope.workflow.awkward.AwkwardMetricsCollector and collector.compute(out, report)"
)


# -- the graph: which task prefix does what --------------------------------------------


def _flatten(objs: Iterable[Any]) -> Iterable[Any]:
    for obj in objs:
        if isinstance(obj, Mapping):
            yield from _flatten(obj.values())
        elif isinstance(obj, (list, tuple, set)):
            yield from _flatten(obj)
        elif hasattr(obj, "__dask_graph__"):
            yield obj


def is_report(collection: Any) -> bool:
    """Whether ``collection`` is (a dict of) uproot's lazy report."""
    found = list(_flatten([collection]))
    return bool(found) and all(
        str(getattr(c, "name", "")).startswith(_REPORT_PREFIXES[0]) for c in found
    )


def classify_layers(collections: Iterable[Any]) -> dict[str, str]:
    """``{task prefix: "read" | "processor" | "overhead"}`` from the collections' graphs.

    uproot's input layers are the read; the other partition-wise (blockwise) layers of
    the outputs are the processor's work; everything else — tree reductions,
    materialised aggregations, the report's own layers — is overhead. A prefix used by
    several kinds goes to the first of read, processor, overhead.
    """
    from dask.blockwise import Blockwise
    from dask.utils import key_split

    kinds: dict[str, str] = {}
    rank = {kind: i for i, kind in enumerate(KINDS)}
    for coll in _flatten(collections):
        graph = coll.__dask_graph__()
        report = is_report(coll)
        for name, layer in getattr(graph, "layers", {}).items():
            prefix = key_split(name)
            if _is_input(layer) or (prefix == _READ_PREFIX and not report):
                kind = READ
            elif report or prefix.startswith(_REPORT_PREFIXES):
                kind = OVERHEAD
            elif isinstance(layer, Blockwise):
                kind = PROCESSOR
            else:
                kind = OVERHEAD
            if prefix not in kinds or rank[kind] < rank[kinds[prefix]]:
                kinds[prefix] = kind
    return kinds


def _is_input(layer: Any) -> bool:
    # dask-awkward's input layer (uproot.dask builds one per dataset)
    return any(cls.__name__ == "AwkwardInputLayer" for cls in type(layer).__mro__)


def split_by_kind(
    span_metrics: Mapping[tuple[Hashable, ...], float], kinds: Mapping[str, str]
) -> tuple[dict[str, float], list[str]]:
    """``{read,processor,overhead}_{seconds,cpu_seconds,noncpu_seconds}`` from the fine
    metrics, and the prefixes that ran but were in no watched graph (counted as
    overhead)."""
    out = {f"{k}_{u}": 0.0 for k in KINDS for u in ("seconds", "cpu_seconds", "noncpu_seconds")}
    unknown: set[str] = set()
    for key, value in span_metrics.items():
        if tuple(key) == IDLE_KEY:
            continue
        context, prefix, activity, unit = metric_parts(tuple(key))
        if context != "execute" or unit != "seconds":
            continue
        kind = kinds.get(prefix)
        if kind is None:
            unknown.add(prefix)
            kind = OVERHEAD
        out[f"{kind}_seconds"] += value
        if activity == "thread-cpu":
            out[f"{kind}_cpu_seconds"] += value
        elif activity == "thread-noncpu":
            out[f"{kind}_noncpu_seconds"] += value
    return out, sorted(unknown)


def _read_by_name(span_metrics: Mapping[tuple[Hashable, ...], float]) -> dict[str, float] | None:
    # Without the graph only uproot's own layer name is known for sure
    kinds = {
        metric_parts(tuple(k))[1]: READ
        for k in span_metrics
        if metric_parts(tuple(k))[1] == _READ_PREFIX
    }
    if not kinds:
        return None
    split, _ = split_by_kind(span_metrics, kinds)
    return {k: v for k, v in split.items() if k.startswith(READ)}


# -- the figures of a run on this path ---------------------------------------------------


def reads_with_uproot_dask(span_metrics: Mapping[tuple[Hashable, ...], float]) -> bool:
    """Whether uproot's dask read (``from-uproot`` tasks) ran in the span."""
    return any(metric_parts(tuple(k))[1] == _READ_PREFIX for k in span_metrics)


def refresh_run(
    run: WorkflowRun,
    *,
    kinds: Mapping[str, str],
    rows: list[dict[str, Any]] | None,
    derived: Iterable[DerivedMetric] = (),
) -> None:
    """The run's figures on the dask-awkward path (``docs/workflow.md``): uproot's report
    ``rows`` (None: not given), the span's fine metrics split by the graphs' prefix
    ``kinds``; ``run.info["not_measured"]`` says why each absent figure is absent."""
    missing: dict[str, str] = dict.fromkeys(
        ("processing_time_s", "chunk_cpu_seconds", "chunk_memory_peak_bytes"), NO_CHUNKS
    )
    figures: dict[str, Any] = {}
    if rows is None:
        for key in ("total_events", "bytes_read", "num_chunks", "partitions"):
            missing[key] = NO_REPORT
        for key in ("partitions", "datasets", "read_failures"):
            run.info.pop(key, None)
    else:
        figures, lacking = report_figures(rows)
        missing.update(lacking)
        figures["num_chunks"] = figures["partitions"]
        run.info["partitions"] = rows
        run.info["datasets"] = per_dataset(rows)
        run.info["read_failures"] = [r for r in rows if r["exception"] is not None]
    # chunk records cannot exist here (process() ran on the client): none are used
    run.chunks = []
    run.sections = {}
    report = {
        "entries": figures.get("total_events"),
        "bytesread": figures.get("bytes_read"),
        "chunks": figures.get("num_chunks"),
    }
    metrics = workflow_metrics(
        wall_time_s=run.wall_time_s,
        chunks=[],
        report={k: v for k, v in report.items() if v is not None},
        span_metrics=run.span_metrics,
        parser=parse_fine_metrics if run.span_metrics else None,
        tracking=run.tracking_data,
        info=run.info,
    )
    metrics.update(figures)
    missing.update(_fine_figures(metrics, run.span_metrics, run.info, kinds))
    for key in missing:
        metrics.pop(key, None)
    run.info["not_measured"] = missing
    run.info["prefix_kinds"] = dict(sorted(kinds.items()))
    run.info["processor_prefixes"] = sorted(p for p, k in kinds.items() if k == PROCESSOR)
    apply_derived(metrics, run.tracking_data, derived)
    run.metrics = metrics


def _fine_figures(
    metrics: dict[str, Any],
    span_metrics: Mapping[tuple[Hashable, ...], float],
    info: dict[str, Any],
    kinds: Mapping[str, str],
) -> dict[str, str]:
    """Add the figures made of fine metrics; return the ones that are missing."""
    missing: dict[str, str] = {}
    split_keys = [f"{k}_{u}" for k in KINDS for u in ("seconds", "cpu_seconds", "noncpu_seconds")]
    for key in split_keys:
        metrics.pop(key, None)  # parse_fine_metrics' two-way split does not apply
    if not span_metrics:
        why = "no fine metrics of the run's span (no tasks ran in it)"
        return dict.fromkeys(["cpu_seconds", "event_rate_per_cpu_second_khz", *split_keys], why)
    if kinds:
        split, unknown = split_by_kind(span_metrics, kinds)
        metrics.update(split)
        info["unclassified_prefixes"] = unknown
        ran = {metric_parts(tuple(k))[1] for k in span_metrics}
        if not ran & {p for p, k in kinds.items() if k == READ}:
            why = "uproot's read ran inside other tasks (fused): its time is in processor_*"
            for key in split_keys[:3]:
                metrics.pop(key, None)
                missing[key] = why
    else:
        read = _read_by_name(span_metrics)
        if read is not None:
            metrics.update(read)
        missing.update(dict.fromkeys(split_keys[3:], NO_GRAPH))
    events, cpu = metrics.get("total_events"), metrics.get("cpu_seconds")
    if events is not None and cpu:
        metrics["event_rate_per_cpu_second_khz"] = events / cpu / 1e3
    else:
        metrics.pop("event_rate_per_cpu_second_khz", None)
    # Σ task seconds from the fine metrics stands in for Σ chunk seconds
    wall, busy, cores = (
        metrics.get("wall_time_s"),
        metrics.get("execute_seconds"),
        metrics.get("cores"),
    )
    if wall and busy is not None:
        metrics["speedup"] = busy / wall
        if cores:
            metrics["parallel_efficiency"] = busy / (wall * cores)
    return missing
