"""What a workflow backend provides, and the registry third-party backends join.

A backend knows how to follow one execution system: it samples the resources in use
(``start_tracking``/``stop_tracking``), opens a span that tags the run's work
(``create_span``), reads the span's fine performance metrics (``get_span_metrics``) and
says whether it has any (``supports_fine_metrics``). Its ``parser`` turns those raw
metrics into workflow metric keys; a backend without fine metrics has none, and the
keys stay absent.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, ClassVar

__all__ = [
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

_REGISTRY: dict[str, type[Backend]] = {}


def register_backend(name: str, backend: type[Backend], *, replace: bool = False) -> None:
    """Make ``backend`` available as ``MetricsCollector(backend=name)``."""
    if not (isinstance(backend, type) and issubclass(backend, Backend)):
        raise TypeError(f"{backend!r} is not a daskscope Backend subclass")
    if name in _REGISTRY and not replace and _REGISTRY[name] is not backend:
        raise ValueError(f"a backend named {name!r} is registered already; pass replace=True")
    _REGISTRY[name] = backend


def get_backend(name: str) -> type[Backend]:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown workflow backend {name!r}; known: {sorted(_REGISTRY)} "
            "(daskscope.workflow.register_backend adds one)"
        ) from None


def backend_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def _load_builtin() -> None:
    # Importing the modules registers them; done lazily so that workers never pay.
    from daskscope.workflow.backends import dask as _dask  # noqa: F401
    from daskscope.workflow.backends import local as _local  # noqa: F401
