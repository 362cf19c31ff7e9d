"""The timeline's store queries (tasklog/window.py, tasklog/lookups.py) on what they
filter and how they add up: a span filter keeps the span's whole subtree (a real run of
nested spans), a filter naming something a segment lacks keeps nothing, and zoomed-out
windows read from summaries (at coarser levels too) agree with the executions the test wrote."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pytest
from distributed import Client, LocalCluster, span

import daskscope
from daskscope.store import Store, open_store, write_records
from daskscope.tasklog import bins as timeline_bins
from daskscope.tasklog.lookups import task_executions
from daskscope.tasklog.segments import decode_segment, encode_segment, execution
from daskscope.tasklog.summaries import BINS
from daskscope.tasklog.window import timeline_window
from factories import make_cluster
from lane_bins import lane_bins


def inc(i: int) -> int:
    return i + 1


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def nested(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """A run with tasks in ``outer``, in ``inner`` (inside ``outer``) and in neither;
    the keys submitted in each are the ground truth."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('queries') / 'store.db'}"
    else:
        import psycopg

        server = request.getfixturevalue("postgres_server")
        name = f"q_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(server.replace("+psycopg", "") + "/postgres", autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        url = f"{server}/{name}"
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url, name="nested spans")
        with dask.config.set({"optimization.fuse.active": False}):
            plain = [dask.delayed(inc, pure=False)(i, dask_key_name=f"plain-{i}") for i in range(5)]
            dask.compute(*plain)
            with span("outer") as outer_id:
                own = [dask.delayed(inc)(i, dask_key_name=f"outer-{i}") for i in range(7)]
                dask.compute(*own)
                with span("inner") as inner_id:
                    deep = [dask.delayed(inc)(i, dask_key_name=f"inner-{i}") for i in range(4)]
                    dask.compute(*deep)
        assert daskscope.flush(client)["write_failures"] == 0
    with open_store(url) as store:
        yield {
            "store": store,
            "cluster_id": cluster_id,
            "outer": outer_id,
            "inner": inner_id,
            "keys": {
                "plain": {f"plain-{i}" for i in range(5)},
                "outer": {f"outer-{i}" for i in range(7)},
                "inner": {f"inner-{i}" for i in range(4)},
            },
        }


def keys_in(window: Any) -> set[str]:
    return {t.key for t in window.tasks}


def test_a_span_filter_keeps_the_spans_below_it(nested: dict[str, Any]) -> None:
    store, cluster_id, keys = nested["store"], nested["cluster_id"], nested["keys"]
    everything = timeline_window(store, cluster_id)
    assert keys_in(everything) == keys["plain"] | keys["outer"] | keys["inner"]
    outer = timeline_window(store, cluster_id, span_id=nested["outer"])
    assert outer.raw and keys_in(outer) == keys["outer"] | keys["inner"]
    assert outer.total_tasks == len(keys["outer"]) + len(keys["inner"])
    inner = timeline_window(store, cluster_id, span_id=nested["inner"])
    assert keys_in(inner) == keys["inner"]
    # the task itself names its innermost span
    (one,) = task_executions(store, cluster_id, "inner-0")
    assert one.span_id == nested["inner"]
    # binned, the subtree's tasks are counted too
    binned = timeline_window(store, cluster_id, span_id=nested["outer"], max_tasks=0, bins=7)
    assert not binned.raw
    assert binned.total_tasks == len(keys["outer"]) + len(keys["inner"])
    assert sum(b.tasks for lane in binned.lanes for b in lane_bins(lane)) >= binned.total_tasks


def test_a_name_no_segment_holds_selects_nothing(nested: dict[str, Any]) -> None:
    store, cluster_id = nested["store"], nested["cluster_id"]
    # the plain tasks ran in no span: a span the log never saw must not pick them
    for filters in ({"span_id": "no-such-span"}, {"computation_id": "no-such-computation"}):
        window = timeline_window(store, cluster_id, **filters)
        assert window.total_tasks == 0 and window.tasks == () and window.lanes == ()
    assert timeline_window(store, cluster_id, group="no-such-group").total_tasks == 0


# -- summaries over a larger synthetic log ------------------------------------------------


def synthetic(store: Store, n: int, per_segment: int) -> tuple[str, dict[str, Any]]:
    """``n`` executions on 6 worker threads, back to back, in segments of
    ``per_segment``; computation None for the first half (no computation known)."""
    rng = np.random.default_rng(3)
    cluster = make_cluster()
    lanes = [(f"tcp://10.0.0.{w}:4000", 7000 + t) for w in range(3) for t in range(2)]
    clock = dict.fromkeys(lanes, cluster.started_at + 1.0)
    rows = []
    compute = 0.0
    transfer = 0.0
    for i in range(n):
        lane = lanes[i % len(lanes)]
        start = clock[lane] + float(rng.uniform(0, 0.002))
        startstops = []
        if i % 6 == 0:
            took = float(rng.uniform(0.001, 0.01))
            startstops.append(
                {"action": "transfer", "start": start, "stop": start + took, "source": lanes[0][0]}
            )
            transfer += took
            start += took
        took = float(rng.uniform(0.001, 0.05))
        startstops.append({"action": "compute", "start": start, "stop": start + took})
        compute += took
        clock[lane] = start + took
        group = f"work-{i // 5000:04x}"
        computation = None if i < n // 2 else "late"
        rows.append(
            execution((group, i), group, "work", lane[0], lane[1], startstops, erred=False,
                      nbytes=8, computation=computation, span=None)
        )  # fmt: skip
    records: list[Any] = [cluster]
    for first in range(0, n, per_segment):
        records += encode_segment(cluster.id, len(records) - 1, rows[first : first + per_segment])
    write_records(store, records)
    truth = {
        "compute": compute,
        "transfer": transfer,
        "lanes": set(lanes),
    }
    return cluster.id, truth


def test_zoomed_out_windows_add_up_summaries_at_every_level(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        cluster_id, truth = synthetic(store, 60_000, 10_000)
        # 6 segments: from a bin a segment (a coarse level) to many bins a segment
        for bins in (3, 6, 24, 100, 1000, 4 * BINS * 6):
            window = timeline_window(store, cluster_id, max_tasks=1000, bins=bins)
            assert not window.raw and window.total_tasks == 60_000
            assert {(lane.worker, lane.thread) for lane in window.lanes} == truth["lanes"]
            compute = sum(float(lane.columns.busy["compute"].sum()) for lane in window.lanes)
            moved = sum(float(lane.columns.busy["transfer"].sum()) for lane in window.lanes)
            assert compute == pytest.approx(truth["compute"], rel=1e-4)
            assert moved == pytest.approx(truth["transfer"], rel=1e-4)
            # every execution counted once where summaries count starts
            assert sum(int(lane.columns.tasks.sum()) for lane in window.lanes) >= 60_000
            # the objects made from the columns say the same
            lane = window.lanes[0]
            assert len(lane_bins(lane)) == bins
            assert sum(b.busy_s.get("compute", 0.0) for b in lane_bins(lane)) == pytest.approx(
                float(lane.columns.busy["compute"].sum())
            )
            assert {b.top_group for b in lane_bins(lane)} - {None} <= {
                f"work-{g:04x}" for g in range(12)
            }
        # each busy bin is at most as long as the bin, on every lane
        fine = timeline_window(store, cluster_id, max_tasks=1000, bins=2000)
        for lane in fine.lanes:
            width = lane.columns.stop - lane.columns.start
            assert (lane.columns.busy["compute"] <= width * (1 + 1e-3) + 1e-6).all()


def test_a_filter_without_its_name_in_a_segment_keeps_nothing_there(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        cluster_id, _ = synthetic(store, 6000, 2000)
        late = timeline_window(store, cluster_id, computation_id="late", max_tasks=10_000)
        assert late.raw and late.total_tasks == 3000
        assert {t.computation_id for t in late.tasks} == {"late"}
        # the first segments hold no "late" and no "other": rows without a computation
        # (code -1, as an absent name's index) must not be taken for them
        other = timeline_window(store, cluster_id, computation_id="other", max_tasks=10_000)
        assert other.total_tasks == 0 and other.tasks == ()
        binned = timeline_window(store, cluster_id, computation_id="other", max_tasks=0)
        assert binned.total_tasks == 0
        assert sum(b.tasks for lane in binned.lanes for b in lane_bins(lane)) == 0


def test_the_exports_reader_of_one_computation_holds_only_its_tasks(tmp_path: Path) -> None:
    """The exports' column-wise reader (tasklog.scan) under the same rule: a segment
    that never names the computation gives none of its executions."""
    from daskscope.tasklog.scan import log_extent, ordered_rows, scan_segments

    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        cluster_id, _ = synthetic(store, 6000, 2000)
        assert log_extent(store, cluster_id, computation="late").executions == 3000
        assert log_extent(store, cluster_id, computation="other").executions == 0
        for computation, expected in (("late", 3000), ("other", 0)):
            rows = ordered_rows(scan_segments(store, cluster_id), computation=computation)
            assert sum(len(batch.rows) for batch in rows) == expected, computation


@pytest.mark.parametrize("table", ["dense", "sorted"])
def test_each_bins_main_group_is_the_one_with_most_compute(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The main group of a decoded segment's cells, against a count by hand: the group
    with the most compute seconds in the cell (a dense (cell, group) table when small,
    sorted pairs when not: both ways)."""
    if table == "sorted":
        monkeypatch.setattr(timeline_bins, "_DENSE_CELLS", 0)
    rng = np.random.default_rng(11)
    lanes = [(f"tcp://10.0.0.{w}:4000", 7000 + t) for w in range(2) for t in range(2)]
    rows, clock = [], dict.fromkeys(lanes, 1.8e9)
    for i in range(3000):
        lane = lanes[i % len(lanes)]
        start = clock[lane] + float(rng.uniform(0, 0.01))
        stop = clock[lane] = start + float(rng.uniform(0.001, 0.2))
        group = f"g{int(rng.integers(5))}"
        rows.append(
            execution((group, i), group, "g", lane[0], lane[1],
                      [{"action": "compute", "start": start, "stop": stop}], erred=False,
                      nbytes=8, computation=None, span=None)
        )  # fmt: skip
    [record] = encode_segment("c", 0, rows)
    seg = decode_segment(record.format, record.payload)
    start, stop, bins = float(seg.start.min()), float(seg.stop.max()), 40
    sums = timeline_bins.BinSums(sorted(lanes), start, stop, bins)
    sums.add_decoded(seg, np.arange(len(seg)), seg.start, seg.stop)
    edges = np.linspace(start, stop, bins + 1)
    by_cell: dict[tuple[int, int], dict[str, float]] = {}
    for row in rows:
        lane = sorted(lanes).index((row[3], row[4]))
        for b in range(bins):
            inside = min(row[6], edges[b + 1]) - max(row[5], edges[b])
            if inside > 0:
                cell = by_cell.setdefault((lane, b), {})
                cell[row[1]] = cell.get(row[1], 0.0) + inside
    names = {i: name for name, i in sums.group_ids.items()}
    for (lane, b), seconds in by_cell.items():
        main = max(seconds, key=seconds.__getitem__)
        assert names[int(sums.top_group[lane, b])] == main
        assert sums.top_seconds[lane, b] == pytest.approx(seconds[main], abs=1e-4)  # µs kept
    assert int((sums.top_group >= 0).sum()) == len(by_cell)
