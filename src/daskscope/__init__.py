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
    "cluster",
    "compare",
    "dask_setup",
    "flush",
    "load",
    "register",
    "run",
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


# -- in a notebook (docs/notebook.md): the store and its views load on first use only -----


def cluster(id_or_name: str, *, store: Any = None) -> Any:
    """The recorded cluster with this id (or a unique start of it, or its name): shown
    in a notebook with its statistics, top task prefixes, fine-metric bars and dashboard
    page. ``store``: an open Store or a database URL (default: the configured store)."""
    from daskscope.notebook import cluster as _cluster

    return _cluster(id_or_name, store=store)


def run(id_or_prefix: str, *, store: Any = None) -> Any:
    """The stored workflow run with this id (or a unique start of it), shown as
    ``daskscope run ID`` shows it."""
    from daskscope.notebook import run as _run

    return _run(id_or_prefix, store=store)


def compare(a: Any, b: Any, *, store: Any = None) -> Any:
    """Two clusters, computations, span tags or runs side by side (``daskscope compare``'s
    references, or what :func:`cluster` and :func:`run` returned)."""
    from daskscope.notebook import compare as _compare

    return _compare(a, b, store=store)


def load(ref: str, *, store: Any = None) -> Any:
    """A stored cluster or run (``run:ID``) as plain data (``.data``) and tables of its
    chunks, worker samples, task executions and fine metrics (``.to_pandas()``,
    ``.to_arrow()``)."""
    from daskscope.notebook import load as _load

    return _load(ref, store=store)


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
