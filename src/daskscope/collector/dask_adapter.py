"""The one place that knows Dask's private objects and names.

Everything else in daskscope's capture code (the recorder, the workflow's scheduler side)
asks here: for the spans extension and a span's own fine metrics, for the name of the
"idle" fine metric, for a worker's memory split and heartbeat figures, for the recorder
among the scheduler's plugins, to add or wrap the scheduler's RPC handlers, and to watch
the workers' stream messages (a retried attempt's task-erred). When a new Dask release
renames one of these, this module is what changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping
from inspect import iscoroutinefunction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed.scheduler import Scheduler, WorkerState
    from distributed.spans import Span

__all__ = [
    "HEARTBEAT_PATHS",
    "IDLE_KEY",
    "RECORDER_NAME",
    "add_handlers",
    "find_plugin",
    "find_recorder",
    "heartbeat_value",
    "memory_split",
    "own_metrics",
    "span",
    "spans",
    "subtree_metrics",
    "watch_stream",
    "wrap_handler",
]

#: The name the recorder has among the scheduler's plugins
RECORDER_NAME = "daskscope"

#: Dask's fine metric for time a worker thread spent outside any task of the span
IDLE_KEY: tuple[str, str, str, str] = ("execute", "N/A", "idle or other spans", "seconds")

#: Where a worker's heartbeat (``WorkerState.metrics``) keeps the figures a worker sample
#: has columns for
HEARTBEAT_PATHS: dict[str, tuple[str, ...]] = {
    "cpu_percent": ("cpu",),
    "transfer_incoming_bytes": ("transfer", "incoming_bytes"),
    "transfer_outgoing_bytes": ("transfer", "outgoing_bytes"),
    "net_read_bps": ("host_net_io", "read_bps"),
    "net_write_bps": ("host_net_io", "write_bps"),
    "disk_read_bps": ("host_disk_io", "read_bps"),
    "disk_write_bps": ("host_disk_io", "write_bps"),
}

Metrics = dict[tuple[Hashable, ...], float]


# -- spans -------------------------------------------------------------------------------


def spans(scheduler: Scheduler) -> Mapping[str, Span]:
    """Every span the scheduler knows, by id (empty without the spans extension)."""
    extension = scheduler.extensions.get("spans")
    return extension.spans if extension is not None else {}


def span(scheduler: Scheduler, span_id: str | None) -> Span | None:
    """One span by id; None when there is no such span (or no spans extension)."""
    if span_id is None:
        return None
    return spans(scheduler).get(span_id)


def own_metrics(span: Span) -> Metrics:
    """The span's fine metrics exclusive of its children."""
    own = getattr(span, "_cumulative_worker_metrics", None)
    if own is not None:
        return dict(own)
    # Dask only publishes subtree totals: take the children out again
    out = dict(span.cumulative_worker_metrics)
    out.pop(IDLE_KEY, None)
    for child in span.children:
        for key, value in child.cumulative_worker_metrics.items():
            if key in out:
                out[key] -= value
    return {k: v for k, v in out.items() if v}


def subtree_metrics(span: Span) -> Metrics:
    """The span's fine metrics including its whole subtree."""
    return dict(span.cumulative_worker_metrics)


def subtree_ids(span: Span) -> list[str]:
    """The ids of the span and of every span below it."""
    return [s.id for s in span.traverse_spans()]


# -- workers -----------------------------------------------------------------------------


def memory_split(ws: WorkerState) -> tuple[int | None, ...]:
    """Dask's split of a worker's memory: (process, managed, unmanaged, unmanaged_old,
    unmanaged_recent, spilled); all None before a heartbeat carried memory figures."""
    try:
        mem = ws.memory
        return (
            mem.process,
            mem.managed,
            mem.unmanaged,
            mem.unmanaged_old,
            mem.unmanaged_recent,
            mem.spilled,
        )
    except (KeyError, TypeError):  # no heartbeat yet: not measured
        return (None,) * 6


def heartbeat_value(metrics: Mapping[str, Any], column: str) -> Any:
    """The heartbeat's figure for a worker sample's ``column`` (None when absent)."""
    value: Any = metrics
    for key in HEARTBEAT_PATHS[column]:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


# -- the scheduler's plugins and handlers ------------------------------------------------


def find_plugin(scheduler: Scheduler, name: str) -> Any:
    """The scheduler plugin registered under ``name``, or None."""
    return scheduler.plugins.get(name)


def find_recorder(scheduler: Scheduler) -> Any:
    """The daskscope recorder attached to this scheduler, or None."""
    return find_plugin(scheduler, RECORDER_NAME)


def add_handlers(scheduler: Scheduler, handlers: Mapping[str, Callable[..., Any]]) -> None:
    """Add RPC handlers; a name already taken (another recorder's) is left as it is."""
    for name, handler in handlers.items():
        scheduler.handlers.setdefault(name, handler)


def wrap_handler(scheduler: Scheduler, name: str, before: Callable[[], Awaitable[None]]) -> bool:
    """Make the scheduler's handler ``name`` await ``before()`` first; once only (a
    handler already wrapped by daskscope stays as it is). False when there is none."""
    original = scheduler.handlers.get(name)
    if original is None or getattr(original, "_daskscope", False):
        return False

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        await before()
        return await original(*args, **kwargs)

    wrapped._daskscope = True  # type: ignore[attr-defined]
    scheduler.handlers[name] = wrapped
    return True


def watch_stream(
    scheduler: Scheduler,
    op: str,
    seen: Callable[[Mapping[str, Any]], None],
    done: Callable[[], None],
) -> bool:
    """Show each stream message ``op`` (a worker's ``"task-erred"``) to ``seen`` before
    the scheduler's own handler takes it, and call ``done`` once it has. Every recorder
    on the scheduler may watch: the handler is wrapped once. False when the scheduler
    has no such handler, or an asynchronous one."""
    handlers = scheduler.stream_handlers
    current = handlers.get(op)
    watchers: list[tuple[Callable[[Mapping[str, Any]], None], Callable[[], None]]] | None
    watchers = getattr(current, "_daskscope_watchers", None)
    if watchers is not None:
        watchers.append((seen, done))
        return True
    if current is None or iscoroutinefunction(current):
        return False
    original = current
    watchers = [(seen, done)]

    def wrapped(**msg: Any) -> Any:
        for see, _ in watchers:
            see(msg)
        try:
            return original(**msg)
        finally:
            for _, finish in watchers:
                finish()

    wrapped._daskscope_watchers = watchers  # type: ignore[attr-defined]
    handlers[op] = wrapped
    return True
