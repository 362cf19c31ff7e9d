"""The task log in the store: segments written and read back on SQLite and PostgreSQL,
the timeline queries against the executions the test made (its own ground truth), and
segments through a team server's ingest and the collector's spool."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from daskscope.collector.http_sink import HttpSink
from daskscope.store import Store, UnknownCluster, open_store, write_records
from daskscope.store import schema as s
from daskscope.tasklog.lookups import slowest_tasks, task_executions, timeline_extent, transfers
from daskscope.tasklog.segments import Execution, decode_segment, encode_segment, execution
from daskscope.tasklog.window import timeline_window
from factories import make_cluster
from lane_bins import lane_bins
from pgserver import free_port
from test_ingest import Server

WORKERS = ["tcp://10.0.0.1:4001", "tcp://10.0.0.2:4001", "tcp://10.0.0.3:4001"]
THREADS = [139_900_001, 139_900_002]
#: the store keeps whole microseconds
CLOCK = 1.5e-6


@dataclass
class Truth:
    """What the test ran: each execution as plain values."""

    executions: list[dict[str, Any]] = field(default_factory=list)

    def duration_in(self, start: float, stop: float) -> float:
        return sum(
            max(0.0, min(stop, a["stop"]) - max(start, a["start"]))
            for e in self.executions
            for a in e["startstops"]
        )


def make_run(t0: float, n: int = 3000, seed: int = 7) -> tuple[list[Execution], Truth]:
    """``n`` executions on 3 workers x 2 threads, back to back per thread, 1-100 ms
    each, in three groups of two computations; every 5th fetched data first, one
    failed, one key ran twice (a recomputation)."""
    rnd = random.Random(seed)
    clock = {(w, t): t0 for w in WORKERS for t in THREADS}
    rows: list[Execution] = []
    truth = Truth()
    for i in range(n):
        worker, thread = WORKERS[i % 3], THREADS[(i // 3) % 2]
        lane = (worker, thread)
        group = ("load-7a1f", "inc-3c9e", "finalize-sum-1d2b")[i % 3]
        key: Any = (group, i) if group != "finalize-sum-1d2b" else f"{group}-{i}"
        if i == n - 1:
            key = ("load-7a1f", 0)  # computed again
            group = "load-7a1f"
        start = clock[lane] + rnd.uniform(0.0, 0.005)  # idle gaps
        startstops = []
        if i % 5 == 0:
            source = WORKERS[(i + 1) % 3]
            took = rnd.uniform(0.001, 0.01)
            startstops.append(
                {"action": "transfer", "start": start, "stop": start + took, "source": source}
            )
            start += took
        stop = start + rnd.uniform(0.001, 0.1)
        startstops.append({"action": "compute", "start": start, "stop": stop})
        clock[lane] = stop
        erred = i == 42
        computation = "computation-a" if i < n // 2 else "computation-b"
        nbytes = None if erred else 8 * (i + 1)
        prefix = group.rsplit("-", 1)[0]
        rows.append(
            execution(key, group, prefix, worker, thread, startstops, erred=erred,
                      nbytes=nbytes, computation=computation, span="span-1")
        )  # fmt: skip
        truth.executions.append(
            dict(key=str(key), group=group, worker=worker, thread=thread, erred=erred,
                 nbytes=nbytes, computation=computation, startstops=startstops,
                 start=startstops[0]["start"], stop=stop)
        )  # fmt: skip
    return rows, truth


def stored_run(store: Store, n: int = 3000, per_segment: int = 1000) -> tuple[str, Truth]:
    cluster = make_cluster()
    rows, truth = make_run(cluster.started_at + 5, n)
    records: list[Any] = [cluster]
    for first in range(0, n, per_segment):
        records += encode_segment(cluster.id, len(records) - 1, rows[first : first + per_segment])
    write_records(store, records)
    return cluster.id, truth


def test_a_segment_decodes_to_what_was_encoded() -> None:
    rows, truth = make_run(1.8e9, 500)
    (record,) = encode_segment("c", 0, rows)
    assert record.executions == 500 and record.groups == sorted(
        {e["group"] for e in truth.executions}
    )
    assert record.first_start == min(e["start"] for e in truth.executions)
    assert record.last_stop == max(e["stop"] for e in truth.executions)
    seg = decode_segment(record.format, record.payload)
    by_key = Counter(seg.key(i) for i in range(len(seg)))
    assert by_key == Counter(e["key"] for e in truth.executions)
    assert (seg.start[1:] >= seg.start[:-1]).all()  # sorted by start
    with pytest.raises(ValueError, match="upgrade daskscope"):
        decode_segment("parquet/9", record.payload)


def test_the_window_raw_and_binned_agree_with_the_run(store: Store) -> None:
    cluster_id, truth = stored_run(store)
    whole = timeline_window(store, cluster_id, max_tasks=10_000)
    assert whole.raw and whole.total_tasks == len(truth.executions)
    assert whole.start == pytest.approx(min(e["start"] for e in truth.executions), abs=CLOCK)
    assert whole.stop == pytest.approx(max(e["stop"] for e in truth.executions), abs=CLOCK)
    assert [(lane.worker, lane.thread) for lane in whole.lanes] == [
        (w, t) for w in WORKERS for t in THREADS
    ]
    stored = Counter((t.key, t.worker, t.thread, t.state, t.nbytes) for t in whole.tasks)
    expected = Counter(
        (e["key"], e["worker"], e["thread"], "erred" if e["erred"] else "memory", e["nbytes"])
        for e in truth.executions
    )
    assert stored == expected
    # a window in the middle, binned (bins narrower than the segments' summaries: read
    # from the executions): busy seconds add up to the run's time inside it
    start, stop = whole.start + 5.0, whole.start + 15.0
    raw = timeline_window(store, cluster_id, start, stop, max_tasks=100_000)
    binned = timeline_window(store, cluster_id, start, stop, max_tasks=10, bins=400)
    assert raw.raw and not binned.raw and raw.total_tasks == binned.total_tasks > 10
    assert all(len(lane_bins(lane)) == 400 for lane in binned.lanes)
    assert (
        lane_bins(binned.lanes[0])[0].start == start and lane_bins(binned.lanes[0])[-1].stop == stop
    )
    busy = sum(sum(b.busy_s.values()) for lane in binned.lanes for b in lane_bins(lane))
    assert busy == pytest.approx(truth.duration_in(start, stop), rel=1e-6)
    transfer_s = sum(
        b.busy_s.get("transfer", 0.0) for lane in binned.lanes for b in lane_bins(lane)
    )
    assert transfer_s == pytest.approx(
        sum(
            max(0.0, min(stop, a["stop"]) - max(start, a["start"]))
            for e in truth.executions
            for a in e["startstops"]
            if a["action"] == "transfer"
        ),
        rel=1e-6,
    )
    # each lane's bins are its own thread's work, coloured by its groups
    for lane in binned.lanes:
        mine = [
            e for e in truth.executions if (e["worker"], e["thread"]) == (lane.worker, lane.thread)
        ]
        inside = sum(
            max(0.0, min(stop, a["stop"]) - max(start, a["start"]))
            for e in mine
            for a in e["startstops"]
        )
        assert sum(sum(b.busy_s.values()) for b in lane_bins(lane)) == pytest.approx(
            inside, rel=1e-6
        )
        assert {b.top_group for b in lane_bins(lane) if b.busy_s} <= {e["group"] for e in mine}
        assert max(b.tasks for b in lane_bins(lane)) >= 1


def test_a_zoomed_out_window_adds_up_the_segments_summaries(store: Store) -> None:
    cluster_id, truth = stored_run(store)
    # bins wider than twice a summary's: the summaries answer, not the decoded segments
    coarse = timeline_window(store, cluster_id, max_tasks=10, bins=20)
    assert not coarse.raw and coarse.total_tasks == len(truth.executions)
    run_start, run_stop = coarse.start, coarse.stop
    busy = sum(sum(b.busy_s.values()) for lane in coarse.lanes for b in lane_bins(lane))
    assert busy == pytest.approx(truth.duration_in(run_start, run_stop), rel=1e-5)
    # every execution counted once, in the bin it starts in
    assert sum(b.tasks for lane in coarse.lanes for b in lane_bins(lane)) == len(truth.executions)
    for lane in coarse.lanes:
        mine = [
            e for e in truth.executions if (e["worker"], e["thread"]) == (lane.worker, lane.thread)
        ]
        seconds = sum(a["stop"] - a["start"] for e in mine for a in e["startstops"])
        assert sum(sum(b.busy_s.values()) for b in lane_bins(lane)) == pytest.approx(
            seconds, rel=1e-5
        )
        assert {b.top_group for b in lane_bins(lane)} <= {e["group"] for e in mine}
    # a part of the run from the summaries, cut at the window's edges: close to exact
    part = timeline_window(store, cluster_id, run_start + 3, run_stop - 3, max_tasks=10, bins=20)
    inside = truth.duration_in(run_start + 3, run_stop - 3)
    busy = sum(sum(b.busy_s.values()) for lane in part.lanes for b in lane_bins(lane))
    assert busy == pytest.approx(inside, rel=0.01)
    assert part.total_tasks == pytest.approx(
        sum(run_start + 3 <= e["start"] < run_stop - 3 for e in truth.executions), rel=0.01
    )
    # the same window decoded (bins narrower than the summaries' own) agrees per bin
    fine = timeline_window(store, cluster_id, run_start, run_stop, max_tasks=10, bins=2000)
    coarse_again = timeline_window(store, cluster_id, run_start, run_stop, max_tasks=10, bins=20)
    for a, b in zip(fine.lanes, coarse_again.lanes, strict=True):
        for i, coarse_bin in enumerate(lane_bins(b)):
            fine_sum = sum(sum(x.busy_s.values()) for x in lane_bins(a)[i * 100 : (i + 1) * 100])
            # a summary bin straddling two window bins is split by overlap: close, not exact
            assert sum(coarse_bin.busy_s.values()) == pytest.approx(fine_sum, abs=0.2)


def test_filters_and_lookups(store: Store) -> None:
    cluster_id, truth = stored_run(store)
    second = timeline_window(store, cluster_id, computation_id="computation-b", max_tasks=10_000)
    assert second.total_tasks == sum(e["computation"] == "computation-b" for e in truth.executions)
    inc = timeline_window(store, cluster_id, group="inc-3c9e", max_tasks=10_000)
    assert {t.group for t in inc.tasks} == {"inc-3c9e"}
    assert inc.total_tasks == sum(e["group"] == "inc-3c9e" for e in truth.executions)
    # a key that ran twice, a tuple key, a string key, an unknown key
    twice = task_executions(store, cluster_id, "('load-7a1f', 0)")
    assert len(twice) == 2 and twice[0].start < twice[1].start
    assert twice[0].actions[0].action == "transfer" and twice[0].actions[0].source == WORKERS[1]
    (one,) = task_executions(store, cluster_id, "finalize-sum-1d2b-2")
    assert (one.group, one.prefix, one.computation_id, one.span_id) == (
        "finalize-sum-1d2b", "finalize-sum", "computation-a", "span-1"
    )  # fmt: skip
    assert task_executions(store, cluster_id, "('inc-3c9e', 99999)") == []
    (failed,) = task_executions(store, cluster_id, "('load-7a1f', 42)")
    assert failed.state == "erred" and failed.nbytes is None
    # the slowest of a group
    slowest = slowest_tasks(store, cluster_id, group="inc-3c9e", limit=5)
    expected = sorted(
        (e for e in truth.executions if e["group"] == "inc-3c9e"),
        key=lambda e: e["stop"] - e["start"],
        reverse=True,
    )[:5]
    assert [t.key for t in slowest] == [e["key"] for e in expected]
    # transfers: source, target (the task's worker), times
    moved = transfers(store, cluster_id, limit=10_000)
    truth_moves = [
        (e["key"], a["source"], e["worker"]) for e in truth.executions for a in e["startstops"]
        if a["action"] == "transfer"
    ]  # fmt: skip
    assert Counter((m.key, m.source, m.target) for m in moved) == Counter(truth_moves)
    assert len(transfers(store, cluster_id, limit=3)) == 3
    extent = timeline_extent(store, cluster_id)
    assert (extent.executions, extent.tasks) == (len(truth.executions), len(truth.executions) - 1)
    assert (extent.workers, extent.threads) == (3, 6)


def test_bad_questions_get_clear_answers(store: Store) -> None:
    cluster_id, _ = stored_run(store, n=30)
    with pytest.raises(UnknownCluster):
        timeline_window(store, "no-such-cluster")
    with pytest.raises(UnknownCluster):
        task_executions(store, "no-such-cluster", "x")
    with pytest.raises(ValueError, match="before its start"):
        timeline_window(store, cluster_id, 10.0, 5.0)
    empty = timeline_window(store, cluster_id, 1.0, 2.0)  # long before the run
    assert empty.total_tasks == 0 and empty.raw and empty.lanes == ()


def test_a_segment_through_the_server_survives_the_spool(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'server.db'}"
    open_store(database).close()
    server = Server(database, free_port(), tmp_path / "server.log")
    cluster = make_cluster()
    rows, truth = make_run(cluster.started_at + 5, 2000)
    segments = encode_segment(cluster.id, 0, rows)
    spool = tmp_path / "spool"
    sink = HttpSink(server.url, None, spool)  # the server is not up yet
    sink.write([cluster, *segments])
    assert sink.spooled >= 1
    sink.close()
    server.start()
    try:
        again = HttpSink(server.url, None, spool)  # a restarted scheduler's sink
        again.open()  # delivers what the spool holds
        assert again.spooled == 0
        again.write(segments)  # delivered twice: still one row
        again.close()
    finally:
        server.stop()
    with open_store(database) as store:
        with store.engine.connect() as conn:
            query = sa.select(s.task_segments.c.payload).where(
                s.task_segments.c.cluster_id == cluster.id
            )
            payloads = [bytes(p) for p in conn.execute(query).scalars()]
        assert payloads == [segments[0].payload]
        window = timeline_window(store, cluster.id, max_tasks=10_000)
        assert window.total_tasks == len(truth.executions)
