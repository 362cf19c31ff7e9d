"""A finished run as store records, and writing them (called off the user's path)."""

from __future__ import annotations

import atexit
import threading
from typing import Any

from daskscope import config
from daskscope.model import WorkflowChunkRecord, WorkflowRunRecord, stable_id
from daskscope.workflow.run import WorkflowRun

__all__ = ["run_records", "store_run"]

#: Threads still writing runs; joined at interpreter exit so that no run is lost
pending: list[threading.Thread] = []
#: Seconds a run sent to a server waits for its cluster's record to get there (within
#: the 30 s the interpreter's exit gives a run being written)
CLUSTER_WAIT_S = 25.0


def _computation_ids(run: WorkflowRun, cluster_id: str | None) -> list[str]:
    # The recorder's computation records are keyed by stable ids of Dask's ids
    raw = run.info.get("computations", [])
    if cluster_id is None:
        return list(raw)
    return [stable_id(cluster_id, "computation", c) for c in raw]


def run_records(run: WorkflowRun) -> list[WorkflowRunRecord | WorkflowChunkRecord]:
    cluster_id = run.info.get("cluster_id")
    records: list[Any] = [
        WorkflowRunRecord(
            id=run.run_id,
            cluster_id=cluster_id,
            name=run.name,
            backend=run.backend,
            started_at=run.started_at,
            stopped_at=run.stopped_at,
            wall_time_s=run.wall_time_s,
            span_id=run.info.get("span_id"),
            computation_ids=_computation_ids(run, cluster_id),
            chunk_count=len(run.chunks),
            metrics=run.metrics,
            sections=run.sections,
            coffea_report=run.coffea_report,
            info=run.info,
            account=config.get("account") or "default",
            user=config.get("user") or config.os_user(),
        )
    ]
    records.extend(chunk.record(run.run_id, cluster_id, i) for i, chunk in enumerate(run.chunks))
    return records


def store_run(
    run: WorkflowRun,
    database: str | None = None,
    *,
    server: str | None = None,
    token: str | None = None,
) -> int:
    """Send the run and its chunks where its cluster's records go: to ``server`` (the
    cluster's recorder's, with its ``token``: the run is that token's account's), else
    to the store at ``database``; with neither and a daskscope server configured
    (``daskscope.server``), to that server with ``daskscope.token``. A server gets them
    through the recorder's delivery: spooled on disk while it is away or refuses for a
    reason that can pass, retried, and tried once more here before returning; a run
    whose cluster the server does not have yet is sent again for up to
    :data:`CLUSTER_WAIT_S` seconds, then left in the spool. Returns
    the number of records stored, delivered or spooled."""
    from daskscope import config

    records = run_records(run)
    if server is None and database is None and config.get("server"):
        server, token = config.get("server"), config.get("token")
    from daskscope.collector.destination import sink_for

    sink = sink_for(
        database=database,
        server=server,
        token=token if token is not None else config.get("token"),
        spool_dir=config.get("spool-dir"),
        one_shot=True,
    )
    try:
        sink.write(records)
        wait_for_cluster = getattr(sink, "wait_for_cluster", None)
        if wait_for_cluster is not None:
            # a run that ended before its recorder's first flush reached the server:
            # sent again once the cluster is there (else it waits in the spool)
            wait_for_cluster(CLUSTER_WAIT_S)
    finally:
        sink.close()
    return sink.stats().records_written


@atexit.register
def _join_pending() -> None:
    for thread in pending:
        thread.join(timeout=30)
