"""The demo workload behind ``daskscope demo``: a little of everything daskscope records.

Parts: a dataframe groupby, an array analysis in nested spans that moves data between
workers, and delayed tasks of which one fails on purpose. Sized for about 10-30 s on
two cores. Returns ground truth the tests compare the recording against.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import dask
import distributed
import numpy as np
import pandas as pd
from dask.base import collections_to_expr
from dask.delayed import delayed
from distributed import Client, as_completed, futures_of, span

from daskscope.format import duration_text

__all__ = ["DEMO_FAILURE_MESSAGE", "DemoFailure", "run_demo_workload"]

DEMO_FAILURE_MESSAGE = "daskscope demo: this task fails on purpose"


class DemoFailure(RuntimeError):
    """The exception the demo's failing task raises."""


# Task functions live at module level so that workers can unpickle them by reference.
def _square(i: int) -> int:
    return i * i


def _fail_on_purpose(values: list[int]) -> int:
    raise DemoFailure(DEMO_FAILURE_MESSAGE)


def _total(values: list[int]) -> int:
    return sum(values)


@contextmanager
def _unfused() -> Iterator[None]:
    # Low-level fusion merges tasks across span boundaries and drops their span
    # annotations; keep it off for the demo's arrays and delayed objects only.
    with dask.config.set({"optimization.fuse.active": False}):
        yield


class _Progress:
    """A Rich progress bar advanced as futures finish (or nothing, when disabled)."""

    def __init__(self, enabled: bool) -> None:
        self.bar = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(
                TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn()
            )

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def wait(self, description: str, futures: list[distributed.Future[Any]]) -> None:
        """Wait for every future (failed ones included), advancing one bar."""
        task = None if self.bar is None else self.bar.add_task(description, total=len(futures))
        for _ in as_completed(futures):
            if self.bar is not None and task is not None:
                self.bar.advance(task)


def _task_count(client: Client, *collections: Any) -> int:
    """Tasks the scheduler will run for ``client.persist(list(collections))``.

    The graph is optimised as ``Client.persist`` does it; keys already in memory (from
    an earlier persist) are not counted again.
    """
    expr = collections_to_expr(list(collections), optimize_graph=True).optimize()
    known = {f.key for c in collections for f in futures_of(c)}
    return len(set(expr.__dask_graph__()) - known)


@contextmanager
def _own_code_visible() -> Iterator[None]:
    # Dask attaches the caller's code to each computation, skipping frames of modules
    # whose name *starts* with "dask"; that would hide daskscope.cli.demo (the calling
    # lines the demo is meant to show) behind click's frames.
    ignored = dask.config.get("distributed.diagnostics.computations.ignore-modules", [])
    patched = [r"dask(?!scope)" if m == "dask" else m for m in ignored]
    with dask.config.set({"distributed.diagnostics.computations.ignore-modules": patched}):
        yield


def _dataframe_part(client: Client, progress: _Progress, seed: int) -> dict[str, Any]:
    df = dask.datasets.timeseries(
        start="2000-01-01", end="2000-01-21", freq="1s", partition_freq="1D", seed=seed
    )
    # span() sets a low-level annotation that dataframes ignore (and warn about); the
    # span itself still reaches the scheduler with the graph's metadata.
    with warnings.catch_warnings(), span("dataframe groupby"):
        warnings.filterwarnings("ignore", "Dask annotations", UserWarning)
        result = df.groupby("name").agg({"x": "mean", "y": "std", "id": "count"})
        keys = _task_count(client, result)
        persisted = client.persist(result)
        futures = futures_of(persisted)
        progress.wait("dataframe groupby", futures)
        # gather, not compute(): a compute would run a further graph of finalize tasks
        frame = pd.concat(client.gather(futures))
    return {"keys": keys, "rows": int(frame["id"].sum()), "groups": len(frame)}


def _array_part(client: Client, progress: _Progress, seed: int) -> dict[str, Any]:
    import dask.array as da

    with _unfused(), span("analysis"):
        with span("load"):
            rng = da.random.default_rng(seed)
            x = rng.random((4000, 4000), chunks=(1000, 1000))
            load_keys = _task_count(client, x)
            x = client.persist(x)
            progress.wait("analysis / load", futures_of(x))
        with span("reduce"):
            # x @ x.T needs every row block with every column block: chunks move
            # between workers (transfers); the means are plain reductions.
            gram = (x @ x.T).mean()
            col_means = x.mean(axis=0)
            reduce_keys = _task_count(client, gram, col_means)
            gram, col_means = client.persist([gram, col_means])
            progress.wait("analysis / reduce", futures_of(gram) + futures_of(col_means))
            gram_mean = client.gather(futures_of(gram))[0].item()
            means = np.concatenate(client.gather(futures_of(col_means)))
    return {
        "keys_load": load_keys,
        "keys_reduce": reduce_keys,
        "gram_mean": float(gram_mean),
        "column_means": len(means),
    }


def _delayed_part(client: Client, progress: _Progress, seed: int) -> dict[str, Any]:
    squares = [delayed(_square)(i + seed, dask_key_name=f"square-{i}") for i in range(20)]
    good = delayed(_total)(squares, dask_key_name="total-ok")
    bad = delayed(_fail_on_purpose)(squares, dask_key_name="fail-on-purpose")
    with _unfused(), span("delayed"):
        keys = _task_count(client, good, bad)
        good, bad = client.persist([good, bad])
        futures = futures_of(good) + futures_of(bad)
        progress.wait("delayed", futures)
    total = futures[0].result()
    try:
        futures[1].result()
    except DemoFailure:
        failed = True  # expected: the demo shows how a failed task is recorded
    else:
        failed = False
    return {"keys": keys, "total": total, "failed_key": "fail-on-purpose", "failed": failed}


PARTS: dict[str, Callable[[Client, _Progress, int], dict[str, Any]]] = {
    "dataframe groupby": _dataframe_part,
    "analysis": _array_part,
    "delayed": _delayed_part,
}


def run_demo_workload(client: Client, *, seed: int = 0, progress: bool = True) -> dict[str, Any]:
    """Run every demo part on ``client``; returns ground truth per part.

    ``{"parts": {name: {...}}, "keys": total keys submitted, "failing_task_failed":
    bool, "failed_key": str}``. Keys are counted from the optimised graphs sent to the
    scheduler, so they are the tasks it runs (each exactly once, barring lost workers).
    """
    results: dict[str, dict[str, Any]] = {}
    with _Progress(progress) as bar, _own_code_visible():
        for name, part in PARTS.items():
            results[name] = part(client, bar, seed)
    keys = (
        results["dataframe groupby"]["keys"]
        + results["analysis"]["keys_load"]
        + results["analysis"]["keys_reduce"]
        + results["delayed"]["keys"]
    )
    return {
        "parts": results,
        "keys": keys,
        "failing_task_failed": results["delayed"]["failed"],
        "failed_key": results["delayed"]["failed_key"],
    }


def record_demo(
    database: str | None,
    *,
    workers: int = 2,
    seed: int = 0,
    progress: bool = True,
    console: Any = None,
) -> tuple[str, dict[str, Any]]:
    """Run the workload on a new ``LocalCluster(processes=True)`` recorded into
    ``database``; returns the cluster id and the workload's ground truth.

    The store is opened first so that a bad URL fails before a cluster starts.
    """
    import logging

    from distributed import LocalCluster

    import daskscope
    from daskscope.store import open_store

    open_store(database).close()

    def say(message: str) -> None:
        if console is None:
            print(message)
        else:
            console.print(message, markup=False, highlight=False)

    say(f"starting a local cluster: {workers} worker processes, 1 thread each")
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            # The demo's failing task and its shuffle would log tracebacks and warnings
            # on purpose; the summary printed afterwards shows them properly.
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=database, name="daskscope demo")
        started = time.perf_counter()
        truth = run_demo_workload(client, seed=seed, progress=progress)
        took = time.perf_counter() - started
        status = daskscope.flush(client) or {}
    failed = "failed as intended" if truth["failing_task_failed"] else "did NOT fail"
    say(
        f"recorded cluster {cluster_id}: {truth['keys']} tasks submitted in "
        f"{duration_text(took)}; "
        f"task {truth['failed_key']!r} {failed}"
    )
    if isinstance(status, dict) and status.get("last_write_error"):
        # The logs are silenced above, so say it here: the summary may be incomplete.
        say(f"warning: the last write to the store failed: {status['last_write_error']}")
    return cluster_id, truth
