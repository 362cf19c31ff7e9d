"""The ``transition`` hook's cost per call on each of its paths, for daskscope source
trees side by side (e.g. before and after a change), alternating runs in fresh
processes so that the machine's load falls on both alike.

    python bench/hook_compare.py --rounds 5 OLD_SRC NEW_SRC

Each run starts a LocalCluster in its own process with daskscope imported from the
given ``src`` directory, computes 20,000 tiny tasks (keeping one leaf), then calls the
live plugin's hook 100,000 times per path: filtered (waiting → processing), counting
(processing → memory with a stimulus id alone, as ``bench/overhead.py`` times it),
counting as Dask calls it (``counting_dask``: with the worker's report of one compute
action, which the task log appends) and forgotten (released → forgotten), in wall time
and in CPU time of the calling thread (wall time on a loaded machine counts other
processes' turns). Nothing is wrapped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import asyncio, json, operator, sys, tempfile, time
from distributed import Client, LocalCluster
import daskscope

async def main():
    graph = {f"leaf-{i}": (operator.add, i, 1) for i in range(20_000)}
    keep = "leaf-0"
    with tempfile.TemporaryDirectory() as tmp:
        async with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                dashboard_address=":0", asynchronous=True) as cluster, \
                   Client(cluster, asynchronous=True) as client:
            await daskscope.register(client, database=f"sqlite:///{tmp}/h.sqlite")
            plugin = cluster.scheduler.plugins["daskscope"]
            futures = client.get(graph, list(graph), sync=False)
            await client.gather(futures)
            calls = 100_000
            out = {"daskscope": daskscope.__file__}
            now = time.time()
            # what Dask hands the hook with a task's finish (the task log appends it)
            dask = dict(worker="tcp://127.0.0.1:1", nbytes=28, type=b"int", typename="int",
                        metadata={}, thread=1, status="OK",
                        startstops=[{"action": "compute", "start": now, "stop": now + 1e-3}])
            for name, start, finish, more in (
                    ("filtered", "waiting", "processing", {}),
                    ("counting", "processing", "memory", {}),
                    ("counting_dask", "processing", "memory", dask),
                    ("forgotten", "released", "forgotten", {})):
                t0, c0 = time.perf_counter(), time.thread_time()
                for _ in range(calls):
                    plugin.transition(keep, start, finish, stimulus_id="bench", **more)
                out[name] = (time.perf_counter() - t0) / calls * 1e6
                out[name + "_cpu"] = (time.thread_time() - c0) / calls * 1e6
                if plugin.task_log is not None:
                    plugin.task_log.rows.clear()  # nothing of the above is written
            del futures
    print(json.dumps(out))

asyncio.run(main())
"""


def one(src: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=src)
    with tempfile.TemporaryDirectory() as cwd:  # never the checkout's own package
        done = subprocess.run(
            [sys.executable, "-c", CHILD],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("trees", nargs="+", help="daskscope src directories")
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {t: [] for t in args.trees}
    for r in range(args.rounds):
        order = args.trees if r % 2 == 0 else list(reversed(args.trees))
        for tree in order:
            run = one(tree)
            assert run["daskscope"].startswith(tree), run["daskscope"]
            results[tree].append(run)
            print(tree, {k: round(v, 3) for k, v in run.items() if k != "daskscope"}, flush=True)
    summary = {
        tree: {
            path: statistics.median(run[path] for run in runs)
            for path in (
                "filtered",
                "counting",
                "counting_dask",
                "forgotten",
                "filtered_cpu",
                "counting_cpu",
                "counting_dask_cpu",
                "forgotten_cpu",
            )
        }
        for tree, runs in results.items()
    }
    for tree, medians in summary.items():
        print(f"{tree}: median µs a call " + ", ".join(f"{k} {v:.3f}" for k, v in medians.items()))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
