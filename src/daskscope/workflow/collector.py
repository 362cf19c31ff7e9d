"""``MetricsCollector``: measure one workflow run, end to end.

(Over 400 lines: one class whose lifecycle — enter, exit, chunks, results, the store
write — reads best whole; its parts live in ``setup``, ``route``, ``delivery``.)

Thin on purpose: a backend does the measuring (Dask: a span, a scheduler-side sampler
and chunk router; local: psutil), ``metrics`` derives the numbers, ``persist`` saves,
``summary``/``plots`` show, ``storage`` writes the run into the daskscope store.
"""

from __future__ import annotations

import contextvars
import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from daskscope.workflow import delivery, route, tracking
from daskscope.workflow.backends.base import Backend
from daskscope.workflow.chunk import Chunk
from daskscope.workflow.metrics import (
    DerivedMetric,
    aggregate_sections,
    custom_dataset_metrics,
    dataset_metrics,
    derived_metrics,
    with_custom_metrics,
    workflow_metrics,
)
from daskscope.workflow.run import WorkflowRun
from daskscope.workflow.setup import executor_facts, make_backend

__all__ = ["MetricsCollector"]

logger = logging.getLogger("daskscope")


def _set_tracking(flag: bool) -> None:
    tracking.set_enabled(flag)


#: The innermost collector entered in this thread/task: a collector entered inside
#: another one is nested in it (and passes its chunks on to it)
_active: contextvars.ContextVar[MetricsCollector | None] = contextvars.ContextVar(
    "daskscope_collector", default=None
)
_ERROR_CHARS = 2000


class MetricsCollector:
    """Measure the work done inside ``with MetricsCollector(...):``.

    ``client``: a Dask client (Dask backend) or None (local backend: coffea's
    ``IterativeExecutor``/``FuturesExecutor``). ``processor_instance``: the coffea
    processor, whose tasks are the "processor" side of the processor/overhead split.
    ``worker_tracking_interval``: seconds between resource samples (None: no sampling);
    ``track_workers=False`` turns the sampling off too (roastcoffea's name).
    ``enabled=False`` turns every measurement off, ``@track_metrics`` included.
    ``store``: write the run into the daskscope store (``database``: its URL; default the
    store of the cluster's recorder, else the configured one). ``executor``: the coffea
    executor of the run; a ``DaskExecutor`` gives the client, a ``FuturesExecutor`` the
    number of cores (its ``workers``). ``backend_options``: constructor arguments of a
    registered third-party backend.

    On coffea's dask-awkward path (``process()`` builds a graph on the client, no chunks)
    the run is handed over to that path's measurement
    (:class:`~daskscope.workflow.awkward.AwkwardMetricsCollector`'s figures), with a
    warning saying what to pass for the rest.
    """

    #: always measured as coffea's dask-awkward path (``AwkwardMetricsCollector``)
    dask_awkward_path: ClassVar[bool] = False

    def __init__(
        self,
        client: Any = None,
        *,
        processor_instance: Any = None,
        name: str | None = None,
        backend: str | Backend | None = None,
        worker_tracking_interval: float | None = 1.0,
        track_workers: bool = True,
        enabled: bool = True,
        store: bool = True,
        database: str | None = None,
        metrics_timeout: float = 10.0,
        derived_metrics: Iterable[DerivedMetric] = (),
        cores: int | None = None,
        executor: Any = None,
        backend_options: Mapping[str, Any] | None = None,
    ) -> None:
        if executor is not None:
            executor_client, executor_cores = executor_facts(executor)
            client = client if client is not None else executor_client
            cores = cores if cores is not None else executor_cores
        self.client = client
        self.cores = cores
        self.processor_instance = processor_instance
        self.name = name or (
            type(processor_instance).__name__ if processor_instance else "workflow"
        )
        self.enabled = enabled
        self.worker_tracking_interval = worker_tracking_interval if track_workers else None
        self.store = store
        self.database = database
        self.metrics_timeout = metrics_timeout
        self._derived = list(derived_metrics)
        self.id = uuid.uuid4().hex
        self._backend_name: str | None = None
        if isinstance(backend, Backend):
            self.backend: Backend | None = backend
        elif enabled:
            kind = backend or ("dask" if client is not None else "local")
            self.backend = make_backend(kind, client, cores, backend_options)
            self._backend_name = kind
        else:
            self.backend = None
        if self.backend is not None and self._backend_name is None:
            self._backend_name = self.backend.name
        self.run: WorkflowRun | None = None
        self._chunks: dict[str, Chunk] = {}
        self._report: dict[str, Any] | None = None
        self._custom: dict[str, dict[str, Any]] = {}
        self._store_thread: Any = None
        self._store_error: BaseException | None = None
        self.run_id: str | None = None
        self._parent: MetricsCollector | None = None
        self._open = False
        self._listener: Any = None
        # coffea's dask-awkward path: graphs built by tracked calls, the task prefixes of
        # the graphs seen ({prefix: read | processor | overhead}), uproot's report rows
        self._graphs_built = 0
        self._kinds: dict[str, str] = {}
        self._rows: list[dict[str, Any]] | None = None

    # -- the run ------------------------------------------------------------------------

    def __enter__(self) -> MetricsCollector:
        self._parent = _active.get()
        self._active_token = _active.set(self)
        if not self.enabled:
            self._previous_switch = tracking.is_enabled()
            _set_tracking(False)
            self._set_processor_flag(False)
            if self.client is not None:
                self.client.run(_set_tracking, False)
            self._started_at = time.time()
            self._t0 = time.perf_counter()
            return self
        assert self.backend is not None
        entered = time.perf_counter()
        self._info: dict[str, Any] = dict(self.backend.open(self.id))
        if self._parent is not None:
            self._info["nested_in"] = self._parent.id
            if hasattr(self.backend, "parents"):
                self.backend.parents = self._ancestors()
        span_cm = self.backend.create_span(self.name)
        # A backend without spans may return None (or a plain value) instead of a
        # context manager
        if span_cm is not None and hasattr(span_cm, "__enter__"):
            self._span_cm: Any = span_cm
            self._span = span_cm.__enter__()
        else:
            self._span_cm, self._span = None, span_cm
        try:
            self.backend.start_tracking(self.worker_tracking_interval)
        except BaseException:
            if self._span_cm is not None:
                self._span_cm.__exit__(None, None, None)
            raise
        self._attach_processor()
        # In-process chunks (IterativeExecutor) come straight to us
        self._receiver_token = delivery.local_receiver.set(self._receive)
        self._open = True
        # The clock starts after our own setup and stops before our exit work
        self._started_at = time.time()
        self._t0 = time.perf_counter()
        self._info["enter_s"] = self._t0 - entered
        return self

    def _ancestors(self) -> list[str]:
        ids, parent = [], self._parent
        while parent is not None:
            ids.append(parent.id)
            parent = parent._parent
        return ids

    def _set_processor_flag(self, flag: bool) -> None:
        route.set_flag(self.processor_instance, flag)

    def _attach_processor(self) -> None:
        dask = bool(getattr(self.backend, "receives_dask_chunks", False))
        self._listener = route.attach(self.processor_instance, self.id, self._receive, dask=dask)

    def _detach_processor(self) -> None:
        route.detach(self.processor_instance, self.id, self._listener)
        self._listener = None

    def __exit__(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> None:
        wall = time.perf_counter() - self._t0
        stopped_at = self._started_at + wall
        try:
            _active.reset(self._active_token)
        except ValueError:  # left in another context than entered
            _active.set(self._parent)
        if not self.enabled:
            _set_tracking(self._previous_switch)
            self._set_processor_flag(False)
            if self.client is not None:
                self.client.run(_set_tracking, self._previous_switch)
            return
        assert self.backend is not None
        self._open = False
        delivery.local_receiver.reset(self._receiver_token)
        self._detach_processor()
        if self._span_cm is not None:
            self._span_cm.__exit__(None, None, None)
        if exc_type is not None:
            # The run ended with an exception: it is a failed run, and says why
            self._info["status"] = "failed"
            self._info["error"] = f"{exc_type.__name__}: {exc}"[:_ERROR_CHARS]
        else:
            self._info["status"] = "ok"
        try:
            if self.backend.supports_fine_metrics():
                self.backend.wait_for_metrics(self._span, self.metrics_timeout)
            series = self.backend.stop_tracking()
            for record in self.backend.collect_chunks():
                self._add_chunk(record)
            span_metrics = (
                self.backend.get_span_metrics(self._span)
                if self.backend.supports_fine_metrics()
                else {}
            )
            self._info.update(self.backend.finish_info())
            self._info["capabilities"] = sorted(self.backend.capabilities())
        except Exception:
            logger.warning("daskscope: finishing the workflow measurement failed", exc_info=True)
            series, span_metrics = {}, {}
        self.run = WorkflowRun(
            run_id=self.id,
            name=self.name,
            backend=self._backend_name or self.backend.name,
            started_at=self._started_at,
            stopped_at=stopped_at,
            wall_time_s=wall,
            tracking_data=series or {},
            span_metrics=span_metrics or {},
            info=self._info,
            status=self._info["status"],
            error=self._info.get("error"),
        )
        self._refresh()
        if self.store:
            self._store_in_background()
        # the collector's own exit work, outside wall_time_s (the store writes in background)
        self.run.info["exit_s"] = time.perf_counter() - self._t0 - wall

    # -- chunk records ----------------------------------------------------------------

    def _receive(self, record: dict[str, Any]) -> None:
        """A record that reached this process directly: ours, and our parents' too."""
        note = delivery.NOTE_KEY in record
        collector: MetricsCollector | None = self
        while collector is not None:
            if collector is self or collector._open:
                (collector._note if note else collector._add_chunk)(record)
            collector = collector._parent

    def _note(self, record: Mapping[str, Any]) -> None:
        # A tracked call built a graph on the client (coffea's dask-awkward path): this
        # run has no chunks; the graph's layers tell read, processor and overhead apart
        self._graphs_built += 1
        self._watch(record.get("output"))

    def _watch(self, *collections: Any) -> None:
        from daskscope.workflow.awkward_figures import KINDS, classify_layers

        rank = {kind: i for i, kind in enumerate(KINDS)}
        for prefix, kind in classify_layers(collections).items():
            if prefix not in self._kinds or rank[kind] < rank[self._kinds[prefix]]:
                self._kinds[prefix] = kind

    def _add_chunk(self, record: Mapping[str, Any]) -> None:
        chunk = Chunk.from_wire(record)
        self._chunks[chunk.chunk_id or uuid.uuid4().hex] = chunk

    def extract_metrics_from_output(self, output: Any) -> Any:
        """Take the chunk records that rode along in ``output`` (process pools without
        Dask) and remove them; the rest of the output is left as it was."""
        if isinstance(output, tuple) and output and isinstance(output[0], dict):
            self.extract_metrics_from_output(output[0])
            return output
        if isinstance(output, dict) and delivery.INJECT_KEY in output:
            for record in output.pop(delivery.INJECT_KEY) or []:
                if record.get("collector_id") in (None, self.id):
                    self._add_chunk(record)
            self._changed_after_exit()
        return output

    def set_coffea_report(self, report: Any, custom_metrics: Any = None) -> None:
        """Use coffea's report (``savemetrics=True``) for events, bytes and chunks;
        ``custom_metrics``: the user's figures per dataset (:meth:`set_custom_metrics`).

        Given uproot's computed report of coffea's dask-awkward path
        (``allow_read_errors_with_report=True``) instead, the run is measured as that
        path (events, bytes and partitions from the report); a report still lazy is a
        TypeError saying to compute it."""
        from daskscope.workflow.coffea import is_coffea_report, report_to_plain

        if custom_metrics is not None:
            self.set_custom_metrics(custom_metrics)
        if not is_coffea_report(report):
            from daskscope.workflow.uproot_report import report_rows

            self._set_rows(report_rows(report))
            return
        self._report = report_to_plain(report)
        self._changed_after_exit()

    def set_custom_metrics(self, custom_metrics: Any) -> None:
        """The user's own figures per dataset, ``{dataset: {name: value}}``, shown and
        stored beside the measured ones (``info["datasets"]``, ``info["custom_metrics"]``);
        may be called after the ``with`` block."""
        self._custom.update(custom_dataset_metrics(custom_metrics))
        self._changed_after_exit()

    def _set_rows(self, rows: list[dict[str, Any]]) -> None:
        # uproot's report, one row per partition (the dask-awkward path)
        self._rows = rows
        self._changed_after_exit()

    def _changed_after_exit(self) -> None:
        # After the with block: the figures and the stored run follow
        if self.run is None:
            return
        self._refresh()
        if self.store and self._store_thread is not None:
            self._store_in_background()

    # -- derived results --------------------------------------------------------------

    def _processor_prefixes(self) -> set[str]:
        prefixes = {c.task_prefix for c in self._chunks.values() if c.task_prefix}
        if self.processor_instance is not None:
            from daskscope.workflow.coffea import processor_prefixes

            prefixes |= processor_prefixes(self.processor_instance)
        return prefixes

    def _dask_awkward(self, run: WorkflowRun) -> bool:
        """Whether this run is coffea's dask-awkward path: a tracked ``process()`` built a
        graph, uproot's report was given, or no chunk came and uproot's dask read ran in
        the span."""
        if self.dask_awkward_path or self._graphs_built or self._rows is not None:
            return True
        from daskscope.workflow.awkward_figures import reads_with_uproot_dask

        return not self._chunks and reads_with_uproot_dask(run.span_metrics)

    def _refresh(self) -> None:
        run = self.run
        assert run is not None
        if self._dask_awkward(run):
            from daskscope.workflow.awkward_figures import HANDED_OVER, refresh_run

            if not self.dask_awkward_path and run.info.get("path") != "dask-awkward":
                logger.warning("daskscope: %s", HANDED_OVER)
                run.info["path_note"] = HANDED_OVER
            run.info["path"] = "dask-awkward"
            derived = [*derived_metrics(), *self._derived]
            refresh_run(run, kinds=self._kinds, rows=self._rows, derived=derived)
            self._add_custom(run)
            return
        run.chunks = sorted(self._chunks.values(), key=lambda c: (c.started_at or 0, c.chunk_id))
        run.coffea_report = self._report
        self._settle_cores(run)
        prefixes = self._processor_prefixes()
        run.info["processor_prefixes"] = sorted(prefixes)
        run.sections = aggregate_sections(run.chunks)
        run.info["datasets"] = dataset_metrics(run.chunks)
        self._add_custom(run)
        run.metrics = workflow_metrics(
            wall_time_s=run.wall_time_s,
            chunks=run.chunks,
            report=self._report,
            span_metrics=run.span_metrics,
            parser=type(self.backend).parser if self.backend is not None else None,
            tracking=run.tracking_data,
            info=run.info,
            processor_prefixes=prefixes,
            derived=[*derived_metrics(), *self._derived],
        )

    def _add_custom(self, run: WorkflowRun) -> None:
        # the user's figures per dataset, beside the measured ones (either path)
        if self._custom:
            run.info["custom_metrics"] = self._custom
            datasets = run.info.get("datasets") or {}
            run.info["datasets"] = with_custom_metrics(datasets, self._custom)

    def _settle_cores(self, run: WorkflowRun) -> None:
        # Local runs: the cores are what the user or the executor said; chunks that all
        # ran in this process used one; otherwise unknown, and said so (never guessed)
        if run.backend != "local" or self.cores is not None:
            return
        pids = {c.pid for c in run.chunks}
        run.info["chunk_processes"] = len(pids)
        if pids and pids <= {os.getpid()}:
            run.info["cores"] = 1
        elif pids:
            run.info["cores"] = None
            note = "chunks ran in other processes: pass executor=... or cores=..."
            if run.info.get("cores_note") != note:
                run.info["cores_note"] = note
                logger.warning("daskscope: number of cores not measured: %s", note)

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
        """One dict per chunk attempt, by start time (the seed's shape: ``Chunk.as_dict``)."""
        return [chunk.as_dict() for chunk in self._finished().chunks]

    @property
    def tracking_data(self) -> dict[str, Any]:
        """The sampled series; ``worker_counts`` is ``{timestamp: count}`` (the seed's
        shape, derived from ``time`` and ``workers``)."""
        data = dict(self._finished().tracking_data)
        if data.get("time") and data.get("workers"):
            data["worker_counts"] = dict(zip(data["time"], data["workers"], strict=False))
        return data

    @property
    def span_metrics(self) -> dict[tuple[Any, ...], float]:
        return self._finished().span_metrics

    @property
    def sections(self) -> dict[str, dict[str, Any]]:
        return self._finished().sections

    # -- outputs ----------------------------------------------------------------------

    def print_summary(self, console: Any = None) -> None:
        """The run's summary as Rich tables (:mod:`daskscope.cli.run_summary`)."""
        from daskscope.cli.run_summary import print_summary

        print_summary(self._finished(), console=console)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """In a notebook: the run as it is, kept up to date while it runs
        (:mod:`daskscope.notebook.live`)."""
        from daskscope.notebook.live import collector_bundle

        return collector_bundle(self)

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

    def plot(
        self, kind: str, output_path: str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> Any:
        """One of the figures of :mod:`daskscope.plots` by name (saved to ``output_path``
        when given)."""
        from daskscope import plots

        return plots.plot(self._finished(), kind, output_path=output_path, **kwargs)

    def save_plots(self, output_path: str | os.PathLike[str]) -> dict[str, Any]:
        """Every figure of :mod:`daskscope.plots`, as PNGs in the folder ``output_path``."""
        from daskscope import plots

        return plots.save_plots(self._finished(), output_path)

    # -- the store ----------------------------------------------------------------------

    def _store_in_background(self) -> None:
        import threading

        from daskscope.workflow import storage

        run = self._finished()
        database = self.database or self._info.get("database")
        # the cluster's sink: its recorder's server and token, unless a database is given
        server = None if self.database else self._info.get("server")
        token = (getattr(self.backend, "info", None) or {}).get("token")
        self.run_id = run.run_id

        def write() -> None:
            try:
                storage.store_run(run, database, server=server, token=token)
            except BaseException as exc:
                self._store_error = exc
                logger.warning("daskscope: storing workflow run %s failed: %s", run.run_id, exc)

        previous = self._store_thread
        self._store_error = None

        def after_previous() -> None:
            if previous is not None:  # one write at a time, in order
                previous.join()
            write()

        # Off the user's path: opening the store may import SQLAlchemy and migrate
        self._store_thread = threading.Thread(target=after_previous, name="daskscope-store-run")
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
