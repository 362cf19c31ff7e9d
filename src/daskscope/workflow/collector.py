"""``MetricsCollector``: measure one workflow run, end to end.

Thin on purpose: a backend does the measuring (Dask: a span, a scheduler-side sampler
and chunk router; local: psutil), ``metrics`` derives the numbers, ``persist`` saves,
``summary``/``plots`` show, ``storage`` writes the run into the daskscope store.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from daskscope.workflow import tracking
from daskscope.workflow.backends.base import Backend, get_backend
from daskscope.workflow.metrics import (
    DerivedMetric,
    aggregate_sections,
    derived_metrics,
    workflow_metrics,
)
from daskscope.workflow.run import WorkflowRun

__all__ = ["MetricsCollector"]

logger = logging.getLogger("daskscope")


def _set_tracking(flag: bool) -> None:
    tracking.set_enabled(flag)


class MetricsCollector:
    """Measure the work done inside ``with MetricsCollector(...):``.

    ``client``: a Dask client (Dask backend) or None (local backend: coffea's
    ``IterativeExecutor``/``FuturesExecutor``). ``processor_instance``: the coffea
    processor, whose tasks are the "processor" side of the processor/overhead split.
    ``worker_tracking_interval``: seconds between resource samples (None: no sampling).
    ``enabled=False`` turns every measurement off, ``@track_metrics`` included.
    ``store``: write the run into the daskscope store (``database``: its URL; default the
    store of the cluster's recorder, else the configured one).
    """

    def __init__(
        self,
        client: Any = None,
        *,
        processor_instance: Any = None,
        name: str | None = None,
        backend: str | Backend | None = None,
        worker_tracking_interval: float | None = 1.0,
        enabled: bool = True,
        store: bool = True,
        database: str | None = None,
        metrics_timeout: float = 10.0,
        derived_metrics: Iterable[DerivedMetric] = (),
        cores: int | None = None,
    ) -> None:
        self.client = client
        self.processor_instance = processor_instance
        self.name = name or (
            type(processor_instance).__name__ if processor_instance else "workflow"
        )
        self.enabled = enabled
        self.worker_tracking_interval = worker_tracking_interval
        self.store = store
        self.database = database
        self.metrics_timeout = metrics_timeout
        self._derived = list(derived_metrics)
        self.id = uuid.uuid4().hex
        if isinstance(backend, Backend):
            self.backend: Backend | None = backend
        elif enabled:
            kind = backend or ("dask" if client is not None else "local")
            cls = get_backend(kind)
            self.backend = cls(client) if kind == "dask" else cls(client, cores=cores)  # type: ignore[call-arg]
        else:
            self.backend = None
        self.run: WorkflowRun | None = None
        self._chunks: dict[str, dict[str, Any]] = {}
        self._report: dict[str, Any] | None = None
        self._store_thread: Any = None
        self._store_error: BaseException | None = None
        self.run_id: str | None = None

    # -- the run ------------------------------------------------------------------------

    def __enter__(self) -> MetricsCollector:
        if not self.enabled:
            self._previous_switch = tracking.is_enabled()
            _set_tracking(False)
            if self.client is not None:
                self.client.run(_set_tracking, False)
            self._started_at = time.time()
            self._t0 = time.perf_counter()
            return self
        assert self.backend is not None
        entered = time.perf_counter()
        self._info: dict[str, Any] = dict(self.backend.open(self.id))
        self._span_cm = self.backend.create_span(self.name)
        self._span = self._span_cm.__enter__()
        try:
            self.backend.start_tracking(self.worker_tracking_interval)
        except BaseException:
            self._span_cm.__exit__(None, None, None)
            raise
        # In-process chunks (IterativeExecutor) come straight to us
        self._receiver_token = tracking.local_receiver.set(self._receive)
        # The clock starts after our own setup and stops before our exit work
        self._started_at = time.time()
        self._t0 = time.perf_counter()
        self._info["enter_s"] = self._t0 - entered
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._t0
        stopped_at = self._started_at + wall
        if not self.enabled:
            _set_tracking(self._previous_switch)
            if self.client is not None:
                self.client.run(_set_tracking, self._previous_switch)
            return
        assert self.backend is not None
        tracking.local_receiver.reset(self._receiver_token)
        self._span_cm.__exit__(None, None, None)
        try:
            if self.backend.supports_fine_metrics():
                self.backend.wait_for_metrics(self._span, self.metrics_timeout)
            series = self.backend.stop_tracking()
            for record in self.backend.collect_chunks():
                self._add_chunk(record)
            span_metrics = self.backend.get_span_metrics(self._span)
            self._info.update(self.backend.finish_info())
            self._info["capabilities"] = sorted(self.backend.capabilities())
        except Exception:
            logger.warning("daskscope: finishing the workflow measurement failed", exc_info=True)
            series, span_metrics = {}, {}
        self.run = WorkflowRun(
            run_id=self.id,
            name=self.name,
            backend=self.backend.name,
            started_at=self._started_at,
            stopped_at=stopped_at,
            wall_time_s=wall,
            tracking_data=series,
            span_metrics=span_metrics,
            info=self._info,
        )
        self._refresh()
        if self.store:
            self._store_in_background()
        # the collector's own exit work, outside wall_time_s (the store writes in background)
        self.run.info["exit_s"] = time.perf_counter() - self._t0 - wall

    # -- chunk records ----------------------------------------------------------------

    def _receive(self, record: dict[str, Any]) -> None:
        self._add_chunk(record)

    def _add_chunk(self, record: Mapping[str, Any]) -> None:
        chunk = tracking._plain(dict(record))
        self._chunks[chunk.get("chunk_id") or uuid.uuid4().hex] = chunk

    def extract_metrics_from_output(self, output: Any) -> Any:
        """Take the chunk records that rode along in ``output`` (process pools without
        Dask) and remove them; the rest of the output is left as it was."""
        if isinstance(output, tuple) and output and isinstance(output[0], dict):
            self.extract_metrics_from_output(output[0])
            return output
        if isinstance(output, dict) and tracking.INJECT_KEY in output:
            for record in output.pop(tracking.INJECT_KEY) or []:
                if record.get("collector_id") in (None, self.id):
                    self._add_chunk(record)
            if self.run is not None:
                self._refresh()
        return output

    def set_coffea_report(self, report: Mapping[str, Any]) -> None:
        """Use coffea's report (``savemetrics=True``) for events, bytes and chunks."""
        from daskscope.workflow.coffea import report_to_plain

        self._report = report_to_plain(report)
        if self.run is not None:
            self._refresh()

    # -- derived results --------------------------------------------------------------

    def _processor_prefixes(self) -> set[str]:
        prefixes = {c["task_prefix"] for c in self._chunks.values() if c.get("task_prefix")}
        if self.processor_instance is not None:
            from daskscope.workflow.coffea import processor_prefixes

            prefixes |= processor_prefixes(self.processor_instance)
        return prefixes

    def _refresh(self) -> None:
        run = self.run
        assert run is not None
        run.chunk_metrics = sorted(
            self._chunks.values(), key=lambda c: (c.get("started_at") or 0, c.get("chunk_id"))
        )
        run.coffea_report = self._report
        prefixes = self._processor_prefixes()
        run.info["processor_prefixes"] = sorted(prefixes)
        run.sections = aggregate_sections(run.chunk_metrics)
        run.metrics = workflow_metrics(
            wall_time_s=run.wall_time_s,
            chunks=run.chunk_metrics,
            report=self._report,
            span_metrics=run.span_metrics,
            parser=type(self.backend).parser if self.backend is not None else None,
            tracking=run.tracking_data,
            info=run.info,
            processor_prefixes=prefixes,
            derived=[*derived_metrics(), *self._derived],
        )

    def _finished(self) -> WorkflowRun:
        if self.run is None:
            raise RuntimeError(
                "no measurement yet: use the collector as `with MetricsCollector(...):` "
                "around the run (or load one with MetricsCollector.load(path))"
            )
        return self.run

    @property
    def metrics(self) -> dict[str, Any]:
        return self._finished().metrics

    @property
    def chunk_metrics(self) -> list[dict[str, Any]]:
        return self._finished().chunk_metrics

    @property
    def tracking_data(self) -> dict[str, Any]:
        return self._finished().tracking_data

    @property
    def span_metrics(self) -> dict[tuple, float]:
        return self._finished().span_metrics

    @property
    def sections(self) -> dict[str, dict[str, Any]]:
        return self._finished().sections

    # -- outputs ----------------------------------------------------------------------

    def print_summary(self, console: Any = None) -> None:
        from daskscope.workflow.summary import print_summary

        print_summary(self._finished(), console=console)

    def save(self, path: str | os.PathLike[str]) -> Any:
        from daskscope.workflow.persist import save_run

        return save_run(self._finished(), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MetricsCollector:
        """A finished collector from a saved run (summary, plots and metrics work)."""
        from daskscope.workflow.persist import load_run

        collector = cls(enabled=False, store=False)
        collector.run = load_run(path)
        collector.id = collector.run.run_id
        collector.name = collector.run.name
        return collector

    def plot(self, kind: str, **kwargs: Any) -> Any:
        """One of the figures of :mod:`daskscope.workflow.plots` by name."""
        from daskscope.workflow import plots

        return plots.PLOTS[kind](self._finished(), **kwargs)

    # -- the store ----------------------------------------------------------------------

    def _store_in_background(self) -> None:
        import threading

        from daskscope.workflow import storage

        run = self._finished()
        database = self.database or self._info.get("database")
        self.run_id = run.run_id

        def write() -> None:
            try:
                storage.store_run(run, database)
            except BaseException as exc:
                self._store_error = exc
                logger.warning("daskscope: storing workflow run %s failed: %s", run.run_id, exc)

        # Off the user's path: opening the store may import SQLAlchemy and migrate
        self._store_thread = threading.Thread(target=write, name="daskscope-store-run")
        self._store_thread.start()
        storage.pending.append(self._store_thread)

    def wait_stored(self, timeout: float | None = 60.0) -> str:
        """Wait until the run is in the store; returns its id (raises what failed)."""
        if self._store_thread is None:
            raise RuntimeError("this run is not being stored (store=False or not finished)")
        self._store_thread.join(timeout)
        if self._store_thread.is_alive():
            raise TimeoutError(f"storing run {self.run_id} did not finish in {timeout} s")
        if self._store_error is not None:
            raise self._store_error
        return self._finished().run_id
