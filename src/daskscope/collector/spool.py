"""An on-disk queue of batches that could not be delivered yet.

One file per batch, named by a sequence number so that delivery keeps the order in which
batches were made, also across a restart of the scheduler process. Files are written to
a temporary name and renamed, so a crash never leaves half a batch behind. Several
schedulers of one user may share the directory: names never clash, and one drains at a
time (a later snapshot must never be overtaken by an earlier one).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["Spool"]

_SUFFIX = ".batch"
_REJECTED = ".rejected"


class Spool:
    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        numbers = [int(p.name.split("-", 1)[0]) for p in self._files()]
        self._next = max(numbers, default=0) + 1
        self._tag = uuid.uuid4().hex[:12]

    def _files(self) -> list[Path]:
        return sorted(self.directory.glob(f"*{_SUFFIX}"))

    def put(self, payload: bytes) -> Path:
        path = self.directory / f"{self._next:012d}-{self._tag}{_SUFFIX}"
        self._next += 1
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
        return path

    def pending(self) -> list[Path]:
        """Batches waiting for delivery, oldest first."""
        return self._files()

    def __len__(self) -> int:
        return len(self._files())

    @contextlib.contextmanager
    def draining(self) -> Iterator[bool]:
        """Yields True when this process may drain now, False when another one does."""
        with (self.directory / "drain.lock").open("a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @staticmethod
    def delivered(path: Path) -> None:
        path.unlink(missing_ok=True)

    @staticmethod
    def reject(path: Path) -> Path:
        """Keep a batch the server refused for good beside the queue, for a human to read."""
        target = path.with_suffix(_REJECTED)
        with contextlib.suppress(FileNotFoundError):  # another process got there first
            path.replace(target)
        return target
