"""Profile windows across a stalled scheduler: the samples daskscope stores against the
workers' own count, when the scheduler's event loop is blocked mid-run (which moves the
workers' estimate of its clock and puts their profile stamps out of order).

Two worker processes, windows every 0.7 s, 600 tasks of 20 ms, and 2 s into the run a
function sleeping 3.5 s run on the scheduler. Prints, per run, the samples stored and
the workers' count, and whether each worker's stamps are in order.

    python bench/profile_stall.py [--runs 3] [--stall 3.5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import dask
import sqlalchemy as sa
from distributed import Client, LocalCluster

import daskscope


def slow_square(x: int) -> int:
    time.sleep(0.02)
    return x * x


def one_run(stall: float) -> tuple[int, int, dict[str, bool], int]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        dask.config.set({"daskscope.profile.interval": "0.7s"}),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        url = f"sqlite:///{tmp}/store.db"
        attached = time.time()
        cluster_id = daskscope.register(client, database=url)
        futures = client.map(slow_square, range(600))
        time.sleep(2.0)
        client.run_on_scheduler(time.sleep, stall)
        client.gather(futures)
        left_out = daskscope.flush(client)["profile_samples_left_out"]
        truth = client.profile(start=attached)["count"]

        def stamps(dask_worker: Any) -> list[float]:
            return [t for t, _ in dask_worker.profile_history]

        in_order = {w: s == sorted(s) for w, s in client.run(stamps).items()}
        client.close()
        cluster.close()
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            stored = conn.execute(
                sa.text("SELECT coalesce(sum(samples), 0) FROM profiles WHERE cluster_id = :c"),
                {"c": cluster_id},
            ).scalar_one()
        engine.dispose()
    return int(stored), int(truth), in_order, int(left_out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stall", type=float, default=3.5)
    args = parser.parse_args()
    for run in range(args.runs):
        stored, truth, in_order, left_out = one_run(args.stall)
        order = ", ".join("in order" if ok else "OUT OF ORDER" for ok in in_order.values())
        print(
            f"run {run + 1}: stored {stored} samples, the workers held {truth} "
            f"({'exact' if stored == truth else f'off by {stored - truth:+d}'}); "
            f"left out and counted {left_out}; stamps: {order}"
        )


if __name__ == "__main__":
    main()
