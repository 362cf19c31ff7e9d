"""daskscope: performance analytics for Dask.

``daskscope.register(client)`` records a cluster; with the scheduler preload
``daskscope`` (``distributed.scheduler.preload: [daskscope]``) every cluster is recorded
with no code change.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from daskscope.client import flush, register
from daskscope.workflow.tracking import track_bytes, track_memory, track_metrics, track_time

__all__ = [
    "MetricsCollector",
    "__version__",
    "dask_setup",
    "flush",
    "register",
    "track_bytes",
    "track_memory",
    "track_metrics",
    "track_time",
]

__version__ = "0.1.0"


def dask_setup(scheduler: Any) -> None:
    """Preload hook: ``dask scheduler --preload daskscope`` attaches the recorder.

    A recorder that cannot attach must not stop the cluster, nor go unnoticed: the
    scheduler logs an error that names the cause and the remedy, and records a
    ``daskscope`` event (``client.get_events("daskscope")``)."""
    try:
        from daskscope.collector.plugin import DaskscopePlugin

        scheduler.add_plugin(DaskscopePlugin(), idempotent=True)
    except Exception as exc:
        cause = f"{type(exc).__name__}: {exc}"
        logging.getLogger("daskscope").error(
            "daskscope could not attach its recorder to scheduler %s (%s): this cluster "
            "is NOT being recorded. Check the daskscope settings in dask's config "
            "(`python -c 'import dask, daskscope; print(dask.config.get(\"daskscope\"))'` "
            "in the scheduler's environment, docs/configuration.md), then restart the "
            "scheduler or call daskscope.register(client).",
            _address(scheduler),
            cause,
            exc_info=True,
        )
        # The log line above already says it; never fail the scheduler's start.
        with contextlib.suppress(Exception):
            scheduler.log_event("daskscope", {"action": "attach-failed", "error": cause})


def _address(scheduler: Any) -> str:
    try:
        return str(scheduler.address)
    except Exception:  # not listening yet
        return "(not listening yet)"


def __getattr__(name: str) -> Any:
    # The collector pulls in more than a worker needs: load it on first use only
    if name == "MetricsCollector":
        from daskscope.workflow.collector import MetricsCollector

        return MetricsCollector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
