"""A closed cluster's spans end as Dask's own spans end (issue 25, point 2).

Closing a scheduler drops the tasks its clients still hold *after* the plugins' last
hook: Dask's spans then count every task "forgotten". The ground truth is Dask's own
spans extension, read once the cluster and the client are closed.
"""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import pytest
import sqlalchemy as sa
from distributed import Client, LocalCluster, span, wait

import daskscope
from daskscope.store import Store
from daskscope.store import schema as s


def boom(block: Any) -> Any:
    raise ZeroDivisionError("a bad block")


def spans_of(store: Store, cluster_id: str) -> dict[str, dict[str, Any]]:
    with store.engine.connect() as conn:
        query = sa.select(s.spans).where(s.spans.c.cluster_id == cluster_id)
        return {r.span_id: dict(r._mapping) for r in conn.execute(query)}


@pytest.mark.parametrize("order", ["cluster first", "client first"])
def test_span_states_at_close_are_dasks_own(store: Store, database_url: str, order: str) -> None:
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
    )
    client = Client(cluster)
    scheduler = cluster.scheduler
    try:
        cluster_id = daskscope.register(client, database=database_url)
        with dask.config.set({"optimization.fuse.active": False}):
            x = da.random.random((400, 400), chunks=(50, 50))
            with span("load"):
                y = (x + 1).persist()
                with span("reduce"):
                    total = (y * 2).sum().compute()
                kept = (y.T - 1).persist()  # held by the client until it goes
                wait(kept)
            with span("fail"):
                bad = y.map_blocks(boom, dtype=float).persist()
                wait(bad)
        assert total > 0 and bad.dask  # the failed blocks are held too
        daskscope.flush(client)
        held = {k: v for k, v in scheduler.extensions["spans"].spans.items()}
        before = {sid: dict(sp.states) for sid, sp in held.items()}
        assert any(n and state != "forgotten" for st in before.values() for state, n in st.items())
    finally:
        if order == "cluster first":  # the client still holds its results as it closes
            cluster.close()
            client.close()
        else:
            client.close()
            cluster.close()

    truth = scheduler.extensions["spans"].spans
    stored = spans_of(store, cluster_id)
    assert set(stored) == set(truth) and len(truth) == 3  # load, reduce, fail
    for span_id, sp in truth.items():
        row = stored[span_id]
        states = {state: n for state, n in sp.states.items() if n}
        assert set(states) == {"forgotten"}, sp.name  # Dask's own, after the close
        assert row["states"] == states, sp.name
        assert row["done"] is True and sp.done, sp.name
        assert abs(row["stopped_at"] - sp.stop) < 1e-6, sp.name
        assert row["nbytes_total"] == sp.nbytes_total, sp.name
        assert abs(row["duration_s"] - sp.duration) < 1e-6, sp.name
