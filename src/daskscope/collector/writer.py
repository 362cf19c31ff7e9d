"""The collector's writer: one thread that runs the sink's calls in order.

Not ``concurrent.futures.ThreadPoolExecutor``: its pools refuse new work as soon as the
interpreter starts to exit, and that is exactly when a script that never closed its
client gets its LocalCluster closed by Dask's own exit hook — the moment the cluster's
last records must be written.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["WriterThread"]


class WriterThread:
    def __init__(self, name: str = "daskscope-writer") -> None:
        self._queue: queue.SimpleQueue[
            tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None
        ] = queue.SimpleQueue()
        # a daemon thread lives on through the interpreter's exit hooks
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._queue.put((future, fn, args))
        return future

    def shutdown(self) -> None:
        """Stop after what is queued; does not wait."""
        self._queue.put(None)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)
