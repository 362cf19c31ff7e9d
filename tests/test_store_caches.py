"""What the process remembers about a database is kept by its Store object: two stores
never share a cache entry, even with the same ids in them, and a closed store's
caches go with it (issue 27: caches were module dictionaries keyed on the store)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daskscope.model import ClusterRecord, ComputationRecord, TaskGroupRecord
from daskscope.store import Store, open_store, write_records
from daskscope.store.groups import computation_fingerprint
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.tasklog.segments import encode_segment, execution
from daskscope.views import memo
from daskscope.views.computation import computation_view
from daskscope.views.timeline import task_detail_view, timeline_view
from factories import make_cluster

NOW = time.time()
CLUSTER, COMPUTATION = "cluster-same", "computation-same"


def records(word: str) -> list[object]:
    """The same ids and figures in both databases; only the groups' names differ."""
    cluster = ClusterRecord(
        id=CLUSTER, name="same", account="default", user="ana",
        scheduler_address="tcp://127.0.0.1:8786", dask_version="2026.8.0",
        distributed_version="2026.8.0", python_version="3.11", started_at=NOW - 100,
        stopped_at=NOW, last_seen_at=NOW,
    )  # fmt: skip
    comp = ComputationRecord(
        id=COMPUTATION, cluster_id=CLUSTER, started_at=NOW - 90, stopped_at=NOW - 10,
        code=["x.compute()\n"], group_count=3, tasks_executed=3,
    )  # fmt: skip
    groups = [
        TaskGroupRecord(
            id=f"tg-{i}", cluster_id=CLUSTER, name=f"{word}-{i}", prefix=word,
            computation_id=COMPUTATION, dependencies=[f"{word}-{i - 1}"] if i else [],
            tasks_total=1, tasks_executed=1, nbytes_total=10, duration_s=1.0 + i,
            durations={"compute": 1.0 + i}, started_at=NOW - 80 + i, stopped_at=NOW - 79 + i,
        )
        for i in range(3)
    ]  # fmt: skip
    return [cluster, comp, *groups]


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    left = open_store(f"sqlite:///{tmp_path / 'left.db'}")
    right = open_store(f"sqlite:///{tmp_path / 'right.db'}")
    write_records(left, records("left"))
    write_records(right, records("right"))
    yield left, right
    left.close()
    right.close()


def names(store: Store) -> set[str]:
    view = computation_view(store, CLUSTER, COMPUTATION, all_groups_url="/groups")
    return {node.name for node in view.nodes}


def test_two_stores_with_the_same_ids_keep_their_own_views(two: tuple[Store, Store]) -> None:
    left, right = two
    # the same ids and figures: a cache keyed on (ids, fingerprint) alone would mix them
    assert computation_fingerprint(left, CLUSTER, COMPUTATION) == computation_fingerprint(
        right, CLUSTER, COMPUTATION
    )
    assert names(left) == {"left-0", "left-1", "left-2"}
    before = memo.stats()
    assert names(right) == {"right-0", "right-1", "right-2"}
    assert memo.stats()["builds"] > before["builds"]  # built for the right, not given
    # and each is kept: asked again, neither is built anew
    again = memo.stats()
    assert names(left) == {"left-0", "left-1", "left-2"}
    assert names(right) == {"right-0", "right-1", "right-2"}
    assert memo.stats()["builds"] == again["builds"]


def test_a_closed_store_drops_what_it_kept(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'once.db'}"
    with open_store(url) as first:
        write_records(first, records("first"))
        assert names(first) == {"first-0", "first-1", "first-2"}
        kept = memo.stats()
        assert names(first) == {"first-0", "first-1", "first-2"}
        assert memo.stats()["builds"] == kept["builds"]  # given again while open
    # closed: what it kept is gone (asked again, it is built anew from the file)
    closed = memo.stats()
    assert names(first) == {"first-0", "first-1", "first-2"}
    assert memo.stats()["builds"] > closed["builds"]
    first.close()
    with open_store(url) as changed:
        write_records(changed, records("second")[2:])  # the groups renamed, ids the same
    with open_store(url) as second:
        fresh = memo.stats()
        assert names(second) == {"second-0", "second-1", "second-2"}
        assert memo.stats()["builds"] > fresh["builds"]


def test_a_token_known_in_one_store_is_not_known_in_another(two: tuple[Store, Store]) -> None:
    from daskscope.web.tokencache import cached_identity, remembered_identity

    left, right = two
    create_account(left, "team")
    add_user(left, "ann", account="team")
    token = create_token(left, "ann")
    found = cached_identity(left, token)
    assert found is not None and found.user == "ann"
    assert remembered_identity(left, token) == found  # kept for the left store
    assert remembered_identity(right, token) is None  # never for the right
    assert cached_identity(right, token) is None  # nor found there


def test_retention_pruning_is_timed_per_store(two: tuple[Store, Store]) -> None:
    from daskscope.store.audit import prune_if_due

    left, right = two
    prune_if_due(left, 1.0, now=NOW)
    assert left.pruned_at == {"audit": NOW}
    assert right.pruned_at == {}  # the right store's prune is still due
    prune_if_due(right, 1.0, now=NOW + 1)
    assert right.pruned_at == {"audit": NOW + 1}


# -- the task timeline's caches ----------------------------------------------------------

LOG_CLUSTER = "cluster-log-same"


def task_log(word: str, extra: int) -> tuple[list[object], list[dict[str, Any]]]:
    """The same cluster id, segment numbers and timings in both databases (so the same
    segment ids and the same log version: count and newest stop); the workers, keys and
    groups named by ``word``, and ``extra`` more executions inside the same time range.
    Returns the records and the executions as plain values (the ground truth)."""
    cluster = make_cluster("log", id=LOG_CLUSTER)
    t0 = cluster.started_at + 5
    rows, truth = [], []
    for i in range(40 + extra):
        worker, thread = f"tcp://{word}-{i % 2}:4001", 100 + i % 3
        start = t0 + (i % 40) * 0.5 + (0.1 if i >= 40 else 0.0)
        stop = start + 0.05 + 0.01 * (i % 7) - (0.04 if i >= 40 else 0.0)
        group = f"{word}-inc-{i % 4}"
        rows.append(
            execution(f"{group}-{i}", group, f"{word}-inc", worker, thread,
                      [{"action": "compute", "start": start, "stop": stop}], erred=False,
                      nbytes=8, computation="computation-x", span=None)
        )  # fmt: skip
        truth.append({"key": f"{group}-{i}", "worker": worker, "thread": thread, "d": stop - start})
    records: list[object] = [cluster]
    for number, first in enumerate(range(0, len(rows), 25)):
        records += encode_segment(LOG_CLUSTER, number, rows[first : first + 25])
    return records, truth


def lanes_of(truth: list[dict[str, Any]]) -> set[tuple[str, int]]:
    return {(e["worker"], e["thread"]) for e in truth}


def test_two_stores_with_the_same_cluster_never_share_a_timeline_entry(tmp_path: Path) -> None:
    left = open_store(f"sqlite:///{tmp_path / 'left-log.db'}")
    right = open_store(f"sqlite:///{tmp_path / 'right-log.db'}")
    try:
        left_records, left_truth = task_log("left", extra=0)
        right_records, right_truth = task_log("right", extra=3)
        write_records(left, left_records)
        write_records(right, right_records)
        # the same segments and version: a cache keyed on them alone would mix the two
        assert left.log_version(LOG_CLUSTER) == right.log_version(LOG_CLUSTER)
        for _ in range(2):  # built, then given from each store's own caches
            for store, truth in ((left, left_truth), (right, right_truth)):
                view = timeline_view(store, LOG_CLUSTER)
                assert view.raw
                assert {t.key for t in view.tasks} == {e["key"] for e in truth}
                assert view.totals.executions == len(truth)
                assert {(lane.worker, lane.thread) for lane in view.lanes} == lanes_of(truth)
                longest = max(float(e["d"]) for e in truth)
                tied = {e["key"] for e in truth if float(e["d"]) > longest - 1e-5}
                assert view.slowest[0].key in tied
                detail = task_detail_view(store, LOG_CLUSTER, str(truth[0]["key"]))
                assert detail is not None
                assert [t.key for t in detail.executions] == [truth[0]["key"]]
        # each store holds its own: the lanes it kept are its workers'
        kept_lanes = right.kept("views.timeline.lanes", dict)
        assert {tuple(p) for p in kept_lanes[LOG_CLUSTER][1]} == lanes_of(right_truth)
    finally:
        left.close()
        right.close()
    # closed: its caches are gone (asked again, the store makes a new, empty one)
    assert right.kept("views.timeline.lanes", dict) == {}
    assert right.kept("tasklog.segments", lambda: None) is None
