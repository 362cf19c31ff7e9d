"""An on-disk queue of batches that could not be delivered yet.

One file per batch, named by a sequence number so that delivery keeps the order in which
batches were made, also across a restart of the scheduler process. Files are written to
a temporary name and renamed, so a crash never leaves half a batch behind. Several
schedulers of one user may share the directory: names never clash, and one drains at a
time (a later snapshot must never be overtaken by an earlier one).

Nothing here is ever deleted except a batch the server took: a batch the server refused
for good is kept as ``.rejected``, and an entry that cannot be a batch of ours (a stray
file or folder with a ``.batch`` name, one that cannot be read) as ``.unreadable``, for
a human to look at with ``daskscope spool ls``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["REJECTED", "UNREADABLE", "WAITING", "Spool", "entries"]

_SUFFIX = ".batch"
#: the states of an entry, by the suffix of its name
WAITING, REJECTED, UNREADABLE = _SUFFIX, ".rejected", ".unreadable"
_OURS = re.compile(r"^\d{12}-[0-9a-f]{12}\.batch$")


class Spool:
    """Raises OSError when the directory cannot be made or is not a directory."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.set_aside_strays()
        numbers = [int(p.name.split("-", 1)[0]) for p in self._files()]
        self._next = max(numbers, default=0) + 1
        self._tag = uuid.uuid4().hex[:12]

    def _files(self) -> list[Path]:
        return sorted(p for p in self.directory.glob(f"*{_SUFFIX}") if _OURS.match(p.name))

    def set_aside_strays(self) -> list[Path]:
        """Rename what has a ``.batch`` name but is no batch of ours (a folder, a file
        named otherwise): it would stop the queue. Returns the new names."""
        moved = []
        for path in self.directory.glob(f"*{_SUFFIX}"):
            if not _OURS.match(path.name) or not path.is_file():
                moved.append(self.set_aside(path))
        return moved

    def put(self, payload: bytes) -> Path:
        path = self.directory / f"{self._next:012d}-{self._tag}{_SUFFIX}"
        self._next += 1
        tmp = path.with_suffix(".tmp")
        try:
            with tmp.open("wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)  # half a batch is nobody's
            raise
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
        return _rename(path, path.with_suffix(REJECTED))

    @staticmethod
    def set_aside(path: Path) -> Path:
        """Keep an entry that cannot be read or is no batch of ours, renamed out of the
        queue (never deleted: it may be someone's data)."""
        return _rename(path, path.with_name(path.name + UNREADABLE))


def entries(directory: str | Path) -> list[tuple[str, Path]]:
    """Every entry of a spool with its state (WAITING, REJECTED, UNREADABLE), oldest
    first; reads only (a missing folder has none)."""
    found = []
    for state in (WAITING, REJECTED, UNREADABLE):
        found += [(state, p) for p in Path(directory).glob(f"*{state}")]
    return sorted(found, key=lambda item: item[1].name)


def _rename(path: Path, target: Path) -> Path:
    stem, suffix, n = target.stem, target.suffix, 1
    while target.exists():  # an earlier entry of that name: keep both
        target = target.with_name(f"{stem}.{n}{suffix}")
        n += 1
    with contextlib.suppress(FileNotFoundError):  # another process got there first
        path.replace(target)
    return target
