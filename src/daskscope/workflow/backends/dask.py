"""The Dask backend: spans for fine metrics, scheduler-side sampling and chunk routing."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any, ClassVar

from daskscope.workflow import metrics as m
from daskscope.workflow.backends import scheduler_side as remote
from daskscope.workflow.backends.base import Backend, SpanMetrics

__all__ = ["DaskBackend"]

logger = logging.getLogger("daskscope")


async def _heartbeat(dask_worker: Any) -> None:
    # Hands the worker's fine metrics to the scheduler now instead of at its next beat
    await dask_worker.heartbeat()


class DaskBackend(Backend):
    name = "dask"
    # mypy takes a callable class attribute for a method (self bound): ignore that
    parser: ClassVar = staticmethod(m.parse_fine_metrics)  # type: ignore[assignment]
    receives_dask_chunks = True

    def __init__(self, client: Any) -> None:
        self.client = client
        self.collector_id = ""
        #: enclosing collectors on this scheduler (set by the collector before start)
        self.parents: list[str] = []
        self.span_id: str | None = None
        self._interval: float | None = None
        self._finished: dict[str, Any] | None = None

    def open(self, collector_id: str) -> dict[str, Any]:
        self.collector_id = collector_id
        return {"backend": self.name}

    @contextlib.contextmanager
    def create_span(self, name: str) -> Iterator[str]:
        from distributed import span

        from daskscope.workflow.delivery import WORKFLOW_SPAN

        # workers send chunk records only from tasks under this tag (delivery.receivable)
        with span(WORKFLOW_SPAN, name) as span_id:
            self.span_id = span_id
            yield span_id

    def start_tracking(self, interval: float | None) -> None:
        assert self.span_id is not None, "create_span comes first"
        self._interval = interval
        self.info = self.client.run_on_scheduler(
            remote.start_run,
            self.collector_id,
            self.span_id,
            interval,
            self.parents,
            getattr(self.client, "id", None),
        )

    def stop_tracking(self) -> dict[str, Any]:
        self._finished = self.client.run_on_scheduler(remote.finish_run, self.collector_id)
        return self._finished["samples"] if self._interval else {}

    def _metrics(self, span_id: str) -> SpanMetrics | None:
        pairs = self.client.run_on_scheduler(remote.span_metrics, span_id)
        return None if pairs is None else {tuple(k): v for k, v in pairs}

    def wait_for_metrics(self, span: Any, timeout: float) -> None:
        """Ask every worker for a heartbeat now, until two rounds in a row change nothing
        (a periodic heartbeat may be in flight beside ours), or ``timeout`` passes."""
        from distributed.metrics import time

        deadline = time() + timeout

        def watch() -> Any:
            return self.client.run_on_scheduler(remote.watch_metrics, self.collector_id, span)

        last = watch()
        if last is None:  # no task ever ran for this run: nothing to wait for
            return
        quiet = 0
        while time() < deadline and quiet < 2:
            self.client.run(_heartbeat)
            now = watch()
            quiet = quiet + 1 if now == last else 0
            last = now

    def get_span_metrics(self, span: Any) -> SpanMetrics:
        finished_span = (self._finished or {}).get("span") or {}
        if finished_span.get("incomplete"):
            # Some of the run's work sits in spans shared with another open run: the
            # fine metrics cannot be told apart, so they are not measured
            logger.warning(
                "daskscope: fine metrics not measured: this run's tasks joined task groups "
                "of other spans (%s) that another open run shares",
                ", ".join(finished_span["incomplete"]),
            )
            return {}
        if finished_span:
            pairs = finished_span["metrics"]
        else:
            pairs = self.client.run_on_scheduler(remote.span_metrics, span) or []
        return {tuple(k): v for k, v in pairs}

    def supports_fine_metrics(self) -> bool:
        return True

    def collect_chunks(self) -> list[dict[str, Any]]:
        return list(self._finished["chunks"]) if self._finished else []

    def finish_info(self) -> dict[str, Any]:
        finished = self._finished or {}
        span = finished.get("span") or {}
        return {
            "cluster_id": self.info.get("cluster_id"),
            "scheduler_address": self.info.get("scheduler_address"),
            "database": self.info.get("database"),
            "server": self.info.get("server"),
            "cores": self.info.get("threads"),
            "span_id": self.span_id,
            "span_name": span.get("name"),
            "span_subtree": span.get("subtree", []),
            "span_borrowed_from": span.get("borrowed_from", []),
            "span_incomplete": span.get("incomplete", []),
            "computations": finished.get("computations", []),
        }

    def capabilities(self) -> set[str]:
        caps = {"fine_metrics", "chunks"}
        if self._interval:
            caps |= {"tracking", "workers", "memory", "cpu", "active_tasks"}
        return caps
