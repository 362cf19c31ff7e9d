"""One finished workflow run: everything measured, in plain JSON-able values.

The collector fills it; ``persist`` saves and loads it; ``views.run`` (the summary, the
CLI and the pages), ``plots`` and the store read it. Span metric keys are tuples (Dask's
own keys); chunks are :class:`~daskscope.workflow.chunk.Chunk`; everything else is made
of dicts, lists, strings, numbers and None, so that a save/load round trip is exact.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from daskscope.workflow.chunk import Chunk

__all__ = ["WorkflowRun"]


@dataclass(kw_only=True)
class WorkflowRun:
    run_id: str
    name: str
    backend: str
    #: epoch seconds (UTC): the collector's enter and the end of the measured wall time
    started_at: float
    stopped_at: float
    wall_time_s: float
    metrics: dict[str, Any] = field(default_factory=dict)
    #: every chunk attempt that reached the collector, by start time
    chunks: list[Chunk] = field(default_factory=list)
    tracking_data: dict[str, Any] = field(default_factory=dict)
    span_metrics: dict[tuple[Hashable, ...], float] = field(default_factory=dict)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    coffea_report: dict[str, Any] | None = None
    #: cluster_id, span_id, computations, capabilities, processor_prefixes, ...
    info: dict[str, Any] = field(default_factory=dict)
    #: "ok", or "failed" when an exception left the ``with`` block (``error`` says which)
    status: str = "ok"
    error: str | None = None

    @property
    def capabilities(self) -> set[str]:
        return set(self.info.get("capabilities", ()))
