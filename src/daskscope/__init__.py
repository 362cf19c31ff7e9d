"""daskscope: performance analytics for Dask.

``daskscope.register(client)`` records a cluster; with the scheduler preload
``daskscope`` (``distributed.scheduler.preload: [daskscope]``) every cluster is recorded
with no code change.
"""

from __future__ import annotations

from typing import Any

from daskscope.client import flush, register

__all__ = ["__version__", "dask_setup", "flush", "register"]

__version__ = "0.1.0"


def dask_setup(scheduler: Any) -> None:
    """Preload hook: ``dask scheduler --preload daskscope`` attaches the recorder."""
    from daskscope.collector.plugin import DaskscopePlugin

    scheduler.add_plugin(DaskscopePlugin(), idempotent=True)
