"""The local backend: coffea's ``IterativeExecutor`` / ``FuturesExecutor``, no Dask.

Resources come from the process tree (this process and its children) sampled with
psutil on a daemon thread. There are no spans and no fine performance metrics: the
keys that need them stay absent and the summary says "not measured".
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil

from daskscope.workflow.backends.base import Backend, SpanMetrics
from daskscope.workflow.tracking import COLLECTOR_ENV

__all__ = ["LocalBackend"]


class LocalBackend(Backend):
    name = "local"
    parser = None

    def __init__(self, client: Any = None, *, cores: int | None = None) -> None:
        # cores: what the run may use (the executor's workers); None: the collector
        # settles it from where the chunks ran, or leaves it unmeasured
        self.cores = cores
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._series: dict[str, Any] = {}
        self._cpu0 = 0.0
        self._cpu_seconds: float | None = None
        self._previous_env: str | None = None
        #: pid -> whether that child is a pool worker (its command line never changes)
        self._is_worker: dict[int, bool] = {}

    def open(self, collector_id: str) -> dict[str, Any]:
        self._previous_env = os.environ.get(COLLECTOR_ENV)
        # Children started during the run (a process pool) inject their chunk records
        os.environ[COLLECTOR_ENV] = collector_id
        return {"backend": self.name, "cores": self.cores}

    def _close_env(self) -> None:
        if self._previous_env is None:
            os.environ.pop(COLLECTOR_ENV, None)
        else:
            os.environ[COLLECTOR_ENV] = self._previous_env

    @contextlib.contextmanager
    def create_span(self, name: str) -> Iterator[None]:
        yield None

    def _tree(self) -> list[psutil.Process]:
        try:
            return [self._proc, *self._proc.children(recursive=True)]
        except psutil.Error:
            return [self._proc]

    def _workers(self, procs: list[psutil.Process]) -> int:
        """Processes that run the work: the pool's workers among the children, else this
        process alone (multiprocessing's and loky's resource trackers, a forkserver and
        unrelated child programs are not workers)."""
        workers = 0
        for proc in procs[1:]:
            worker = self._is_worker.get(proc.pid)
            if worker is None:
                worker = self._is_worker[proc.pid] = _pool_worker(proc)
            workers += worker
        return workers or 1

    def _cpu_total(self) -> float:
        # Our CPU, the CPU of children already waited for, and that of live children
        total = 0.0
        for i, proc in enumerate(self._tree()):
            try:
                t = proc.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system
            if i == 0:
                total += t.children_user + t.children_system
        return total

    def sample(self) -> None:
        s = self._series
        now = time.time()
        procs = self._tree()
        n = len(s["time"])
        s["time"].append(now)
        s["workers"].append(self._workers(procs))
        if self.cores is not None:
            s["threads"].append(self.cores)
        memory = 0
        cpu: list[float] = []
        for proc in procs:
            try:
                with proc.oneshot():
                    rss = proc.memory_info().rss
                    pct = proc.cpu_percent(None)
            except psutil.Error:
                continue
            memory += rss
            cpu.append(pct)
            per = s["per_worker"].setdefault(
                f"pid:{proc.pid}",
                {"memory_bytes": [None] * n, "cpu_percent": [None] * n},
            )
            per["memory_bytes"].append(rss)
            per["cpu_percent"].append(pct)
        for per in s["per_worker"].values():
            for values in per.values():
                if len(values) < n + 1:
                    values.append(None)
        s["memory_bytes"].append(memory)
        s["cpu_percent"].append(sum(cpu) / len(cpu) if cpu else None)

    def start_tracking(self, interval: float | None) -> None:
        self._cpu0 = self._cpu_total()
        self._series = {
            "time": [], "workers": [], "threads": [], "memory_bytes": [],
            "cpu_percent": [], "per_worker": {},
        }  # fmt: skip
        if not interval:
            return
        self.sample()
        self._thread = threading.Thread(
            target=self._loop, args=(interval,), name="daskscope-local-tracking", daemon=True
        )
        self._thread.start()

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            with contextlib.suppress(Exception):
                self.sample()

    def stop_tracking(self) -> dict[str, Any]:
        self._cpu_seconds = self._cpu_total() - self._cpu0
        self._close_env()
        if self._thread is None:
            return {}
        self._stop.set()
        self._thread.join()
        self.sample()
        return self._series

    def get_span_metrics(self, span: Any) -> SpanMetrics:
        return {}

    def supports_fine_metrics(self) -> bool:
        return False

    def finish_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"cores": self.cores}
        if self._cpu_seconds is not None:
            info["process_cpu_seconds"] = self._cpu_seconds
        return info

    def capabilities(self) -> set[str]:
        caps = {"chunks", "process_cpu"}
        if self._thread is not None:
            caps |= {"tracking", "workers", "memory", "cpu"}
        return caps


#: Command-line marks of a pool worker started by spawn (multiprocessing, loky)
_WORKER_MARKS = ("multiprocessing.spawn", "--multiprocessing-fork", "loky.backend.popen_loky")


def _pool_worker(proc: psutil.Process) -> bool:
    """Whether a child process is a pool worker: spawned as one (its command line says
    so), or forked from its parent (same command line: fork and forkserver pools).
    Helpers (resource trackers, the forkserver itself) are started with a command line of
    their own."""
    try:
        cmdline = proc.cmdline()
        if any(mark in arg for arg in cmdline for mark in _WORKER_MARKS):
            return True
        parent = proc.parent()
        return parent is not None and parent.cmdline() == cmdline
    except psutil.Error:
        return False
