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


def _measured_in(span_ids: list[str], dask_worker: Any) -> list[list[Any]]:
    """What this worker measured in these spans since it started (its cumulative
    digests, which its heartbeats hand over piece by piece), keyed as the scheduler keys
    a span's metrics (the span id left out), as ``[[key parts], value]`` pairs."""
    from distributed.spans import CONTEXTS_WITH_SPAN_ID

    ids = set(span_ids)
    out: dict[tuple[Any, ...], float] = {}
    for key, value in dask_worker.digests_total.items():
        if isinstance(key, tuple) and key[0] in CONTEXTS_WITH_SPAN_ID and key[1] in ids:
            short = (key[0], *key[2:])
            out[short] = out.get(short, 0.0) + value
    return [[list(k), v] for k, v in out.items()]


def _summed(by_worker: dict[Any, list[list[Any]]]) -> dict[tuple[Any, ...], float]:
    """The workers' ``[[key parts], value]`` pairs summed by key, over the workers."""
    out: dict[tuple[Any, ...], float] = {}
    for pairs in by_worker.values():
        for k, v in pairs:
            out[tuple(k)] = out.get(tuple(k), 0.0) + v
    return out


def _all_delivered(wanted: dict[tuple[Any, ...], float], delivered: Any) -> bool:
    """Whether the scheduler's span metrics hold at least what the workers measured
    (up to rounding: the scheduler sums the same numbers in other groupings)."""
    have = {tuple(k): v for k, v in delivered or ()}
    return all(v <= have.get(k, 0.0) * (1 + 1e-9) + 1e-9 for k, v in wanted.items())


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
        """Ask every worker for a heartbeat now, until the scheduler holds all that the
        workers had measured in the run's spans when the wait began and two rounds in a
        row change nothing, or ``timeout`` passes. Quiet alone is not enough: a heartbeat
        that took the metrics a moment before ours may still be on its way while ours
        come back empty. (Tasks still running, e.g. after a failure ended the run, are
        not waited for.)"""
        from distributed.metrics import time

        deadline = time() + timeout

        def watch() -> Any:
            return self.client.run_on_scheduler(remote.watch_metrics, self.collector_id, span)

        last = watch()
        if last is None:  # no task ever ran for this run: nothing to wait for
            return
        ids = self.client.run_on_scheduler(remote.span_subtree_ids, span)
        measured = _summed(self.client.run(_measured_in, ids))
        quiet, delivered = 0, False
        while time() < deadline:
            self.client.run(_heartbeat)
            now = watch()
            quiet = quiet + 1 if now == last else 0
            last = now
            delivered = _all_delivered(measured, now[0])
            if quiet >= 2 and delivered:
                return
        if not delivered:
            logger.warning(
                "daskscope: not all of the workers' fine metrics reached the scheduler "
                "within %.0f s (metrics_timeout): the run's fine metrics may read short",
                timeout,
            )

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
