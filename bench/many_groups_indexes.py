"""A task-group index (migration 0008's start order, or 0010's longest groups) side by
side in one run: the cluster page's
reads of the ``bench/seed.py --many-groups N`` cluster (totals and the 20 longest, each
computation's first 50 names by start, the first and last page of groups, the view, the
span filter's prefixes) timed with the index dropped and created again, in
alternating rounds; prints p50/p95 per read and the ratio (without / with).

    python bench/many_groups_indexes.py sqlite:////tmp/dash.db [--rounds 3] [--repeat 10]
                                        [--index start|longest]

It drops and recreates the index on the store it is given: use a benchmark copy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from daskscope.model import stable_id
from daskscope.store import open_store
from daskscope.store import schema as s
from daskscope.store.groups import (
    group_counts_by_computation,
    group_names_by_computation,
    group_page,
    group_summary,
    group_totals_by_computation,
)
from daskscope.views import cluster_view
from daskscope.views.groups import span_scope_view

MANY_GROUPS_ID = stable_id("bench", "many-groups")
#: the index each --index names: 0008's start order, 0010's longest groups
INDEX_NAMES = {
    "start": "ix_task_groups_cluster_id_computation_id_started_at",
    "longest": "ix_task_groups_longest",
}
INDEXES: list[sa.Index] = []


#: totals given, so that group_summary reads only the longest
ZERO = dict.fromkeys(("tasks_total", "tasks_executed", "tasks_erred", "nbytes_total"), 0)
ZERO["duration_s"] = 0.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def reads(store: Any) -> dict[str, Callable[[], Any]]:
    engine = store.engine
    total = cluster_view(store, MANY_GROUPS_ID).task_group_summary.count

    def on_conn(fn: Callable[[sa.Connection], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with engine.connect() as conn:
                return fn(conn)

        return run

    def one_pass(c: sa.Connection) -> Any:
        by = group_totals_by_computation(c, MANY_GROUPS_ID)
        return group_summary(c, MANY_GROUPS_ID, top=20, by_computation=by)

    def two_passes(c: sa.Connection) -> Any:
        group_counts_by_computation(c, MANY_GROUPS_ID)
        return group_summary(c, MANY_GROUPS_ID, top=20)

    return {
        # what cluster_detail did before (two scans) and does now (one), same run
        "totals, counts, 20 longest: 2 passes": on_conn(two_passes),
        "totals, counts, 20 longest: 1 pass": on_conn(one_pass),
        "20 longest (alone)": on_conn(
            lambda c: group_summary(
                c, MANY_GROUPS_ID, top=20, by_computation={None: {"count": 0, **ZERO}}
            )
        ),
        "first 50 names per computation": on_conn(
            lambda c: group_names_by_computation(c, MANY_GROUPS_ID, per_computation=50)
        ),
        "task-groups first page": on_conn(
            lambda c: group_page(c, MANY_GROUPS_ID, offset=0, limit=1000)
        ),
        "task-groups last page": on_conn(
            lambda c: group_page(c, MANY_GROUPS_ID, offset=max(0, total - 1000), limit=1000)
        ),
        "cluster view (page, JSON)": lambda: cluster_view(store, MANY_GROUPS_ID),
        "prefixes (all groups)": lambda: span_scope_view(
            store, MANY_GROUPS_ID, span=None, tag=None
        ),
    }


def set_indexes(engine: sa.Engine, present: bool) -> None:
    with engine.begin() as conn:
        for index in INDEXES:
            if present:
                index.create(conn, checkfirst=True)
            else:
                index.drop(conn, checkfirst=True)
        if engine.dialect.name == "postgresql":
            conn.execute(sa.text("ANALYZE task_groups"))
        else:
            conn.execute(sa.text("ANALYZE"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--index", choices=sorted(INDEX_NAMES), default="start")
    args = parser.parse_args()
    INDEXES[:] = [i for i in s.task_groups.indexes if i.name == INDEX_NAMES[args.index]]
    print(f"index dropped and created again: {INDEX_NAMES[args.index]}")
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    store = open_store(args.url)
    timings: dict[tuple[str, bool], list[float]] = {}
    try:
        plan = reads(store)
        for _ in range(args.rounds):
            for present in (False, True):
                set_indexes(store.engine, present)
                for name, read in plan.items():
                    read()  # warm
                    for _ in range(args.repeat):
                        started = time.perf_counter()
                        read()
                        elapsed = (time.perf_counter() - started) * 1000
                        timings.setdefault((name, present), []).append(elapsed)
        set_indexes(store.engine, True)
    finally:
        store.close()
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    width = max(len(n) for n in plan)
    print(
        f"{'read (' + store.engine.dialect.name + ')':<{width}}  {'without p50':>11}  "
        f"{'p95':>7}  {'with p50':>8}  {'p95':>7}  {'ratio p50':>9}"
    )
    for name in plan:
        without, with_ = timings[(name, False)], timings[(name, True)]
        a, b = statistics.median(without), statistics.median(with_)
        print(
            f"{name:<{width}}  {a:>11.1f}  {percentile(without, 0.95):>7.1f}  {b:>8.1f}  "
            f"{percentile(with_, 0.95):>7.1f}  {a / b:>9.2f}"
        )


if __name__ == "__main__":
    main()
