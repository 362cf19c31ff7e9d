"""What a workflow backend provides, and the registry third-party backends join.

The built-in backends are named in a table (:data:`BUILTIN`, module and class), imported
when first asked for; this module imports none of them, and they do not register
themselves.

A backend knows how to follow one execution system: it samples the resources in use
(``start_tracking``/``stop_tracking``), opens a span that tags the run's work
(``create_span``), reads the span's fine performance metrics (``get_span_metrics``) and
says whether it has any (``supports_fine_metrics``). Its ``parser`` turns those raw
metrics into workflow metric keys; a backend without fine metrics has none, and the
keys stay absent.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, ClassVar

__all__ = [
    "BUILTIN",
    "AbstractMetricsBackend",
    "Backend",
    "backend_names",
    "get_backend",
    "register_backend",
]

SpanMetrics = dict[tuple[Hashable, ...], float]
#: ``parser(span_metrics, processor_prefixes) -> {metric key: value}``
Parser = Callable[[Mapping[tuple[Hashable, ...], float], Iterable[str]], dict[str, float]]


class Backend(ABC):
    """One execution system as the collector sees it."""

    name: ClassVar[str] = "abstract"
    #: turns ``get_span_metrics`` output into workflow keys (None: no fine metrics)
    parser: ClassVar[Parser | None] = None
    #: whether chunks run by Dask workers reach this backend (the scheduler plugin)
    receives_dask_chunks: ClassVar[bool] = False

    def open(self, collector_id: str) -> dict[str, Any]:
        """Called when the collector is entered, before the span; returns run info
        (e.g. ``cluster_id``). Default: nothing to prepare."""
        return {}

    @abstractmethod
    def start_tracking(self, interval: float | None) -> None:
        """Begin sampling resources every ``interval`` seconds (None: no sampling)."""

    @abstractmethod
    def stop_tracking(self) -> dict[str, Any]:
        """Stop sampling; return the tracking series (see ``docs/workflow.md``)."""

    @abstractmethod
    def create_span(self, name: str) -> Any:
        """A context manager tagging the work done inside it, yielding the span's id;
        or None (no spans), or any value handed back to ``get_span_metrics``."""

    @abstractmethod
    def get_span_metrics(self, span: Any) -> SpanMetrics:
        """The span's fine performance metrics with tuple keys (empty: none)."""

    @abstractmethod
    def supports_fine_metrics(self) -> bool:
        """Whether ``get_span_metrics`` can return anything at all."""

    def wait_for_metrics(self, span: Any, timeout: float) -> None:
        """Block until the span's metrics are complete (bounded by ``timeout``).
        Default: a backend without fine metrics has nothing to wait for."""
        return None

    def collect_chunks(self) -> list[dict[str, Any]]:
        """Chunk records that reached the backend's own channel during the run."""
        return []

    def finish_info(self) -> dict[str, Any]:
        """Extra facts known at the end (span info, computations, cores, ...)."""
        return {}

    def capabilities(self) -> set[str]:
        """What this backend measures: names used by the summary to say "not measured"."""
        return set()


#: The seed's name of the base class
AbstractMetricsBackend = Backend

#: the built-in backends: name -> (module, class), imported on first use so that
#: workers never pay for them
BUILTIN: dict[str, tuple[str, str]] = {
    "dask": ("daskscope.workflow.backends.dask", "DaskBackend"),
    "local": ("daskscope.workflow.backends.local", "LocalBackend"),
}

#: backends by name: the built-in ones once asked for, and those registered
_REGISTRY: dict[str, type[Backend]] = {}


def register_backend(name: str, backend: type[Backend], *, replace: bool = False) -> None:
    """Make ``backend`` available as ``MetricsCollector(backend=name)``."""
    if not (isinstance(backend, type) and issubclass(backend, Backend)):
        raise TypeError(f"{backend!r} is not a daskscope Backend subclass")
    known = _known(name)
    if known is not None and not replace and known is not backend:
        raise ValueError(f"a backend named {name!r} is registered already; pass replace=True")
    _REGISTRY[name] = backend


def get_backend(name: str) -> type[Backend]:
    found = _known(name)
    if found is None:
        raise ValueError(
            f"unknown workflow backend {name!r}; known: {backend_names()} "
            "(daskscope.workflow.register_backend adds one)"
        )
    return found


def backend_names() -> list[str]:
    return sorted({*BUILTIN, *_REGISTRY})


def _known(name: str) -> type[Backend] | None:
    """The backend registered as ``name``, a built-in one imported the first time."""
    if name not in _REGISTRY and name in BUILTIN:
        module, cls = BUILTIN[name]
        _REGISTRY[name] = getattr(importlib.import_module(module), cls)
    return _REGISTRY.get(name)
