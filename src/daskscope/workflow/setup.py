"""What a collector's arguments mean: the client and cores a coffea executor gives, and
the backend to build (a registered name, with its own constructor arguments)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daskscope.workflow.backends.base import Backend, get_backend

__all__ = ["executor_facts", "make_backend"]


def executor_facts(executor: Any) -> tuple[Any, int | None]:
    """(Dask client, cores) of a coffea executor, by duck typing (coffea not imported)."""
    kind = type(executor).__name__
    if kind == "DaskExecutor" or hasattr(executor, "treereduction"):
        client = getattr(executor, "client", None)
        if client is None:
            raise ValueError(
                "daskscope: this DaskExecutor has no client, so its chunks cannot be "
                "measured; create it with DaskExecutor(client=client) and pass the same "
                "client to MetricsCollector(client, ...)"
            )
        return client, None
    if kind == "IterativeExecutor":
        return None, 1
    workers = getattr(executor, "workers", None)
    return None, int(workers) if isinstance(workers, int) and workers > 0 else None


def make_backend(
    kind: str, client: Any, cores: int | None, options: Mapping[str, Any] | None
) -> Backend:
    cls = get_backend(kind)
    if kind == "dask":
        return cls(client)  # type: ignore[call-arg]
    if kind == "local":
        return cls(client, cores=cores)  # type: ignore[call-arg]
    # A third-party backend takes its own constructor arguments
    try:
        if options is not None:
            return cls(**options)
        return cls(client) if client is not None else cls()  # type: ignore[call-arg]
    except TypeError as exc:
        raise TypeError(
            f"daskscope: cannot build the {kind!r} backend ({exc}); pass its constructor "
            f"arguments as MetricsCollector(backend={kind!r}, backend_options={{...}}) or "
            "pass a built instance as backend=..."
        ) from exc
