"""The workers as they come and go: their arrival and departure events, the capacity
they bring or take away, and their samples (kept as the newest, for the workflow's
scheduler side to reuse)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from distributed.metrics import time

from daskscope.collector.workers import worker_sample
from daskscope.model import WorkerSampleRecord

if TYPE_CHECKING:
    from distributed.scheduler import Scheduler

    from daskscope.collector.accounting import Accounting
    from daskscope.collector.events import EventLog
    from daskscope.collector.flushing import Flusher
    from daskscope.collector.lifecycle import WorkerLifecycle

__all__ = ["WorkerRoster", "wait_for_heartbeats"]


class WorkerRoster:
    """Turns workers arriving, leaving and being sampled into records and accounts."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        cluster_id: str,
        accounting: Accounting,
        events: EventLog,
        lifecycle: WorkerLifecycle,
        flusher: Flusher,
    ) -> None:
        self.scheduler = scheduler
        self.cluster_id = cluster_id
        self.accounting = accounting
        self.events = events
        self.lifecycle = lifecycle
        self.flusher = flusher
        #: the newest samples of every worker, with their time
        self.latest: tuple[float, list[WorkerSampleRecord]] = (0.0, [])

    def added(self, worker: str, *, at: float, detail: dict[str, Any] | None = None) -> None:
        workers = self.scheduler.workers
        self.accounting.workers_changed(workers.values(), at)
        record = self.events.worker_added(worker, workers.get(worker), at=at, detail=detail)
        self.flusher.keep(record)

    def removed(
        self,
        worker: str,
        *,
        at: float,
        reason: str,
        msg: Mapping[str, Any],
        stimulus_id: str | None,
        with_cluster: bool = False,
    ) -> None:
        if not self.lifecycle.mark_removed(worker):
            return  # already recorded (e.g. at the scheduler's close)
        remaining = [ws for addr, ws in self.scheduler.workers.items() if addr != worker]
        self.accounting.workers_changed(remaining, at)
        record = self.events.worker_removed(
            worker,
            at=at,
            reason=reason,
            msg=msg,
            stimulus_id=stimulus_id,
            with_cluster=with_cluster,
        )
        self.flusher.keep(record)

    def leaving(self, worker: str) -> None:
        """Sample the workers about to leave while they are here (``"*"``: all of them,
        not yet known which; else the one that said it is closing)."""
        workers = self.scheduler.workers
        if worker == "*":
            leaving = list(workers.values())
        else:
            leaving = [workers[worker]] if worker in workers else []
        now = time()
        for ws in leaving:
            self.flusher.add(worker_sample(ws, cluster_id=self.cluster_id, at=now))

    def sample(self) -> None:
        """A sampling round: every worker's sample, for the store."""
        now = time()
        self.accounting.advance(now)
        samples = self._take(now)
        self.flusher.buffer += samples

    def samples(self, max_age: float, *, after: float = 0.0) -> list[WorkerSampleRecord]:
        """Every worker's sample, at most ``max_age`` seconds old and taken after
        ``after``: the newest if it is, else taken now (not stored: only sampling rounds
        are)."""
        at, samples = self.latest
        now = time()
        fresh = at > after and now - at <= max_age
        if fresh and len(samples) == len(self.scheduler.workers):
            return samples
        return self._take(now)

    def _take(self, now: float) -> list[WorkerSampleRecord]:
        samples = [
            worker_sample(ws, cluster_id=self.cluster_id, at=now)
            for ws in self.scheduler.workers.values()
        ]
        self.latest = (now, samples)
        return samples


async def wait_for_heartbeats(scheduler: Scheduler, timeout: float, beats: int = 2) -> None:
    """Wait until every worker has sent ``beats`` heartbeats after this call (the fine
    metrics of tasks that just finished come with them), at most ``timeout`` seconds."""
    deadline = time() + timeout
    seen = {addr: [ws.last_seen, 0] for addr, ws in scheduler.workers.items()}
    while time() < deadline:
        pending = False
        for addr, state in seen.items():
            ws = scheduler.workers.get(addr)
            if ws is None:
                continue
            if ws.last_seen != state[0]:
                state[0], state[1] = ws.last_seen, state[1] + 1
            if state[1] < beats:
                pending = True
        if not pending:
            return
        await asyncio.sleep(0.02)
