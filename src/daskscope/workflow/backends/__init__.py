"""Workflow backends: an abstract base, a registry, Dask and local execution."""

from __future__ import annotations

from daskscope.workflow.backends.base import (
    AbstractMetricsBackend,
    Backend,
    backend_names,
    get_backend,
    register_backend,
)

__all__ = ["AbstractMetricsBackend", "Backend", "backend_names", "get_backend", "register_backend"]
