"""Per-chunk and per-section measurements, taken where the user's code runs:
``@track_metrics``, ``track_time``, ``track_memory``, ``current_chunk`` and the switch.

This module runs inside Dask workers and process-pool children: it imports nothing
heavy (no store, no web, no coffea) and costs next to nothing when collection is off.
A measured chunk becomes a :class:`~daskscope.workflow.chunk.Chunk`;
:mod:`daskscope.workflow.delivery` takes it to its collector (the processor's route,
:data:`ROUTE_ATTR`, names the run).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
import time
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, TypeVar

from daskscope.workflow.chunk import Chunk, plain
from daskscope.workflow.delivery import (
    CHUNK_TOPIC,
    COLLECTOR_ENV,
    INJECT_KEY,
    deliver,
    note_graph,
    receivable,
)
from daskscope.workflow.probes import bytes_requested, describe_events, maxrss, peak, rss

__all__ = [
    "CHUNK_TOPIC",
    "COLLECTOR_ENV",
    "INJECT_KEY",
    "ChunkContext",
    "DetachedChunk",
    "current_chunk",
    "is_enabled",
    "set_enabled",
    "track_bytes",
    "track_memory",
    "track_metrics",
    "track_time",
]

#: dask config key of the switch (``DASK_DASKSCOPE__WORKFLOW__ENABLED=false``)
ENABLED_KEY = "daskscope.workflow.enabled"
#: Processor attribute: where this processor's chunks go (set by the collector)
ROUTE_ATTR = "_daskscope_route"
#: Processor attributes of the per-processor switch (daskscope's and the seed's names):
#: the collector sets them on enter and clears them on exit; False: nothing is measured
FLAG_ATTRS = ("_daskscope_collect_metrics", "_roastcoffea_collect_metrics")
#: Processor attributes holding the running chunk's custom fields (a mapping)
FIELDS_ATTRS = ("_daskscope_current_chunk", "_roastcoffea_current_chunk")
_ERROR_CHARS = 2000
#: Section values that are the highest seen over the section's calls, not a sum
_PEAKS = frozenset({"memory_after_bytes"})

F = TypeVar("F", bound=Callable[..., Any])

_enabled: bool | None = None  # None: not resolved from dask's config yet
_current: contextvars.ContextVar[ChunkContext | None] = contextvars.ContextVar(
    "daskscope_chunk", default=None
)


def set_enabled(flag: bool) -> None:
    """Turn chunk and section tracking on or off in this process."""
    global _enabled
    _enabled = bool(flag)


def is_enabled() -> bool:
    global _enabled
    if _enabled is None:
        import dask.config

        value = dask.config.get(ENABLED_KEY, True)
        _enabled = str(value).lower() not in ("false", "0", "no", "off")
    return _enabled


class ChunkContext:
    """The chunk being processed: sections, custom fields and user-reported events."""

    __slots__ = ("events", "fields", "rss_seen", "sections")

    def __init__(self) -> None:
        self.events: int | None = None
        self.fields: dict[str, Any] = {}
        self.sections: dict[str, dict[str, float]] = {}
        self.rss_seen = 0

    def set(self, name: str, value: Any) -> None:
        """A custom field of this chunk (kept as is; non-JSON values become text)."""
        self.fields[name] = value

    def report_events(self, n: int) -> None:
        """How many events this chunk holds, where the input cannot tell (plain Dask)."""
        self.events = int(n)

    def _section(self, name: str, kind: str, **values: float) -> None:
        # A section repeated within the chunk: times and deltas add up, peaks are maxima
        entry = self.sections.setdefault(name, {"kind": kind, "count": 0})  # type: ignore[dict-item]
        entry["count"] += 1
        for key, value in values.items():
            if key in _PEAKS:
                entry[key] = max(entry.get(key, value), value)
            else:
                entry[key] = entry.get(key, 0) + value


class DetachedChunk(ChunkContext):
    """What :func:`current_chunk` gives outside a measured chunk (collection off, no
    collector, or outside ``@track_metrics``): it takes what it is given and keeps
    nothing, so the user's code runs the same with metrics off. It is falsy."""

    __slots__ = ()

    def set(self, name: str, value: Any) -> None:
        return None

    def report_events(self, n: int) -> None:
        return None

    def __bool__(self) -> bool:
        return False


def current_chunk() -> ChunkContext:
    """The chunk of the innermost ``@track_metrics`` call in this thread; outside one, a
    fresh :class:`DetachedChunk` (falsy; what it is given is dropped)."""
    chunk = _current.get()
    return chunk if chunk is not None else DetachedChunk()


class ChunkFields(MutableMapping):  # type: ignore[type-arg]
    """``self._daskscope_current_chunk`` / ``self._roastcoffea_current_chunk``: the
    custom fields of the chunk running in *this thread* (a processor instance may be
    shared by threads). Outside a measured chunk it is empty and writes are dropped."""

    def _fields(self) -> dict[str, Any] | None:
        chunk = _current.get()
        return chunk.fields if chunk is not None else None

    def __getitem__(self, key: str) -> Any:
        fields = self._fields()
        if fields is None:
            raise KeyError(key)
        return fields[key]

    def __setitem__(self, key: str, value: Any) -> None:
        fields = self._fields()
        if fields is not None:
            fields[key] = value

    def __delitem__(self, key: str) -> None:
        fields = self._fields()
        if fields is None:
            raise KeyError(key)
        del fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._fields() or {}))

    def __len__(self) -> int:
        return len(self._fields() or {})

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (_chunk_fields, ())

    def __repr__(self) -> str:
        return f"ChunkFields({dict(self._fields() or {})!r})"


_FIELDS = ChunkFields()


def _chunk_fields() -> ChunkFields:
    return _FIELDS


def attach_fields(owner: Any) -> None:
    """Give ``owner`` the custom-field attributes (idempotent, never raises)."""
    try:
        d = owner.__dict__
        for name in FIELDS_ATTRS:
            if d.get(name) is not _FIELDS:
                d[name] = _FIELDS
    except Exception:
        pass


@contextlib.contextmanager
def track_time(owner: Any, name: str) -> Iterator[None]:
    """Time a section of the current chunk: wall and thread-CPU seconds.

    ``owner`` is the processor (``self``); it is accepted for symmetry with the
    decorator and not used. Outside a tracked chunk this does nothing.
    """
    chunk = _current.get() if is_enabled() else None
    if chunk is None:
        yield
        return
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:
        chunk._section(
            name,
            "time",
            wall_s=time.perf_counter() - wall0,
            cpu_s=time.thread_time() - cpu0,
        )


@contextlib.contextmanager
def track_memory(owner: Any, name: str) -> Iterator[None]:
    """Measure a section's change of the process's resident memory (and its time)."""
    chunk = _current.get() if is_enabled() else None
    if chunk is None:
        yield
        return
    before = rss() or 0
    wall0 = time.perf_counter()
    try:
        yield
    finally:
        after = rss() or 0
        chunk.rss_seen = max(chunk.rss_seen, before, after)
        chunk._section(
            name,
            "memory",
            wall_s=time.perf_counter() - wall0,
            memory_delta_bytes=after - before,
            memory_after_bytes=after,
        )


@contextlib.contextmanager
def track_bytes(owner: Any, events: Any, name: str) -> Iterator[None]:
    """Count the bytes uproot requests inside a section of the current chunk: the
    change of ``events``' file-handle count (``num_requested_bytes``), and wall time.

    ``owner`` is the processor (``self``), unused, as in :func:`track_time`. Outside a
    tracked chunk, or with an input that has no uproot file handle, this does nothing
    (no section: absent, never 0)."""
    chunk = _current.get() if is_enabled() else None
    before = bytes_requested(events) if chunk is not None else None
    if chunk is None or before is None:
        yield
        return
    wall0 = time.perf_counter()
    try:
        yield
    finally:
        after = bytes_requested(events)
        chunk._section(
            name,
            "bytes",
            wall_s=time.perf_counter() - wall0,
            bytes_read=(after if after is not None else before) - before,
        )


def _events_arg_index(func: Callable[..., Any]) -> int:
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return 0
    return 1 if params and params[0] in ("self", "cls") else 0


def track_metrics(func: F) -> F:
    """Measure every call of ``func`` (a processor's ``process``) as one chunk.

    Records wall and thread-CPU time, memory before/after/peak, events, dataset, file,
    entry range and bytes read (from a coffea/uproot input), start and end as epoch
    times, the sections inside, and the fields set on :func:`current_chunk`. The return
    value is unchanged, except in a process-pool child of a local collector, where the
    record rides along in the output (see :data:`INJECT_KEY`).

    A call that no collector could receive (none active) is not measured at all; a call
    given a lazy (dask) input builds a graph, not a chunk (coffea's dask-awkward path):
    it is not measured either, and the collector is shown the graph it returned.
    """
    index = _events_arg_index(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not (_enabled if _enabled is not None else is_enabled()):
            return func(*args, **kwargs)
        route = None
        if index == 1 and args:
            owner = args[0]
            # The per-processor switch: off means nothing is measured nor sent
            if getattr(owner, FLAG_ATTRS[0], None) is False:
                return func(*args, **kwargs)
            if getattr(owner, FLAG_ATTRS[1], None) is False:
                return func(*args, **kwargs)
            route = getattr(owner, ROUTE_ATTR, None)
            if route is not None and not route.get("dask"):
                _refuse_dask_without_client(route)
            attach_fields(owner)
        events = args[index] if len(args) > index else None
        if getattr(type(events), "__dask_graph__", None) is not None:
            # coffea's dask-awkward path: process() builds a graph here, on the client;
            # there is no chunk to measure. The collector learns the graph instead.
            out = func(*args, **kwargs)
            note_graph(route, out)
            return out
        if not receivable(route):
            # no collector could take the record (none active): measure nothing, send
            # nothing
            return func(*args, **kwargs)
        return _run_chunk(func, args, kwargs, events, route)

    wrapper.__daskscope_tracked__ = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def _refuse_dask_without_client(route: dict[str, Any]) -> None:
    # A collector without a Dask client cannot receive chunks run by Dask workers:
    # fail the first chunk loudly instead of measuring 0 chunks silently.
    import sys

    if "distributed" not in sys.modules:
        return
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        return
    raise RuntimeError(
        "daskscope: this chunk runs on a Dask worker, but its MetricsCollector "
        f"({route.get('collector_id')}) was created without a Dask client, so it cannot "
        "receive chunks from Dask. Pass the client: MetricsCollector(client, "
        "processor_instance=...), or the executor: MetricsCollector(executor=executor, "
        "processor_instance=...)."
    )


def _run_chunk(
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    events: Any,
    route: Any = None,
) -> Any:
    context = ChunkContext()
    token = _current.set(context)
    info = describe_events(events)
    rss0, maxrss0 = rss(), maxrss()
    started_at = time.time()
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    error: BaseException | None = None
    try:
        out = func(*args, **kwargs)
    except BaseException as exc:
        error, out = exc, None
    finally:
        wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
        _current.reset(token)
    rss1, maxrss1 = rss(), maxrss()
    chunk = Chunk(
        chunk_id=uuid.uuid4().hex,
        started_at=started_at,
        stopped_at=started_at + wall,
        wall_s=wall,
        cpu_s=cpu,
        memory_before_bytes=rss0,
        memory_after_bytes=rss1,
        memory_peak_bytes=peak(rss0, rss1, maxrss0, maxrss1, context.rss_seen),
        pid=os.getpid(),
        bytes_read=info["bytes_read"]() if info["bytes_read"] else None,
        sections=context.sections,
        fields=plain(context.fields),
        collector_id=route.get("collector_id") if route is not None else None,
        **{key: plain(value) for key, value in info["static"].items()},
    )
    if context.events is not None:
        chunk.events = context.events
    # after the bytes are counted: looking the tree up never adds to them
    sizes = info["tree_bytes"]() if info["tree_bytes"] else None
    if sizes is not None:
        chunk.tree_compressed_bytes, chunk.tree_uncompressed_bytes = sizes
    if error is not None:
        # A failed attempt is data too: sent, then the exception goes on as before
        chunk.status = "failed"
        chunk.error_type = type(error).__name__
        chunk.error = str(error)[:_ERROR_CHARS]
        with contextlib.suppress(Exception):
            deliver(chunk, None, route)
        raise error
    return deliver(chunk, out, route)
