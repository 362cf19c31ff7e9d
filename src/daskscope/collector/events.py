"""The cluster's event and error records: what happened to it (started, restarted,
closed, workers added and removed) and which tasks failed, within the configured
bounds (so many errors, so long a traceback)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from daskscope.model import ErrorRecord, EventRecord, stable_id

if TYPE_CHECKING:
    from distributed.scheduler import TaskState, WorkerState

__all__ = ["EventLog"]


class EventLog:
    """Makes the event and error records of one cluster."""

    def __init__(
        self, cluster_id: str, *, max_errors: int, max_traceback_chars: int, max_code_chars: int
    ) -> None:
        self.cluster_id = cluster_id
        self.max_errors = max_errors
        self.max_traceback_chars = max_traceback_chars
        self.max_code_chars = max_code_chars
        self.errors_kept = 0

    def event(
        self,
        kind: str,
        *,
        at: float,
        worker: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> EventRecord:
        return EventRecord(
            id=stable_id(self.cluster_id, "event", kind, worker, at),
            cluster_id=self.cluster_id,
            at=at,
            kind=kind,
            worker=worker,
            detail=detail or {},
        )

    def worker_added(
        self, worker: str, ws: WorkerState | None, *, at: float, detail: dict[str, Any] | None
    ) -> EventRecord:
        info = dict(detail or {})
        if ws is not None:
            info.update(nthreads=ws.nthreads, memory_limit=ws.memory_limit, name=str(ws.name))
        return self.event("worker-added", at=at, worker=worker, detail=info)

    def worker_removed(
        self,
        worker: str,
        *,
        at: float,
        reason: str,
        msg: Mapping[str, Any],
        stimulus_id: str | None,
        with_cluster: bool,
    ) -> EventRecord:
        """``msg``: Dask's "remove-worker" event message (what the removal cost)."""
        detail: dict[str, Any] = {
            "reason": reason,
            "expected": bool(msg.get("expected", False)),
            "stimulus_id": stimulus_id,
            "processing_tasks": len(msg.get("processing-tasks", ()) or ()),
            "lost_computed_tasks": len(msg.get("lost-computed-tasks", ()) or ()),
            "lost_scattered_tasks": len(msg.get("lost-scattered-tasks", ()) or ()),
        }
        if with_cluster:
            detail["with_cluster"] = True
        return self.event("worker-removed", at=at, worker=worker, detail=detail)

    def error(
        self, key: Any, ts: TaskState, group_id: str, kwargs: Mapping[str, Any], *, at: float
    ) -> ErrorRecord | None:
        """The record of a failed task; None once ``max_errors`` are kept."""
        if self.errors_kept >= self.max_errors:
            return None
        self.errors_kept += 1
        traceback_text = kwargs.get("traceback_text") or ""
        limit = self.max_traceback_chars
        if len(traceback_text) > limit:
            traceback_text = "…" + traceback_text[-limit:]  # the innermost frames matter most
        return ErrorRecord(
            id=stable_id(self.cluster_id, "error", key, self.errors_kept),
            cluster_id=self.cluster_id,
            key=str(key),
            at=at,
            group=ts.group.name,
            prefix=ts.prefix.name,
            group_id=group_id,
            worker=kwargs.get("worker"),
            exception=(kwargs.get("exception_text") or "")[: self.max_code_chars],
            traceback=traceback_text,
        )
