"""Which of Dask's spans changed since they were last written, and their records.

A span's record covers its subtree (states, bytes, durations), and its fine metrics
keep arriving with the workers' heartbeats after it finished; so a span is written again
when one of its groups changed, when its own fine metrics changed, or while it runs,
and let go once it is done and its metrics have settled. Dask computes a span's states
and durations over every task group it ever had: a big span's record is paced (taken
again only after a pause in proportion to what it cost last time).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING

from distributed.metrics import time

from daskscope.collector import dask_adapter, snapshot
from daskscope.model import Record, SpanRecord

if TYPE_CHECKING:
    from distributed.scheduler import Scheduler

__all__ = ["SpanTrack", "SpanTracker"]

#: A finished span's fine metrics still arrive with the workers' next heartbeats: keep
#: comparing them for this long after it finished.
SETTLE_SECONDS = 30.0
#: A span record costing t seconds of event loop is taken at most every t times this (a
#: 125 ms record of a 20,000-group span: every 6 s; a 50 µs one: every flush)
PACING = 50


@dataclass(slots=True)
class SpanTrack:
    """What was last written of one span."""

    own_metrics: dict[tuple[Hashable, ...], float]
    done: bool
    written_at: float


class SpanTracker:
    """Remembers what was written of each span; runs on the scheduler's event loop."""

    def __init__(self, cluster_id: str, *, max_code_chars: int) -> None:
        self.cluster_id = cluster_id
        self.max_code_chars = max_code_chars
        #: spans as last written
        self.written: dict[str, SpanTrack] = {}
        #: when a paced span may be taken again; what changed meanwhile waits its turn
        self.due: dict[str, float] = {}
        self.waiting: set[str] = set()

    def snapshot(
        self, scheduler: Scheduler, changed: set[str], records: list[Record], *, paced: bool
    ) -> dict[str, SpanTrack]:
        """Append the records of the spans whose groups (``changed``: span ids), states
        or fine metrics changed; returns what to remember of them once they are written
        (:meth:`remember`). ``paced=False``: every span that changed is taken now."""
        spans = dask_adapter.spans(scheduler)
        if not spans:
            return {}
        # A span's states and durations cover its subtree: a change shows in the ancestors
        for span_id in list(changed):
            span = spans.get(span_id)
            while span is not None:
                changed.add(span.id)
                span = span.parent
        changed |= self.waiting
        self.waiting = set()
        now = time()
        out: dict[str, SpanTrack] = {}
        for span_id, span in list(spans.items()):
            if paced and self.due.get(span_id, 0.0) > now:
                if span_id in changed or span_id not in self.written:
                    self.waiting.add(span_id)
                continue
            track = self.written.get(span_id)
            settled = track is not None and track.done and now - track.written_at > SETTLE_SECONDS
            if settled and span_id not in changed:
                continue
            own = dask_adapter.own_metrics(span)
            metrics_changed = track is None or own != track.own_metrics
            if not (metrics_changed or span_id in changed or track is None or not track.done):
                continue
            started = perf_counter()
            record: SpanRecord = snapshot.span_record(
                span, cluster_id=self.cluster_id, max_code_chars=self.max_code_chars
            )
            self.due[span_id] = now + (perf_counter() - started) * PACING
            records.append(record)
            if metrics_changed:
                records.extend(
                    snapshot.span_metric_records(span_id, own, cluster_id=self.cluster_id)
                )
            written_at = track.written_at if track and track.done and not metrics_changed else now
            out[span_id] = SpanTrack(dict(own), record.done, written_at)
        return out

    def remember(self, tracks: dict[str, SpanTrack]) -> None:
        """The records of :meth:`snapshot` are stored."""
        self.written.update(tracks)

    def forget(self) -> None:
        """Write every span again at the next snapshot (the store was lost)."""
        self.written.clear()
