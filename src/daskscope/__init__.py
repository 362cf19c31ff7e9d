"""daskscope: performance analytics for Dask.

``daskscope.register(client)`` records a cluster; with the scheduler preload
``daskscope`` (``distributed.scheduler.preload: [daskscope]``) every cluster is recorded
with no code change.
"""

from __future__ import annotations

from typing import Any

from daskscope.client import flush, register
from daskscope.workflow.tracking import track_memory, track_metrics, track_time

__all__ = [
    "MetricsCollector",
    "__version__",
    "dask_setup",
    "flush",
    "register",
    "track_memory",
    "track_metrics",
    "track_time",
]

__version__ = "0.1.0"


def dask_setup(scheduler: Any) -> None:
    """Preload hook: ``dask scheduler --preload daskscope`` attaches the recorder."""
    from daskscope.collector.plugin import DaskscopePlugin

    scheduler.add_plugin(DaskscopePlugin(), idempotent=True)


def __getattr__(name: str) -> Any:
    # The collector pulls in more than a worker needs: load it on first use only
    if name == "MetricsCollector":
        from daskscope.workflow.collector import MetricsCollector

        return MetricsCollector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
