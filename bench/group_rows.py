"""Why a many-groups run writes more task-group rows than groups: each record a timed
flush writes, classed by whether its group was done (every group is written once done)
or still running (progress, caught by two flushes in a row). Runs the many-groups graph
of ``overhead.py`` several times in one process, recording as ``overhead.py`` does, and
prints a line per run.

    python bench/group_rows.py [--tasks 100000] [--groups 20000] [--runs 3]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dask
from distributed import Client

import daskscope

sys.path.insert(0, str(Path(__file__).parent))
from overhead import DASK_CONFIG, RECORD_EVERYTHING, bench_cluster, many_groups_workload


def _install(dask_scheduler: Any = None) -> None:
    """Wrap the live tracker's snapshot to class each group record it hands on."""
    from daskscope.model import TaskGroupRecord

    tracker = dask_scheduler.plugins["daskscope"].tracker
    kinds: collections.Counter[str] = collections.Counter()
    writes: collections.Counter[str] = collections.Counter()
    snapshot = tracker.snapshot_groups

    def classed(uses: Any, scheduler: Any, records: list[Any], *, paced: bool = True) -> Any:
        before = len(records)
        out = snapshot(uses, scheduler, records, paced=paced)
        for record in records[before:]:
            if isinstance(record, TaskGroupRecord):
                ended = record.tasks_executed + record.tasks_erred
                state = "done" if ended >= record.tasks_total else "running"
                kinds[f"{'timed' if paced else 'explicit'} flush, group {state}"] += 1
                writes[record.id] += 1
        return out

    tracker.snapshot_groups = classed
    dask_scheduler._group_rows = (kinds, writes)


def _report(dask_scheduler: Any = None) -> dict[str, Any]:
    kinds, writes = dask_scheduler._group_rows
    return {
        "rows": dict(kinds),
        "groups_by_rows_written": dict(sorted(collections.Counter(writes.values()).items())),
        "flushes": dask_scheduler.plugins["daskscope"].flusher.stats.flushes,
    }


def one_run(n_tasks: int, n_groups: int) -> dict[str, Any]:
    graph, root, expected = many_groups_workload(n_tasks, n_groups)
    # the store outlives the cluster (its close writes last records there)
    with (
        tempfile.TemporaryDirectory() as tmp,
        dask.config.set(DASK_CONFIG),
        bench_cluster() as cluster,
        Client(cluster) as client,
    ):
        daskscope.register(client, database=f"sqlite:///{tmp}/s.db", **RECORD_EVERYTHING)
        client.run_on_scheduler(_install)
        started = time.perf_counter()
        assert client.get(graph, root) == expected
        wall = time.perf_counter() - started
        report: dict[str, Any] = client.run_on_scheduler(_report)
    return {"tasks": len(graph), "wall_s": round(wall, 1), **report}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for _ in range(args.runs):
        print(json.dumps(one_run(args.tasks, args.groups)), flush=True)


if __name__ == "__main__":
    main()
