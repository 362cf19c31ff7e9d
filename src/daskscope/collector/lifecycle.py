"""Why a worker left: closed, retired, restarted or lost.

Dask's own ``expected`` flag (in the scheduler's "remove-worker" event) is True only for
``retire_workers``; a cluster's normal close, ``cluster.scale()`` down and
``client.restart()`` all remove workers with ``expected=False``, exactly like a killed
process. So daskscope infers the reason from what the cluster was doing:

- ``retired``: Dask retired the worker (``expected=True``);
- ``restarted``: it left during ``client.restart()``;
- ``closed``: the scheduler is closing, or the worker told the scheduler it was closing
  (its status went to ``closing``/``closing_gracefully``) before it left — a cluster's
  close, a scale-down, a worker's lifetime, Ctrl-C on the worker;
- ``lost``: anything else — the connection dropped or the heartbeats stopped while the
  worker was running (a killed process, a lost host or network).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from distributed.core import Status
from distributed.metrics import time

if TYPE_CHECKING:
    from distributed.scheduler import Scheduler

__all__ = ["REASONS", "WorkerLifecycle"]

REASONS = ("closed", "retired", "restarted", "lost")
_LEAVING = {"closing", "closing_gracefully"}
#: longest a restart may take to bring its workers back (Dask's default timeout is 30 s)
_RESTART_WINDOW = 120.0


class WorkerLifecycle:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._leaving: set[str] = set()
        self._removals: dict[str, dict[str, Any]] = {}
        self._removed: set[str] = set()
        self._restart_until = 0.0
        self._restart_workers = 0

    def observe(self, topic: str, msg: dict[str, Any]) -> str | None:
        """Take what the event log says of workers. Returns the address of a worker that
        starts to leave, ``"*"`` when workers are about to be retired (a LocalCluster's
        close and ``cluster.scale()`` down ask for that before closing any), else None."""
        action = msg.get("action")
        if action == "remove-worker" and topic == "all":
            # Dask tells what a removal cost only through its event log, just before the
            # remove_worker hook runs: keep the message for that hook
            self._removals[msg["worker"]] = msg
        elif action == "retire-workers" and topic == "all":
            return "*"
        elif (
            action == "worker-status-change"
            and msg.get("status") in _LEAVING
            and topic not in self._leaving
        ):
            self._leaving.add(topic)
            return topic
        return None

    def removal_message(self, worker: str) -> dict[str, Any]:
        return self._removals.pop(worker, {})

    def restarting(self, expected_workers: int) -> None:
        self._restart_until = time() + _RESTART_WINDOW
        self._restart_workers = expected_workers

    def arrived(self, workers: int) -> None:
        if self._restart_until and workers >= self._restart_workers:
            self._restart_until = 0.0  # the restart is over once its workers are back

    def reason(self, worker: str, msg: dict[str, Any], *, closing: bool) -> str:
        if msg.get("expected"):
            return "retired"
        if time() < self._restart_until:
            return "restarted"
        scheduler_closing = self.scheduler.status in (Status.closing, Status.closed)
        if closing or scheduler_closing or worker in self._leaving:
            return "closed"
        return "lost"

    def mark_removed(self, worker: str) -> bool:
        """Note a removal; False when this worker's removal was already recorded."""
        self._leaving.discard(worker)
        if worker in self._removed:
            return False
        self._removed.add(worker)
        return True

    def is_removed(self, worker: str) -> bool:
        """Its removal is recorded (it may still be among the scheduler's workers)."""
        return worker in self._removed

    def added(self, worker: str) -> None:
        # an address may come back (a restarted worker on a fixed port)
        self._removed.discard(worker)
