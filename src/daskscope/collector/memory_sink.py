"""A sink that keeps what it is given in memory: for tests of the recorder, with no
database. It numbers records as every sink does, counts as the others count, and can be
told to fail (``fail``: the error each write raises until it is set back to None)."""

from __future__ import annotations

from collections.abc import Sequence

from daskscope.collector.sink import SinkStats
from daskscope.model import Record, stamp_revisions

__all__ = ["MemorySink"]


class MemorySink:
    def __init__(self, *, fail: BaseException | None = None) -> None:
        #: the error every write raises while set (the records stay with the caller)
        self.fail = fail
        #: the batches written, in order
        self.batches: list[list[Record]] = []
        self.opened = False
        self.closed = False
        self.failures = 0
        self.last_error: str | None = None

    @property
    def records(self) -> list[Record]:
        """Every record written, in order."""
        return [record for batch in self.batches for record in batch]

    def open(self) -> None:
        self.opened = True

    def write(self, records: Sequence[Record]) -> None:
        if self.fail is not None:
            self.failures += 1
            self.last_error = f"{type(self.fail).__name__}: {self.fail}"
            raise self.fail
        stamp_revisions(records)
        self.batches.append(list(records))
        self.last_error = None

    def close(self) -> None:
        self.closed = True

    def stats(self) -> SinkStats:
        return SinkStats(
            kind="memory",
            records_written=sum(len(batch) for batch in self.batches),
            batches_written=len(self.batches),
            failures=self.failures,
            last_error=self.last_error,
        )
