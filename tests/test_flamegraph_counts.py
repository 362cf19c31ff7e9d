"""Innermost frames in the flame graph: Dask's workers leave each sample's innermost
frame uncounted (``profile.process(frame, True, ...)``), so every leaf of a raw profile
reads 0 and the function that burnt the time is drawn with no width. The recorder
counts them back (analysis.flamegraph.count_innermost); checked on hand-built trees and
on the stored profile of a real workload."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from typing import Any

from distributed import Client, LocalCluster, get_task_stream

import daskscope
from daskscope.analysis.flamegraph import (
    INNERMOST_COUNTED,
    count_innermost,
    icicle,
    merge_trees,
)
from daskscope.store import open_store, profile_trees


def node(count: int, **children: dict[str, Any]) -> dict[str, Any]:
    return {"count": count, "description": {}, "children": children}


def nodes(tree: dict[str, Any]) -> Iterator[dict[str, Any]]:
    pending = [tree]
    while pending:
        n = pending.pop()
        yield n
        pending.extend((n.get("children") or {}).values())


def own(n: dict[str, Any]) -> int:
    return int(n["count"]) - sum(c["count"] for c in (n.get("children") or {}).values())


def spin(i: int) -> int:
    # Spins in C calls (perf_counter): this frame is the innermost one of its samples
    end = time.perf_counter() + 0.25
    while time.perf_counter() < end:
        pass
    return i


def test_one_callee_takes_its_callers_surplus_exactly() -> None:
    # 10 samples: 7 ended in leaf, 3 in middle (Dask: middle 7, leaf 0)
    tree = node(10, top=node(10, middle=node(7, leaf=node(0))))
    assert count_innermost(tree) == 0
    top = tree["children"]["top"]
    assert top["count"] == 10
    assert top["children"]["middle"]["count"] == 10
    assert top["children"]["middle"]["children"]["leaf"]["count"] == 7
    assert sum(own(n) for n in nodes(tree)) == 10
    assert count_innermost(tree) == 0  # marked: not counted twice
    assert top["children"]["middle"]["children"]["leaf"]["count"] == 7


def test_several_callees_share_a_surplus_and_say_it_is_estimated() -> None:
    tree = node(9, a=node(4, x=node(0)), b=node(0), c=node(0))
    assert count_innermost(tree) == 1  # the root's surplus is split; a's goes to x
    counts = {k: c["count"] for k, c in tree["children"].items()}
    assert sum(counts.values()) == 9 and min(counts.values()) >= 1 and counts["a"] >= 4
    assert tree["children"]["a"]["children"]["x"]["count"] == 4
    assert tree[INNERMOST_COUNTED] == 1


def test_stored_profile_of_a_real_workload_counts_its_leaves(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'profile.db'}"
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
        cluster_id = daskscope.register(client, database=url, profile_interval=0.5)
        started = time.time()
        client.gather(client.map(spin, range(8)))
        daskscope.flush(client)
        # Dask's own tree of the same run: its leaves read 0 (the cause)
        raw = client.profile(start=started)
    raw_leaves = [n for n in nodes(raw) if not n["children"]]
    assert raw["count"] > 0 and all(n["count"] == 0 for n in raw_leaves)

    with open_store(url) as store:
        windows = profile_trees(store, cluster_id)
    assert windows
    for window in windows:
        tree = window["tree"]
        assert tree[INNERMOST_COUNTED] is not None  # counted by the recorder
        leaves = [n for n in nodes(tree) if not n["children"]]
        assert all(n["count"] >= 1 for n in leaves)
        # every sample ends in exactly one frame: the frames' own counts sum to the root
        assert sum(own(n) for n in nodes(tree)) == tree["count"] == window["samples"]
    merged = merge_trees(w["tree"] for w in windows)
    spinning = [n for n in nodes(merged) if n["description"].get("name") == "spin"]
    assert spinning and all(not n["children"] and n["count"] > 0 for n in spinning)
    # the flame graph draws it: its value and self time are its samples
    drawn = icicle(merged, 0.01)
    at = [i for i, label in enumerate(drawn["labels"]) if label == "spin"]
    assert at and all(drawn["values"][i] > 0 and drawn["self_s"][i] > 0 for i in at)


def test_a_profile_window_is_dated_by_the_samples_it_holds(tmp_path: Any) -> None:
    """A window takes the workers' finished cycles but the newest, so it holds samples
    up to two cycles (2 s) older than the moment it is taken. Dated by that moment, the
    window of a short task began after the task ended, and the task's computation found
    no profile (a CI run of test_exports, 2026-11-26). Dated by its cycles, it covers
    the task's run, and one worker's windows do not overlap (a worker's idle windows hold
    no sample and are not stored)."""
    url = f"sqlite:///{tmp_path / 'profile.db'}"
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
        get_task_stream(client) as stream,
    ):
        cluster_id = daskscope.register(client, database=url, profile_interval=0.5)
        time.sleep(1.5)  # a few windows before the task
        assert client.submit(spin, 1).result() == 1
        time.sleep(3.5)  # the windows after it take its cycle
        daskscope.flush(client)
    [task] = stream.data
    ran = next(s for s in task["startstops"] if s["action"] == "compute")
    with open_store(url) as store:
        windows = sorted(profile_trees(store, cluster_id), key=lambda w: w["started_at"])
    with_spin = [
        w for w in windows if any(n["description"].get("name") == "spin" for n in nodes(w["tree"]))
    ]
    assert with_spin, "no stored window holds the task's samples"
    for w in with_spin:
        assert w["started_at"] <= ran["stop"] and w["stopped_at"] >= ran["start"], (
            (w["started_at"], w["stopped_at"]),
            (ran["start"], ran["stop"]),
        )
    for before, after in itertools.pairwise(windows):
        assert after["started_at"] >= before["stopped_at"] - 1e-6
