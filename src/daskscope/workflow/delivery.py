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

Every channel carries :meth:`Chunk.to_wire`. Imports nothing heavy (runs in workers).
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, MutableMapping
from typing import Any

from daskscope.workflow.chunk import Chunk

__all__ = [
    "CHUNK_TOPIC",
    "COLLECTOR_ENV",
    "INJECT_KEY",
    "deliver",
    "local_collectors",
    "local_receiver",
]

#: Dask event-log topic of chunk records
CHUNK_TOPIC = "daskscope-chunk"
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


def deliver(chunk: Chunk, out: Any, route: Any = None) -> Any:
    """Send one chunk to its collector; returns the (maybe annotated) output."""
    if chunk.collector_id is not None:
        receive = local_collectors.get(chunk.collector_id)
        if receive is not None:  # the collector lives in this process
            receive(chunk.to_wire())
            return out
    try:
        import sys

        if "distributed" not in sys.modules:
            raise ImportError
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        worker = None
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
