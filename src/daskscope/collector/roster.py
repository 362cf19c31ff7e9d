"""The workers as they come and go: their arrival and departure events (with the GPU a
worker has, when it says), the capacity they bring or take away, and their samples
(kept as the newest, for the workflow's scheduler side to reuse)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from distributed.core import Status
from distributed.metrics import time

from daskscope.collector.workers import gpu_info, monitors_gpu, startup_gpu, worker_sample
from daskscope.model import EventRecord, WorkerSampleRecord

if TYPE_CHECKING:
    from distributed.scheduler import Scheduler

    from daskscope.collector.accounting import Accounting
    from daskscope.collector.events import EventLog
    from daskscope.collector.flushing import Flusher
    from daskscope.collector.lifecycle import WorkerLifecycle

__all__ = ["GPU_ASK_TIMEOUT", "WorkerRoster", "wait_for_heartbeats"]

logger = logging.getLogger(__name__)

#: longest a worker may take to tell its GPU's name (asked once, off the sampling round)
GPU_ASK_TIMEOUT = 10.0


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
        #: each worker's arrival event, while it is here: the GPU it reports later (its
        #: system monitor's) is written into it again
        self.arrivals: dict[str, EventRecord] = {}
        #: workers asked for their GPU, and the questions under way
        self._gpu_asked: set[str] = set()
        self._asking: set[asyncio.Task[None]] = set()

    def added(self, worker: str, *, at: float, detail: dict[str, Any] | None = None) -> None:
        workers = self.scheduler.workers
        ws = workers.get(worker)
        self.accounting.workers_changed(workers.values(), at)
        gpu = startup_gpu(ws) if ws is not None else None
        if gpu is not None:
            detail = {**(detail or {}), "gpu": gpu}
        record = self.events.worker_added(worker, ws, at=at, detail=detail)
        self.arrivals[worker] = record
        self._gpu_asked.discard(worker)
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
        self.arrivals.pop(worker, None)
        self._gpu_asked.discard(worker)
        # a closing scheduler still lists the workers recorded as gone before this one
        # (the plugin removes them one by one): they hold nothing any more
        lifecycle = self.lifecycle
        remaining = [
            ws
            for addr, ws in self.scheduler.workers.items()
            if addr != worker and not lifecycle.is_removed(addr)
        ]
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
        self._ask_new_gpus()

    def _ask_new_gpus(self) -> None:
        """A worker whose system monitor reports a GPU it did not name at its start is
        asked once for the GPU's name and total memory (its ``get_monitor_info``)."""
        asked = self._gpu_asked
        for address, ws in self.scheduler.workers.items():
            if address in asked or not monitors_gpu(ws):
                continue
            if self.scheduler.status != Status.running:
                return  # closing: the workers are about to go
            asked.add(address)
            arrival = self.arrivals.get(address)
            if arrival is None or "gpu" in arrival.detail:
                continue
            task = asyncio.get_running_loop().create_task(self._ask_gpu(address, arrival))
            self._asking.add(task)
            task.add_done_callback(self._asking.discard)

    async def _ask_gpu(self, address: str, arrival: EventRecord) -> None:
        try:
            info = await asyncio.wait_for(
                self.scheduler.rpc(address).get_monitor_info(recent=True), GPU_ASK_TIMEOUT
            )
        except Exception as exc:  # a worker leaving, or an older one: no name
            logger.debug("daskscope: %s did not tell its GPU: %r", address, exc)
            return
        gpu = gpu_info(info.get("gpu_name"), info.get("gpu_memory_total"))
        if gpu is None or self.arrivals.get(address) is not arrival:
            return
        # the arrival again, with its GPU: a newer revision of the same row
        arrival.detail = {**arrival.detail, "gpu": gpu}
        self.flusher.keep(arrival)

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
