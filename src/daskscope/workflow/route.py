"""The processor's route: the collector stamps its processor instance with where its
chunks go (the collector's id, whether it follows Dask, the address of its side
channel) and with the per-processor switch, and removes both on exit. The route travels
inside the pickled processor, so every chunk names its run, also from a pool or a Dask
worker, and two runs of one class never mix."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from daskscope.workflow import delivery, tracking

__all__ = ["attach", "detach", "set_flag"]

logger = logging.getLogger("daskscope")

Receive = Callable[[dict[str, Any]], None]


def _instance(proc: Any) -> bool:
    return proc is not None and not isinstance(proc, type)


def set_flag(proc: Any, flag: bool) -> None:
    """The per-processor switch (daskscope's and the seed's attribute)."""
    if not _instance(proc):
        return
    for name in tracking.FLAG_ATTRS:
        try:
            setattr(proc, name, flag)
        except Exception:  # a processor with __slots__: the switch stays global
            return


def attach(proc: Any, collector_id: str, receive: Receive, *, dask: bool) -> Any:
    """Route this process's chunks of ``collector_id`` to ``receive`` and stamp ``proc``;
    returns the side channel's listener (None on Dask or without a processor)."""
    if not dask:
        delivery.local_collectors[collector_id] = receive
    if not _instance(proc):
        return None
    listener, channel = None, None
    if not dask:
        from daskscope.workflow.channel import ChunkListener

        listener = ChunkListener(receive)
        channel = listener.route
    try:
        setattr(proc, tracking.ROUTE_ATTR, {
            "collector_id": collector_id, "dask": dask, "channel": channel,
        })  # fmt: skip
    except Exception:
        logger.warning("daskscope: cannot mark the processor; chunks go by span only")
    set_flag(proc, True)
    tracking.attach_fields(proc)
    return listener


def detach(proc: Any, collector_id: str, listener: Any) -> None:
    """Undo :func:`attach`: the switch off, the route removed, the channel closed."""
    delivery.local_collectors.pop(collector_id, None)
    if _instance(proc):
        set_flag(proc, False)
        stamped = getattr(proc, tracking.ROUTE_ATTR, None)
        if isinstance(stamped, dict) and stamped.get("collector_id") == collector_id:
            with contextlib.suppress(Exception):
                delattr(proc, tracking.ROUTE_ATTR)
    if listener is not None:
        listener.close()
