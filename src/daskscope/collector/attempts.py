"""Attempts that Dask retries: kept although Dask drops them.

A task submitted with ``retries=`` whose attempt fails runs again: the scheduler sends it
from ``processing`` back to ``waiting`` (through ``released``) and hands the plugins'
``transition`` hook none of what the worker said — not the attempt's start and stop, its
thread, nor its exception and traceback. The worker's task-erred message carries them.
The recorder sees each such message on its way in (:func:`~daskscope.collector.
dask_adapter.watch_stream`), and when the transition that follows within it is that task
leaving ``processing`` for ``released`` (the same key and stimulus), the attempt is kept:
a task-log row of state "retried", its seconds in its group's durations, and an error
record with its traceback.

Only a worker's task-erred messages and a task's ``processing → released`` (a retry, a
cancelled or lost task) reach this module: nothing is added to a task that ends well.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["AttemptWatch"]


class AttemptWatch:
    """The worker's task-erred message the scheduler is handling, if any."""

    __slots__ = ("message",)

    def __init__(self) -> None:
        self.message: Mapping[str, Any] | None = None

    def seen(self, message: Mapping[str, Any]) -> None:
        """A task-erred message arrived; the scheduler handles it next."""
        self.message = message

    def done(self) -> None:
        """The scheduler has handled it."""
        self.message = None

    def retried(self, key: Any, stimulus_id: Any) -> Mapping[str, Any] | None:
        """The message of the attempt of ``key`` going back to run again, when this
        ``processing → released`` of ``key`` happens in its stimulus (else None: the task
        was released for another reason); each attempt once."""
        message = self.message
        if message is None or message.get("stimulus_id") != stimulus_id:
            return None
        if message.get("key") != key:
            return None
        self.message = None
        return message
