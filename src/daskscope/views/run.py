"""One workflow run as it is shown: the Rich summary, ``daskscope run(s) [--json]``, the
JSON API and the pages all render :class:`RunView` / :class:`RunList`.

(Over 400 lines: one view, :class:`RunView` and :class:`RunList`, with its figure,
section, chunk, worker and dataset rows, built the same way from a live run and from the
store; the row dataclasses are most of it.)

A view is built from a live (or loaded) :class:`~daskscope.workflow.run.WorkflowRun`
(:func:`run_view`) or from the store (:func:`stored_run_view`); both go through the
same record and the same :class:`~daskscope.workflow.chunk.Chunk`, so the same run gives
equal views. A figure that was not measured has ``value`` None and says ``why``.
The store is imported by the functions that read it: a live run's summary needs none.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from daskscope import catalogue
from daskscope.format import MISSING, value_text
from daskscope.workflow.chunk import Chunk
from daskscope.workflow.renamed import renamed_in_row
from daskscope.workflow.run import WorkflowRun

if TYPE_CHECKING:
    from daskscope.store import Store
    from daskscope.store.runs import RunFilter

__all__ = [
    "DATASET_FIGURES",
    "EMPTY",
    "SECTION_FIGURES",
    "ChunkRow",
    "ChunkStat",
    "DatasetRow",
    "FigureGroup",
    "RunFigure",
    "RunList",
    "RunQuery",
    "RunSummary",
    "RunView",
    "SectionRow",
    "WorkerRow",
    "run_list",
    "run_view",
    "section_figures",
    "stored_run_view",
    "time_bound",
]

#: What an empty listing says
EMPTY = "no workflow runs recorded yet"
#: ... and a listing whose filters match nothing
NO_MATCH = "no workflow run matches these filters"

Value = float | str | None


@dataclass(frozen=True)
class RunFigure:
    """One workflow figure: ``value`` None when not measured, and then ``why``."""

    key: str
    label: str
    unit: str
    value: Value
    #: the value in its unit (``format.value_text``); ``format.MISSING`` when absent
    text: str
    why: str | None = None


@dataclass(frozen=True)
class FigureGroup:
    title: str
    figures: tuple[RunFigure, ...]


@dataclass(frozen=True)
class RunSummary:
    """A run's identity and times, and its headline figures (the listing's row)."""

    id: str
    name: str
    backend: str
    #: "ok", or "failed" when an exception left the collector's block (``error``)
    status: str
    error: str | None
    started_at: float
    stopped_at: float
    wall_time_s: float
    chunk_count: int
    cluster_id: str | None
    span_id: str | None
    computation_ids: tuple[str, ...]
    account: str | None
    user: str | None
    #: events, event rate (wall) and data rate
    headline: tuple[RunFigure, ...]


@dataclass(frozen=True)
class SectionRow:
    """One ``track_time``/``track_memory`` section over all chunks."""

    name: str
    kind: str | None
    chunks: int
    calls: int
    wall_s: float | None
    mean_wall_s: float | None
    cpu_s: float | None
    memory_delta_bytes: float | None
    mean_cpu_s: float | None = None
    mean_memory_delta_bytes: float | None = None
    memory_after_peak_bytes: float | None = None
    #: ``track_bytes``: Σ bytes uproot requested inside the section
    bytes_read: float | None = None


#: The section figures a page or table shows, by catalogue key ("section" scope), and the
#: :class:`SectionRow` field holding each
SECTION_FIGURES: tuple[tuple[str, str], ...] = (
    ("chunks", "chunks"), ("count", "calls"), ("wall_s", "wall_s"),
    ("mean_wall_s", "mean_wall_s"), ("cpu_s", "cpu_s"), ("mean_cpu_s", "mean_cpu_s"),
    ("memory_delta_bytes", "memory_delta_bytes"),
    ("mean_memory_delta_bytes", "mean_memory_delta_bytes"),
    ("memory_after_peak_bytes", "memory_after_peak_bytes"), ("bytes_read", "bytes_read"),
)  # fmt: skip
#: Columns shown only when a section has them (``track_bytes`` is rarer than the others)
_SECTION_IF_ANY = frozenset({"bytes_read"})


def section_figures(sections: Sequence[SectionRow]) -> tuple[tuple[str, str], ...]:
    """The :data:`SECTION_FIGURES` a table of ``sections`` shows: all, but the bytes
    column only when a section counted bytes (``track_bytes``)."""
    return tuple(
        (key, field) for key, field in SECTION_FIGURES
        if key not in _SECTION_IF_ANY or any(getattr(s, field) is not None for s in sections)
    )  # fmt: skip


@dataclass(frozen=True)
class ChunkStat:
    """The distribution of one chunk figure over the run's chunk attempts."""

    key: str
    label: str
    unit: str
    #: chunks that have the figure
    n: int
    mean: float | None
    median: float | None
    min: float | None
    max: float | None


@dataclass(frozen=True)
class ChunkRow:
    chunk_index: int
    chunk_id: str
    status: str
    attempt: int | None
    dataset: str | None
    filename: str | None
    entry_start: int | None
    entry_stop: int | None
    events: int | None
    bytes_read: int | None
    wall_s: float | None
    cpu_s: float | None
    memory_peak_bytes: int | None
    started_at: float | None
    worker: str | None
    task_prefix: str | None
    error: str | None


@dataclass(frozen=True)
class WorkerRow:
    """What one worker (locally: one process) did, from the chunks it ran."""

    worker: str
    chunks: int
    failed: int
    events: int | None
    wall_s: float
    cpu_s: float


@dataclass(frozen=True)
class DatasetRow:
    """One dataset's figures (workflow figures of its chunks, or of its partitions on the
    dask-awkward path), in the columns of :data:`DATASET_FIGURES` the run has."""

    name: str
    figures: tuple[RunFigure, ...]


@dataclass(frozen=True)
class RunView:
    run: RunSummary
    figures: tuple[FigureGroup, ...]
    sections: tuple[SectionRow, ...]
    chunk_stats: tuple[ChunkStat, ...]
    chunks: tuple[ChunkRow, ...]
    workers: tuple[WorkerRow, ...]
    coffea_report: dict[str, Any] | None
    #: why there are no chunks / no sections (None when there are)
    chunks_why: str | None
    sections_why: str | None
    #: per dataset, by name; ``datasets_why`` says why there are none (None when there are)
    datasets: tuple[DatasetRow, ...] = ()
    datasets_why: str | None = None

    def figure(self, key: str) -> RunFigure | None:
        """The figure ``key`` wherever it is grouped."""
        return next((f for g in self.figures for f in g.figures if f.key == key), None)


@dataclass(frozen=True)
class RunQuery:
    """What a listing was asked for (echoed, so a page can show and page on from it):
    ``q`` a part of the name or user or the start of the id, ``user`` exactly, ``status``
    "ok" or "failed", started from the day (or time) ``since`` to ``until`` inclusive
    (UTC, ISO 8601), ordered by ``sort`` (:data:`SORTS`) ``order`` "asc" or "desc"."""

    q: str | None = None
    user: str | None = None
    status: str | None = None
    since: str | None = None
    until: str | None = None
    sort: str = "started"
    order: str = "desc"
    offset: int = 0
    limit: int | None = 100


@dataclass(frozen=True)
class RunList:
    runs: tuple[RunSummary, ...]
    #: says the listing is empty (None when it is not)
    message: str | None
    #: runs that match the query, of which ``runs`` are those from ``query.offset`` on
    total: int = 0
    query: RunQuery = RunQuery()
    #: the users of the newest 2,000 runs (a filter's suggestions), by name
    users: tuple[str, ...] = ()


# -- which figures, in which group -----------------------------------------------------

_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Throughput", ("data_rate_gbps", "event_rate_wall_khz", "event_rate_per_cpu_second_khz",
                    "event_rate_per_chunk_second_khz", "event_rate_core_khz", "speedup",
                    "parallel_efficiency")),
    ("Events", ("total_events", "bytes_read", "num_chunks", "input_compressed_bytes",
                "input_uncompressed_bytes", "compression_ratio")),
    ("Resources", ("cores", "workers_avg", "workers_peak", "memory_peak_bytes",
                   "memory_avg_bytes", "chunk_memory_peak_bytes")),
    ("Timing", ("wall_time_s", "processing_time_s", "chunk_cpu_seconds")),
    ("Fine metrics", ("cpu_seconds", "noncpu_seconds", "cpu_percent", "processor_seconds",
                      "processor_cpu_seconds", "overhead_seconds", "overhead_cpu_seconds",
                      "spill_read_bytes", "spill_write_bytes", "serialize_seconds",
                      "deserialize_seconds", "compress_seconds", "decompress_seconds")),
)  # fmt: skip
_HEADLINE = ("total_events", "event_rate_wall_khz", "data_rate_gbps")
_ACTIVITY = "activity_"
# shown on the summary itself, not as figures
_NOT_FIGURES = frozenset({"status", "error"})
_CHUNK_FIGURES = ("wall_s", "cpu_s", "events", "bytes_read", "memory_peak_bytes")
_FINE = frozenset(_GROUPS[-1][1]) | {"event_rate_per_cpu_second_khz"}
_TRACKED = frozenset({"workers_avg", "workers_peak", "memory_peak_bytes", "memory_avg_bytes"})
_FROM_CHUNKS = frozenset({
    "processing_time_s", "chunk_cpu_seconds", "chunk_memory_peak_bytes",
    "event_rate_per_chunk_second_khz", "data_rate_per_chunk_second_gbps",
})  # fmt: skip
NO_CHUNKS = "no @track_metrics chunk reached the collector"
NO_SECTIONS = "no track_time/track_memory section ran"
NO_DATASETS = "no chunk names a dataset (coffea's events.metadata['dataset'])"
#: The per-dataset columns, in this order, of those a run has (workflow figure keys):
#: the chunk path's, then the dask-awkward path's (uproot's report per dataset)
DATASET_FIGURES = (
    "num_chunks", "num_failed_attempts", "total_events", "bytes_read", "processing_time_s",
    "chunk_cpu_seconds", "event_rate_per_chunk_second_khz", "data_rate_per_chunk_second_gbps",
    "input_compressed_bytes", "input_uncompressed_bytes", "compression_ratio",
    "partitions", "partitions_failed", "read_time_s", "read_requests",
)  # fmt: skip


def _unit_of(key: str) -> str:
    # a figure outside the catalogue (an activity, a derived metric): unit from its name
    for suffix, unit in (("_seconds", "seconds"), ("_s", "seconds"), ("_bytes", "bytes")):
        if key.endswith(suffix):
            return unit
    return "count" if key.endswith("_count") else ""


def _described(key: str) -> tuple[str, str]:
    """(label, unit) of a workflow figure."""
    try:
        found = catalogue.figure("workflow", key)
    except KeyError:
        return (_activity(key) if key.startswith(_ACTIVITY) else key), _unit_of(key)
    return found.label, found.unit


def _activity(key: str) -> str:
    """The fine-metric activity of ``activity_<activity>_<unit>`` as Dask names it
    ("thread-cpu"), or its words when Dask does not document it (a custom label)."""
    name = key.removeprefix(_ACTIVITY)
    for unit in ("_seconds", "_bytes", "_count"):
        name = name.removesuffix(unit)
    known = catalogue.activity(name.replace("_", "-"))
    return known.name if known is not None else name.replace("_", " ")


@dataclass(frozen=True)
class _Facts:
    """What the reasons for a missing figure depend on (kept by both live and stored)."""

    backend: str
    info: Mapping[str, Any]
    chunk_count: int

    def why(self, key: str) -> str:
        given = (self.info.get("not_measured") or {}).get(key)
        if given:
            return str(given)
        caps = set(self.info.get("capabilities") or ())
        if key in _FINE and "fine_metrics" not in caps:
            if key == "cpu_seconds" and "process_cpu" in caps:
                return "no CPU reading of the process tree"
            return f"{self.backend} backend has no fine metrics"
        if key.startswith(("processor_", "overhead_")) and not self.info.get("processor_prefixes"):
            return "no processor task prefix known"
        if key in _TRACKED and "tracking" not in caps:
            return "worker tracking off"
        if key in _FROM_CHUNKS and not self.chunk_count:
            return NO_CHUNKS
        if key in ("cores", "event_rate_core_khz", "parallel_efficiency"):
            return str(self.info.get("cores_note") or "number of cores unknown")
        if key in ("bytes_read", "data_rate_gbps"):
            return "no bytes read reported"
        if key in ("input_compressed_bytes", "input_uncompressed_bytes", "compression_ratio"):
            return "no uproot tree sizes"
        if key == "total_events" or key.startswith("event_rate"):
            return "no events reported"
        return "not reported for this run"


def _figure(key: str, metrics: Mapping[str, Any], facts: _Facts) -> RunFigure:
    label, unit = _described(key)
    value = metrics.get(key)
    if value is None:
        return RunFigure(key, label, unit, None, MISSING, facts.why(key))
    if isinstance(value, bool) or not isinstance(value, int | float):
        return RunFigure(key, label, unit, str(value), str(value))
    return RunFigure(key, label, unit, value, value_text(value, unit))


def _groups(metrics: Mapping[str, Any], facts: _Facts) -> tuple[FigureGroup, ...]:
    groups = [
        FigureGroup(title, tuple(_figure(k, metrics, facts) for k in keys))
        for title, keys in _GROUPS
    ]
    known = {k for _, keys in _GROUPS for k in keys} | _NOT_FIGURES
    rest = sorted(k for k in metrics if k not in known)
    for title, keys in (
        ("Other metrics", [k for k in rest if not k.startswith(_ACTIVITY)]),
        ("Fine metrics by activity", [k for k in rest if k.startswith(_ACTIVITY)]),
    ):
        if keys:
            groups.append(FigureGroup(title, tuple(_figure(k, metrics, facts) for k in keys)))
    return tuple(groups)


def _sections(sections: Mapping[str, Mapping[str, Any]]) -> tuple[SectionRow, ...]:
    return tuple(
        SectionRow(
            name=name,
            kind=agg.get("kind"),
            chunks=int(agg.get("chunks", 0)),
            calls=int(agg.get("count", 0)),
            wall_s=agg.get("wall_s"),
            mean_wall_s=agg.get("mean_wall_s"),
            cpu_s=agg.get("cpu_s"),
            memory_delta_bytes=agg.get("memory_delta_bytes"),
            mean_cpu_s=agg.get("mean_cpu_s"),
            mean_memory_delta_bytes=agg.get("mean_memory_delta_bytes"),
            memory_after_peak_bytes=agg.get("memory_after_peak_bytes"),
            bytes_read=agg.get("bytes_read"),
        )
        for name, agg in sorted(sections.items())
    )


def _datasets(
    info: Mapping[str, Any], chunks: Sequence[Chunk], facts: _Facts
) -> tuple[DatasetRow, ...]:
    given = info.get("datasets")
    if given is None and info.get("path") != "dask-awkward":
        # a run stored before runs kept them: made from its chunks, as the collector does
        from daskscope.workflow.metrics import dataset_metrics

        given = dataset_metrics(list(chunks))
    if not isinstance(given, Mapping):
        return ()
    present = {k for figures in given.values() for k in figures}
    keys = [k for k in DATASET_FIGURES if k in present]
    keys += sorted(present - set(DATASET_FIGURES))
    return tuple(
        DatasetRow(str(name), tuple(_figure(k, given[name], facts) for k in keys))
        for name in sorted(given)
    )


def _no_datasets(info: Mapping[str, Any], facts: _Facts) -> str:
    # the dask-awkward path has its datasets from uproot's report
    return facts.why("partitions") if info.get("path") == "dask-awkward" else NO_DATASETS


def _chunk_stats(chunks: Sequence[Chunk]) -> tuple[ChunkStat, ...]:
    stats = []
    for key in _CHUNK_FIGURES:
        described = catalogue.figure("chunk", key)
        values = [v for v in (getattr(c, key) for c in chunks) if v is not None]
        if not values:
            stats.append(ChunkStat(key, described.label, described.unit, 0, None, None, None, None))
            continue
        stats.append(ChunkStat(
            key, described.label, described.unit, len(values), statistics.fmean(values),
            statistics.median(values), min(values), max(values),
        ))  # fmt: skip
    return tuple(stats)


def _chunk_rows(chunks: Sequence[Chunk]) -> tuple[ChunkRow, ...]:
    names = [f.name for f in dataclasses.fields(ChunkRow) if f.name != "chunk_index"]
    return tuple(
        ChunkRow(chunk_index=i, **{n: getattr(c, n) for n in names}) for i, c in enumerate(chunks)
    )


def _workers(chunks: Iterable[Chunk]) -> tuple[WorkerRow, ...]:
    by: dict[str, list[Chunk]] = {}
    for c in chunks:
        name = c.worker or (f"process {c.pid}" if c.pid is not None else "unknown")
        by.setdefault(name, []).append(c)
    rows = []
    for name, ran in sorted(by.items()):
        events = [c.events for c in ran if c.events is not None]
        rows.append(WorkerRow(
            worker=name, chunks=len(ran), failed=sum(not c.ok for c in ran),
            events=sum(events) if events else None,
            wall_s=sum(c.wall_s or 0.0 for c in ran), cpu_s=sum(c.cpu_s or 0.0 for c in ran),
        ))  # fmt: skip
    return tuple(rows)


def _summary(row: Mapping[str, Any]) -> RunSummary:
    row = renamed_in_row(row)
    info = row.get("info") or {}
    facts = _Facts(row["backend"], info, int(row.get("chunk_count") or 0))
    metrics = row.get("metrics") or {}
    return RunSummary(
        id=row["id"],
        name=row["name"],
        backend=row["backend"],
        status=str(info.get("status") or "ok"),
        error=info.get("error"),
        started_at=row["started_at"],
        stopped_at=row["stopped_at"],
        wall_time_s=row["wall_time_s"],
        chunk_count=int(row.get("chunk_count") or 0),
        cluster_id=row.get("cluster_id"),
        span_id=row.get("span_id"),
        computation_ids=tuple(row.get("computation_ids") or ()),
        account=row.get("account"),
        user=row.get("user"),
        headline=tuple(_figure(k, metrics, facts) for k in _HEADLINE),
    )


def _view(row: Mapping[str, Any], chunks: Sequence[Chunk]) -> RunView:
    row = renamed_in_row(row)
    info = row.get("info") or {}
    facts = _Facts(row["backend"], info, len(chunks))
    sections = row.get("sections") or {}
    datasets = _datasets(info, chunks, facts)
    return RunView(
        run=_summary(row),
        figures=_groups(row.get("metrics") or {}, facts),
        sections=_sections(sections),
        chunk_stats=_chunk_stats(chunks),
        chunks=_chunk_rows(chunks),
        workers=_workers(chunks),
        coffea_report=row.get("coffea_report"),
        chunks_why=None if chunks else facts.why("processing_time_s"),
        sections_why=None if sections else NO_SECTIONS,
        datasets=datasets,
        datasets_why=None if datasets else _no_datasets(info, facts),
    )


# -- the two sources -------------------------------------------------------------------


def run_view(run: WorkflowRun) -> RunView:
    """The view of a live or loaded run (as the store will keep it)."""
    from daskscope.workflow.storage import run_records

    record = run_records(run)[0]
    return _view(dataclasses.asdict(record), run.chunks)


def stored_run_view(store: Store, id_or_prefix: str, *, account: str | None = None) -> RunView:
    """The view of a stored run named by its id or a unique prefix (``UnknownRun`` /
    ``AmbiguousRun`` otherwise); with ``account``, only that account's runs exist."""

    detail = store.run_detail(store.resolve_run_id(id_or_prefix, account=account))
    return _view(detail["run"], [Chunk.from_row(row) for row in detail["chunks"]])


def run_list(
    store: Store,
    query: RunQuery | None = None,
    *,
    limit: int | None = 100,
    account: str | None = None,
) -> RunList:
    """Stored runs that match ``query`` (all, newest first, by default), a page of them:
    ``limit`` when no query is given. ValueError for a query that cannot be answered
    (an unknown sort or status, a date that is not ISO 8601)."""
    from daskscope.store.runs import RunFilter

    query = query or RunQuery(limit=limit)
    where = _filter(query, account)
    rows = store.list_runs(where=where, sort=query.sort, descending=query.order == "desc",
        offset=query.offset, limit=query.limit,
    )  # fmt: skip
    runs = tuple(_summary(row) for row in rows)
    total = store.count_runs(where)
    users = tuple(store.run_users(RunFilter(account=account)))
    filtered = any((query.q, query.user, query.status, query.since, query.until))
    message = None
    if not runs:
        message = f"no runs past the {total:,} listed" if total else NO_MATCH if filtered else EMPTY
    return RunList(runs=runs, message=message, total=total, query=query, users=users)


def _filter(query: RunQuery, account: str | None) -> RunFilter:
    from daskscope.store.runs import SORTS, STATUSES, RunFilter

    if query.sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}, not {query.sort!r}")
    if query.order not in ("asc", "desc"):
        raise ValueError(f"order must be asc or desc, not {query.order!r}")
    if query.status is not None and query.status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {query.status!r}")
    return RunFilter(
        q=query.q or None,
        user=query.user or None,
        status=query.status,
        since=time_bound(query.since),
        until=time_bound(query.until, end=True),
        account=account,
    )


def time_bound(text: str | None, *, end: bool = False) -> float | None:
    """Epoch seconds of an ISO 8601 day or time in UTC (an offset when given); the end of
    a whole day (``end``) is the next day's start, so ``until`` includes that day."""
    if not text:
        return None
    try:
        if len(text.strip()) == 10:
            day = dt.date.fromisoformat(text.strip())
            start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
            return (start + dt.timedelta(days=1 if end else 0)).timestamp()
        moment = dt.datetime.fromisoformat(text.strip())
    except (ValueError, OverflowError):  # OverflowError: the day after 9999-12-31
        raise ValueError(
            f"{text!r} is not a date (2026-01-31) or time (2026-01-31T12:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()
