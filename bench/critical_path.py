"""Cost of the critical-path models (``daskscope.analysis.critical_path``) by size, each
part side by side in one run:

- **stages** (the group model): the path alone, one simulation, and the page's whole
  what-if list; ``--groups`` groups, each depending on up to two earlier ones at random,
  the tasks spread evenly, durations uniform in [0, 1) s (seeded);
- **jobs** (through the task dependencies, the task log's triggers): building the job
  graph, the path, one simulation on 8 threads and the whole what-if list, for
  computations of ``--job-tasks`` executions in four shapes: *array* (chunks loaded,
  two elementwise steps each, then a tree reduction 8 at a time), *chains* (``x =
  f(x)`` loops of 10), *fan-in* (everything feeding one task), *independent* (no
  dependency at all);
- **view**: ``critical_path_view`` end to end (the task log read column-wise from a
  SQLite store, the model, the estimates) on one computation of the *array* shape with
  ``--view-tasks`` executions, stored through the recorder's segment encoding; and the
  task-log read alone.

    python bench/critical_path.py [--parts stages jobs view] [--tasks 5000 50000 200000]
        [--groups 1000] [--job-tasks 10000 100000] [--view-tasks 100000]

Prints milliseconds of wall time (best of three; the whole lists and the view once each,
with their CPU time beside: on a shared machine much of the wall time is waiting for a
core) and the ratios to the path alone.
"""

from __future__ import annotations

import argparse
import heapq
import os
import random
import tempfile
import time
from typing import Any

from daskscope.analysis.critical_path import (
    critical_path,
    job_graph,
    job_path,
    jobs_what_if,
    simulate_jobs,
    simulate_threads,
    stages_of,
    what_if,
)

#: worker threads of the recorded runs the job graphs come from
LANES = 16


def best_ms(fn: object, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - started) * 1000)
    return min(times)


def stage_part(tasks_list: list[int], group_count: int) -> None:
    print(f"{'tasks':>9} {'path ms':>9} {'1 sim (8 thr) ms':>17} {'what-if ms':>11} {'counts':>7} "
          f"{'sim/path':>9} {'what-if/path':>13}")  # fmt: skip
    for tasks in tasks_list:
        rng = random.Random(tasks)
        per = max(1, tasks // group_count)
        groups = [
            (
                f"g{i}",
                [f"g{j}" for j in rng.sample(range(i), min(i, 2))],
                [rng.random() for _ in range(per)],
            )
            for i in range(group_count)
        ]
        stages = stages_of(groups)
        path = best_ms(lambda: critical_path(stages))  # noqa: B023
        one = best_ms(lambda: simulate_threads(stages, 8))  # noqa: B023
        counts = len(what_if(stages))
        whole = best_ms(lambda: what_if(stages), runs=1)  # noqa: B023
        print(f"{per * group_count:>9,} {path:>9.1f} {one:>17.1f} {whole:>11.1f} {counts:>7} "
              f"{one / path:>9.1f} {whole / path:>13.1f}")  # fmt: skip


def shape(name: str, tasks: int, seed: int = 0) -> list[tuple[str, str, float, str | None]]:
    """(key, group, seconds, trigger) of each execution of a computation of ``name``'s
    shape, in an order where a trigger comes before its dependents."""
    rng = random.Random(seed)
    out: list[tuple[str, str, float, str | None]] = []

    def add(group: str, trigger: str | None, seconds: float | None = None) -> str:
        key = f"{group}-{len(out)}"
        out.append((key, group, rng.uniform(0.01, 0.2) if seconds is None else seconds, trigger))
        return key

    if name == "array":  # 4 tasks a chunk, then a tree reduction 8 at a time
        chunks = max(1, tasks * 7 // 24)
        level = []
        for _ in range(chunks):
            k = add("load", None)
            k = add("clean", k)
            level.append(add("transform", k))
        depth = 0
        while len(level) > 1:
            depth += 1
            level = [add(f"sum-{depth}", max(level[i : i + 8], key=lambda k: k))
                     for i in range(0, len(level), 8)]  # fmt: skip
    elif name == "chains":
        for _ in range(max(1, tasks // 10)):
            k = None
            for _ in range(10):
                k = add("f", k)
    elif name == "fan-in":
        keys = [add("part", None) for _ in range(tasks - 1)]
        add("combine", keys[-1])
    else:
        for _ in range(tasks):
            add("each", None)
    return out


def replay(rows: list[tuple[str, str, float, str | None]]) -> list[tuple[float, float]]:
    """Start and stop of each execution as a run on :data:`LANES` threads would have
    them (a free thread takes the next ready execution in order)."""
    ends: dict[str, float] = {}
    lanes = [0.0] * LANES
    times = []
    for key, _, seconds, trigger in rows:
        free = heapq.heappop(lanes)
        start = max(free, ends.get(trigger, 0.0) if trigger else 0.0) + 0.0005
        ends[key] = start + seconds
        heapq.heappush(lanes, ends[key])
        times.append((start, ends[key]))
    return times


def columns(name: str, tasks: int) -> tuple[list[Any], ...]:
    rows = shape(name, tasks)
    times = replay(rows)
    return (
        [r[0] for r in rows],
        [r[1] for r in rows],
        [t[0] for t in times],
        [t[1] for t in times],
        [r[2] for r in rows],
        [r[3] for r in rows],
    )


def job_part(tasks_list: list[int]) -> None:
    print(f"{'shape':>12} {'tasks':>9} {'graph ms':>9} {'path ms':>8} {'1 sim (8) ms':>13} "
          f"{'what-if ms':>11} {'its CPU ms':>11} {'counts':>7} {'graph+list ms':>14}")  # fmt: skip
    for tasks in tasks_list:
        for name in ("array", "chains", "fan-in", "independent"):
            cols = columns(name, tasks)
            graph = job_graph(*cols)
            built = best_ms(lambda: job_graph(*cols))  # noqa: B023
            path = best_ms(lambda: job_path(graph))  # noqa: B023
            one = best_ms(lambda: simulate_jobs(graph, 8))  # noqa: B023
            counts = len(jobs_what_if(graph))
            cpu = time.process_time()
            whole = best_ms(lambda: jobs_what_if(graph), runs=1)  # noqa: B023
            cpu = (time.process_time() - cpu) * 1000
            print(f"{name:>12} {len(cols[0]):>9,} {built:>9.1f} {path:>8.1f} {one:>13.1f} "
                  f"{whole:>11.1f} {cpu:>11.1f} {counts:>7} {built + whole:>14.1f}")  # fmt: skip


def view_part(tasks: int) -> None:
    from daskscope import model
    from daskscope.store import open_store, write_records
    from daskscope.tasklog import segments
    from daskscope.views.critical_path import _read_log, critical_path_view

    t0 = 1_790_000_000.0
    rows = shape("array", tasks)
    times = replay(rows)
    cluster_id = model.stable_id("bench-critical-path", tasks)
    computation_id = model.stable_id(cluster_id, "computation")
    records: list[Any] = []
    buffered: list[Any] = []
    number = 0
    for i, ((key, group, _, trigger), (start, stop)) in enumerate(zip(rows, times, strict=True)):
        trigger_group = trigger.rsplit("-", 1)[0] if trigger else None
        buffered.append(segments.execution(
            key, group, group.split("-")[0], f"tcp://10.0.0.{i % 4}:4000", i % LANES,
            [{"action": "compute", "start": t0 + start, "stop": t0 + stop}], erred=False,
            nbytes=8000, computation=computation_id, span=None,
            trigger=(trigger, trigger_group) if trigger else None))  # fmt: skip
        if len(buffered) == 50_000:
            sealed = segments.encode_segment(cluster_id, number, buffered)
            number += len(sealed)
            records += sealed
            buffered = []
    if buffered:
        records += segments.encode_segment(cluster_id, number, buffered)
    last = t0 + max(t[1] for t in times)
    by_group: dict[str, list[int]] = {}
    for i, (_, group, _, _) in enumerate(rows):
        by_group.setdefault(group, []).append(i)
    order = ["load", "clean", "transform", *sorted(g for g in by_group if g.startswith("sum"))]
    cluster = model.ClusterRecord(
        id=cluster_id, name="critical path bench", account="default", user="bench",
        scheduler_address="tcp://10.0.0.1:8786", dask_version="2026.8.0",
        distributed_version="2026.8.0", python_version="3.11", started_at=t0 - 1,
        stopped_at=last + 1, last_seen_at=last + 1)  # fmt: skip
    comp = model.ComputationRecord(
        id=computation_id, cluster_id=cluster_id, started_at=t0 - 0.5, stopped_at=last,
        tasks_executed=len(rows), group_count=len(order))  # fmt: skip

    def group_record(k: int, g: str) -> Any:
        mine = by_group[g]
        seconds = sum(rows[i][2] for i in mine)
        return model.TaskGroupRecord(
            id=model.stable_id(cluster_id, "group", g),
            cluster_id=cluster_id,
            name=g,
            prefix=g.split("-")[0],
            computation_id=computation_id,
            dependencies=[order[k - 1]] if k else [],
            tasks_total=len(mine),
            tasks_executed=len(mine),
            duration_s=seconds,
            durations={"compute": seconds},
            started_at=t0 + min(times[i][0] for i in mine),
            stopped_at=t0 + max(times[i][1] for i in mine),
        )

    groups = [group_record(k, g) for k, g in enumerate(order)]
    with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite:///{tmp}/bench.db") as store:
        write_records(store, [cluster, comp, *groups])
        for at in range(0, len(records), 4):
            write_records(store, records[at : at + 4])
        detail = {"started_at": comp.started_at, "stopped_at": comp.stopped_at}
        read = best_ms(lambda: _read_log(store, cluster_id, computation_id, detail))
        started, cpu = time.perf_counter(), time.process_time()
        view = critical_path_view(store, cluster_id, computation_id)
        whole = (time.perf_counter() - started) * 1000
        cpu = (time.process_time() - cpu) * 1000
        assert view is not None
        print(
            f"view of {len(rows):,} executions ({view.model}): {whole:.0f} ms in all "
            f"({cpu:.0f} ms of CPU), "
            f"the task log read {read:.0f} ms (best of 3); critical path "
            f"{view.critical_path_s:.2f} s, {len(view.estimates)} counts "
            f"(complete: {view.estimates_complete}), measured on "
            f"{view.measured_threads} threads"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["stages", "jobs", "view"],
                        choices=["stages", "jobs", "view"])  # fmt: skip
    parser.add_argument("--tasks", type=int, nargs="+", default=[5_000, 50_000, 200_000])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--job-tasks", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--view-tasks", type=int, default=100_000)
    args = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    if "stages" in args.parts:
        stage_part(args.tasks, args.groups)
    if "jobs" in args.parts:
        job_part(args.job_tasks)
    if "view" in args.parts:
        view_part(args.view_tasks)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
