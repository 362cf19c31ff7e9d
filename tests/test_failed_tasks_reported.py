"""Failed tasks where they are reported (issue 25): a task group whose tasks all failed in
the OTLP export (Dask dates a group only by tasks that ended in memory) and the status of
the Dask span they ran in (Dask's span states forget a failed task once it is released),
and the errors advice's count of failed tasks. One real run: three tasks that raise, of
two task prefixes, beside a span that succeeds; Dask's task stream and the exceptions the
functions raised are the ground truth."""

from __future__ import annotations

import logging
from typing import Any

import dask
import pytest
import sqlalchemy as sa
from distributed import Client, LocalCluster, get_task_stream, span, wait

import daskscope
from daskscope.export.otlp import otlp_request
from daskscope.store import cluster_detail, open_store, schema
from daskscope.views.advice import cluster_advice


def ok(i: int) -> int:
    return i + 1


def bad_row(i: int) -> int:
    raise ValueError(f"bad row {i}")


def crash(i: int) -> int:
    raise KeyError(f"column {i}")


#: key -> the exception its function raises
FAILING = {
    "boom-1": "ValueError('bad row 1')",
    "boom-2": "ValueError('bad row 2')",
    "crash-1": "KeyError('column 1')",
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    url = f"sqlite:///{tmp_path_factory.mktemp('failed') / 'store.db'}"
    with (
        dask.config.set({"optimization.fuse.active": False}),
        LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        with get_task_stream(client) as stream:
            with span("good"):
                assert dask.compute(*[dask.delayed(ok)(i) for i in range(3)]) == (1, 2, 3)
            with span("failing"):
                futures = client.compute([
                    dask.delayed(bad_row)(1, dask_key_name="boom-1"),
                    dask.delayed(bad_row)(2, dask_key_name="boom-2"),
                    dask.delayed(crash)(1, dask_key_name="crash-1"),
                ])  # fmt: skip
                wait(futures)
                raised = {f.key: repr(f.exception()) for f in futures}
                del futures
        assert daskscope.flush(client)["write_failures"] == 0
        spans = cluster.scheduler.extensions["spans"].spans.values()
        dask_states = {tuple(sp.name): dict(sp.states) for sp in spans}
    assert raised == FAILING
    return {
        "url": url,
        "cluster_id": cluster_id,
        "stream": {str(t["key"]): t for t in stream.data},
        "dask_states": dask_states,
    }


def attributes(span: Any) -> dict[str, Any]:
    out = {}
    for kv in span.attributes:
        value = kv.value
        out[kv.key] = getattr(value, value.WhichOneof("value"))
    return out


def spans_of(request: Any) -> list[Any]:
    return list(request.resource_spans[0].scope_spans[0].spans)


def check_failed_groups(store: Any, recorded: dict[str, Any]) -> None:
    """The failed groups in the OTLP export: errors, with their count and first
    exception, placed from their tasks' first start to their last stop as Dask's task
    stream saw them."""
    spans = spans_of(otlp_request(store, recorded["cluster_id"], groups=True))
    exported = {
        attributes(s)["dask.task_group.name"]: s
        for s in spans
        if "dask.task_group.name" in attributes(s)
    }
    assert set(exported) == {"ok", "boom", "crash"}
    stream = recorded["stream"]
    for name, keys in (("boom", ["boom-1", "boom-2"]), ("crash", ["crash-1"])):
        s = exported[name]
        assert s.status.code == s.status.StatusCode.STATUS_CODE_ERROR
        n = len(keys)
        assert s.status.message.startswith(f"{n} task{'s' if n > 1 else ''} failed: ")
        assert s.status.message.split(": ", 1)[1] in {FAILING[k] for k in keys}
        assert attributes(s)["dask.task_group.tasks.erred"] == n
        start = min(ss["start"] for k in keys for ss in stream[k]["startstops"])
        stop = max(ss["stop"] for k in keys for ss in stream[k]["startstops"])
        assert s.start_time_unix_nano / 1e9 == pytest.approx(start, abs=2e-6)
        assert s.end_time_unix_nano / 1e9 == pytest.approx(stop, abs=2e-6)
    assert exported["ok"].status.code == exported["ok"].status.StatusCode.STATUS_CODE_UNSET


def test_a_group_whose_tasks_all_failed_is_exported_as_an_error(recorded: dict[str, Any]) -> None:
    store = open_store(recorded["url"])
    check_failed_groups(store, recorded)  # as recorded: dated by their own executions
    # As a recorder from before dated them: by Dask's TaskGroup, which dates a group by
    # its tasks that ended in memory, so these had no start and the export left them out.
    # Placed now by their executions in the task log.
    g = schema.task_groups.c
    failed = sa.and_(g.cluster_id == recorded["cluster_id"], g.name.in_(["boom", "crash"]))
    with store.engine.begin() as conn:
        saved = conn.execute(sa.select(g.id, g.started_at).where(failed)).all()
        assert len(saved) == 2
        conn.execute(sa.update(schema.task_groups).where(failed).values(started_at=None))
    try:
        check_failed_groups(store, recorded)
    finally:
        with store.engine.begin() as conn:
            for group_id, started_at in saved:
                again = sa.update(schema.task_groups).where(g.id == group_id)
                conn.execute(again.values(started_at=started_at))


@pytest.mark.parametrize("groups", [False, True])
def test_the_span_the_failures_ran_in_is_an_error(recorded: dict[str, Any], groups: bool) -> None:
    # Dask's own span states no longer say that anything failed
    assert recorded["dask_states"][("failing",)].get("erred", 0) == 0
    store = open_store(recorded["url"])
    spans = spans_of(otlp_request(store, recorded["cluster_id"], groups=groups))
    by_name = {s.name: s for s in spans if "dask.span.id" in attributes(s)}
    failing, good = by_name["failing"], by_name["good"]
    assert failing.status.code == failing.status.StatusCode.STATUS_CODE_ERROR
    assert failing.status.message.startswith(f"{len(FAILING)} tasks failed: ")
    assert failing.status.message.split(": ", 1)[1] in set(FAILING.values())
    assert good.status.code == good.status.StatusCode.STATUS_CODE_UNSET
    [computation] = [
        s for s in spans if attributes(s).get("dask.computation.tasks.erred") == len(FAILING)
    ]
    assert computation.status.code == computation.status.StatusCode.STATUS_CODE_ERROR
    assert computation.status.message.startswith(f"{len(FAILING)} tasks failed: ")
    [root] = [s for s in spans if not s.parent_span_id]
    assert root.status.message.startswith(f"{len(FAILING)} tasks failed: ")


def test_the_errors_advice_counts_each_prefix_s_failed_tasks(recorded: dict[str, Any]) -> None:
    """It read "not measured" for a cluster whose errors table held all its failures."""
    store = open_store(recorded["url"])
    detail = cluster_detail(store, recorded["cluster_id"])
    assert detail["cluster"]["tasks_erred"] == len(FAILING)
    failing = next(c for c in detail["computations"] if c["tasks_erred"])
    for computation in (None, failing["id"][:8]):
        view = cluster_advice(store, recorded["cluster_id"], computation)
        found = {a.subject: a for a in view.advice if a.rule == "errors"}
        assert set(found) == {"boom", "crash"}, view.advice
        for prefix, n in (("boom", 2), ("crash", 1)):
            evidence = {e.label: e for e in found[prefix].evidence}
            assert evidence["failed tasks recorded"].value == n
            in_all = evidence["failed tasks in all (tasks_erred)"]
            assert in_all.value == n and in_all.value_text == str(n)
