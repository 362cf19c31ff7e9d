"""How a chunk reaches its collector, wherever the user's code ran.

A collector given the processor instance stamps it with a *route* (the collector's id,
whether it follows Dask, and the address of its side channel). The route travels with
the pickled processor, so every chunk names the run it belongs to. A chunk then travels
by the first channel that applies:

1. inside a Dask task: the worker's event log (topic :data:`CHUNK_TOPIC`), tagged with
   the route's collector id (else the task's span) for the scheduler plugin to route;
2. in the process of the collector (coffea's ``IterativeExecutor``): handed over
   directly;
3. in a process-pool child (``FuturesExecutor``): the collector's side channel
   (:mod:`daskscope.workflow.channel`);
4. without a route, in a child process started under a local collector: injected into
   the output under :data:`INJECT_KEY`, which ``extract_metrics_from_output`` removes.

Every channel carries :meth:`Chunk.to_wire`. A chunk no collector could take (none
active: no route, not in a collector's span, no local collector) is not measured at all
(:func:`receivable`). Imports nothing heavy (runs in workers).
"""

from __future__ import annotations

import contextvars
import os
import sys
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from daskscope.workflow.chunk import Chunk

__all__ = [
    "CHUNK_TOPIC",
    "COLLECTOR_ENV",
    "INJECT_KEY",
    "NOTE_KEY",
    "WORKFLOW_SPAN",
    "deliver",
    "local_collectors",
    "local_receiver",
    "note_graph",
    "receivable",
]

#: Dask event-log topic of chunk records
CHUNK_TOPIC = "daskscope-chunk"
#: The first tag of every collector's span (``distributed.span``)
WORKFLOW_SPAN = "daskscope-workflow"
#: A record under this key is a note to the collector, not a chunk
NOTE_KEY = "__daskscope_note__"
#: Output key under which chunk records ride along where no other channel exists
INJECT_KEY = "__daskscope_chunks__"
#: Set by a local collector for the processes it starts: they inject their records
COLLECTOR_ENV = "DASKSCOPE_WORKFLOW_COLLECTOR"

#: The in-process receiver of chunk records (set by a local collector)
local_receiver: contextvars.ContextVar[Callable[[dict[str, Any]], None] | None] = (
    contextvars.ContextVar("daskscope_receiver", default=None)
)
#: In-process collectors by id: records whose route names one go straight to it
local_collectors: dict[str, Callable[[dict[str, Any]], None]] = {}


def _worker() -> Any:
    """The Dask worker running this code, or None."""
    if "distributed" not in sys.modules:  # never imported: not a worker
        return None
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        return None


def _in_workflow_span(worker: Any) -> bool:
    # The task's own span annotation (distributed keeps it on the worker's TaskState):
    # a collector's work runs under a span tagged WORKFLOW_SPAN
    key = worker.get_current_task()
    ts = worker.state.tasks.get(key) if key is not None else None
    span = ((getattr(ts, "annotations", None) or {}) if ts is not None else {}).get("span")
    return isinstance(span, Mapping) and WORKFLOW_SPAN in (span.get("name") or ())


def receivable(route: Any) -> bool:
    """Whether a chunk measured here can reach a collector: the processor's route names
    one, or this Dask task runs in a collector's span, or (not on Dask) this thread has a
    local collector or this process was started under one. Otherwise nothing is measured
    and nothing is sent (the scheduler's event log stays as it was)."""
    if route is not None:
        return True
    worker = _worker()
    if worker is not None:
        try:
            return _in_workflow_span(worker)
        except Exception:  # no telling: send, the scheduler drops what no run takes
            return True
    return local_receiver.get() is not None or bool(os.environ.get(COLLECTOR_ENV))


def note_graph(route: Any, output: Any) -> None:
    """Tell the collector that a tracked call built a graph instead of processing a chunk
    (coffea's dask-awkward path runs ``process()`` once on the client): it measures the
    run as that path, and learns the graph's layers from ``output``. Never raises."""
    try:
        named = route.get("collector_id") if isinstance(route, Mapping) else None
        receive = local_collectors.get(named) if named else None
        receive = receive or local_receiver.get()
        if receive is not None:
            receive({NOTE_KEY: "graph", "output": output})
    except Exception:
        pass


def deliver(chunk: Chunk, out: Any, route: Any = None) -> Any:
    """Send one chunk to its collector; returns the (maybe annotated) output."""
    if chunk.collector_id is not None:
        receive = local_collectors.get(chunk.collector_id)
        if receive is not None:  # the collector lives in this process
            receive(chunk.to_wire())
            return out
    worker = _worker()
    if worker is not None:
        key = worker.get_current_task()
        ts = worker.state.tasks.get(key) if key is not None else None
        chunk.task_key = str(key)
        chunk.task_prefix = ts.prefix if ts is not None else None
        chunk.span_id = getattr(ts, "span_id", None)
        chunk.worker = worker.address
        worker.log_event(CHUNK_TOPIC, chunk.to_wire())
        return out
    channel = route.get("channel") if route is not None else None
    if channel is not None:
        from daskscope.workflow.channel import send

        if send(tuple(channel), chunk.to_wire()):
            return out
    receiver = local_receiver.get()
    if receiver is not None:
        receiver(chunk.to_wire())
        return out
    collector_id = os.environ.get(COLLECTOR_ENV)
    if collector_id and isinstance(out, MutableMapping):
        chunk.collector_id = collector_id
        existing = out.get(INJECT_KEY)
        record = chunk.to_wire()
        out[INJECT_KEY] = [*existing, record] if isinstance(existing, list) else [record]
    return out
