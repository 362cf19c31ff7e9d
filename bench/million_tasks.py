"""A real cluster run of a million tasks, recorded in full, beside the same run without
daskscope (issue 13).

Each arm starts a ``dask scheduler`` process (with ``--preload daskscope`` and an SQLite
store, or without) and ``dask worker --nworkers 2 --nthreads 1``, then computes
``--batches`` graphs of ``--tasks / --batches`` tiny tasks one after the other (leaves
and a 16-way tree sum, as ``bench/overhead.py``'s small graph), the way a notebook
computes one result after another. The arms alternate (``--pairs``).

It prints per arm the wall time of the computes, the scheduler's CPU (its process, and
with daskscope the child process that writes the store), the scheduler's peak resident
memory (``VmHWM``), and with daskscope the bytes a task the task log takes in the store
(segment payloads, summaries and key filters; and the whole SQLite file). It checks the
log against ground truths of the same run: the tasks submitted, and each worker's own
count of the tasks it executed (``WorkerState.executed_count``), per worker.

    python bench/million_tasks.py [--tasks 1000000] [--batches 10] [--pairs 1]
"""

from __future__ import annotations

import argparse
import collections
import json
import operator
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from distributed import Client

from daskscope.store import list_clusters, open_store
from daskscope.tasklog.scan import scan_segments

sys.path.insert(0, str(Path(__file__).parent))
from overhead import tree_sum

BIN = Path(sys.executable).parent

Graph = dict[Any, Any]


def batch_graph(batch: int, n_tasks: int) -> tuple[Graph, Any, int]:
    """About ``n_tasks`` tiny tasks in 2 groups (``leafB``, ``sumB``), keys unique to the
    batch (``overhead.py``'s small graph); returns the graph, its root key and the
    expected result."""
    leaves = n_tasks * 15 // 16
    graph: Graph = {f"leaf{batch}-{i}": (operator.add, i, 1) for i in range(leaves)}
    return graph, tree_sum(graph, list(graph), f"sum{batch}"), leaves * (leaves + 1) // 2


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)


def _peak_rss(pid: int) -> int:
    """The process's peak resident set size in bytes (Linux ``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def _cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def _store_children(scheduler: psutil.Process) -> list[psutil.Process]:
    return scheduler.children(recursive=True)


def one_arm(folder: Path, recorded: bool, n_tasks: int, batches: int) -> dict[str, Any]:
    env = dict(os.environ)
    env["DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION"] = "inf"
    db = folder / "store.db"
    scheduler_args = [str(BIN / "dask"), "scheduler", "--port", "0", "--no-dashboard"]
    address_file = folder / "scheduler.json"
    scheduler_args += ["--scheduler-file", str(address_file)]
    if recorded:
        scheduler_args += ["--preload", "daskscope"]
        env["DASK_DASKSCOPE__DATABASE"] = f"sqlite:///{db}"
        env["DASK_DASKSCOPE__CLUSTER_NAME"] = "million"
    log = folder / "cluster.log"
    scheduler = _start(scheduler_args, env, log)
    workers = None
    try:
        for _ in range(600):
            if address_file.exists() and address_file.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(address_file.read_text())["address"]
        workers = _start(
            [str(BIN / "dask"), "worker", address, "--nworkers", "2", "--nthreads", "1",
             "--no-dashboard", "--memory-limit", "4GiB"],
            env, log,
        )  # fmt: skip
        sched = psutil.Process(scheduler.pid)
        with Client(address) as client:
            client.wait_for_workers(2, timeout=120)
            # CPU from here on: the store child's start (once a cluster) is left out
            child_cpu0 = {c.pid: _cpu(c) for c in _store_children(sched)}
            cpu0 = _cpu(sched)
            wall0 = time.perf_counter()
            submitted = 0
            per = n_tasks // batches
            for b in range(batches):
                graph, root, expected = batch_graph(b, per)
                result = client.get(graph, root)
                assert result == expected, (b, result, expected)
                submitted += len(graph)
                elapsed = time.perf_counter() - wall0
                note = f"  batch {b + 1}/{batches}: {submitted:,} tasks, {elapsed:.0f} s"
                print(note, file=sys.stderr, flush=True)
            wall = time.perf_counter() - wall0
            executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
            names = client.run(lambda dask_worker: dask_worker.name)
            children = _store_children(sched)
            scheduler_cpu = _cpu(sched) - cpu0
            child_cpu = sum(_cpu(c) - child_cpu0.get(c.pid, 0.0) for c in children)
            peak = _peak_rss(scheduler.pid)
            child_peak = max((_peak_rss(c.pid) for c in children), default=0)
    finally:
        if workers is not None:
            workers.send_signal(signal.SIGTERM)
        # a normal shutdown: the recorder writes what it still holds before it exits
        scheduler.send_signal(signal.SIGTERM)
        scheduler.wait(timeout=300)
        if workers is not None:
            workers.wait(timeout=120)
    out: dict[str, Any] = {
        "wall_s": wall,
        "scheduler_cpu_s": scheduler_cpu,
        "child_cpu_s": child_cpu,
        "scheduler_peak_rss": peak,
        "child_peak_rss": child_peak,
        "submitted": submitted,
        "executed_by_worker": {names[a]: executed[a] for a in executed},
        "executed_by_address": executed,
    }
    if recorded:
        out.update(stored(db, executed))
    return out


def stored(db: Path, executed: dict[str, int]) -> dict[str, Any]:
    """What the store holds of the run, against the workers' own counts."""
    store = open_store(f"sqlite:///{db}")
    (cluster,) = list_clusters(store, limit=None)
    per_worker: collections.Counter[str] = collections.Counter()
    executions = 0
    for seg in scan_segments(store, cluster["id"]):
        d = seg.decoded
        executions += len(d)
        for index, count in collections.Counter(d.worker.tolist()).items():
            per_worker[d.names[index]] += count
    store.engine.dispose()
    with sqlite3.connect(db) as conn:
        payload, summary, key_filter, segments = conn.execute(
            "SELECT sum(length(payload)), sum(length(summary)), sum(length(key_filter)), "
            "count(*) FROM task_segments"
        ).fetchone()
    file_bytes = sum(f.stat().st_size for f in db.parent.glob("store.db*"))
    return {
        "stored_executions": executions,
        "stored_by_worker": dict(per_worker),
        "workers_agree": dict(per_worker) == executed,
        "segments": segments,
        "log_bytes": payload + summary + key_filter,
        "payload_bytes": payload,
        "file_bytes": file_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=1)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    with tempfile.TemporaryDirectory(prefix="daskscope-million-") as tmp:
        for pair in range(args.pairs):
            order = ("without", "with") if pair % 2 == 0 else ("with", "without")
            for arm in order:
                folder = Path(tmp) / f"{pair}-{arm}"
                folder.mkdir()
                print(f"pair {pair + 1}, {arm} daskscope", file=sys.stderr, flush=True)
                run = one_arm(folder, arm == "with", args.tasks, args.batches)
                runs[arm].append(run)
                line = (f"pair {pair + 1} {arm:7s}: {run['submitted']:,} tasks in "
                        f"{run['wall_s']:.1f} s, scheduler CPU {run['scheduler_cpu_s']:.1f} s"
                        f" + store child {run['child_cpu_s']:.1f} s, scheduler peak RSS "
                        f"{run['scheduler_peak_rss'] / 2**20:.0f} MiB")  # fmt: skip
                if arm == "with":
                    n = run["stored_executions"]
                    line += (f", store child peak {run['child_peak_rss'] / 2**20:.0f} MiB; "
                             f"stored {n:,} executions (workers counted "
                             f"{sum(run['executed_by_address'].values()):,}; per worker "
                             f"{'equal' if run['workers_agree'] else 'DIFFERENT'}), "
                             f"{run['log_bytes'] / n:.2f} B a task in the log "
                             f"({run['payload_bytes'] / n:.2f} payload), SQLite file "
                             f"{run['file_bytes'] / n:.2f} B a task")  # fmt: skip
                print(line, flush=True)
    pairs = list(zip(runs["without"], runs["with"], strict=True))
    wall = [w["wall_s"] / o["wall_s"] for o, w in pairs]
    cpu = [(w["scheduler_cpu_s"] + w["child_cpu_s"]) / o["scheduler_cpu_s"] for o, w in pairs]
    rss = [w["scheduler_peak_rss"] / o["scheduler_peak_rss"] for o, w in pairs]
    summary = {
        "tasks": runs["with"][0]["submitted"],
        "wall_ratio": statistics.median(wall),
        "scheduler_cpu_ratio": statistics.median(cpu),
        "peak_rss_ratio": statistics.median(rss),
        "peak_rss_without_mib": [o["scheduler_peak_rss"] / 2**20 for o, _ in pairs],
        "peak_rss_with_mib": [w["scheduler_peak_rss"] / 2**20 for _, w in pairs],
        "log_bytes_per_task": [w["log_bytes"] / w["stored_executions"] for _, w in pairs],
        "file_bytes_per_task": [w["file_bytes"] / w["stored_executions"] for _, w in pairs],
        "all_executions_stored": all(w["workers_agree"] for _, w in pairs),
    }
    print(f"wall ratio (with / without): median {summary['wall_ratio']:.3f} {wall}")
    print(f"scheduler CPU ratio (its process + store child): median "
          f"{summary['scheduler_cpu_ratio']:.3f} {cpu}")  # fmt: skip
    print(f"scheduler peak RSS ratio: median {summary['peak_rss_ratio']:.3f}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
