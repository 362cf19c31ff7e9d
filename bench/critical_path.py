"""Cost of the critical-path model (``daskscope.analysis.critical_path``) by size: the
path alone, one simulation, and the page's whole what-if list, side by side.

    python bench/critical_path.py [--tasks 5000 50000 200000] [--groups 1000]

Stages: ``--groups`` groups, each depending on up to two earlier ones at random, the
tasks spread evenly, durations uniform in [0, 1) s (seeded). Prints milliseconds (best
of three) and the ratios to the path alone.
"""

from __future__ import annotations

import argparse
import os
import random
import time

from daskscope.analysis.critical_path import critical_path, simulate_threads, stages_of, what_if


def best_ms(fn: object, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - started) * 1000)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[5_000, 50_000, 200_000])
    parser.add_argument("--groups", type=int, default=1000)
    args = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    print(f"{'tasks':>9} {'path ms':>9} {'1 sim (8 thr) ms':>17} {'what-if ms':>11} {'counts':>7} "
          f"{'sim/path':>9} {'what-if/path':>13}")  # fmt: skip
    for tasks in args.tasks:
        rng = random.Random(tasks)
        per = max(1, tasks // args.groups)
        groups = [
            (
                f"g{i}",
                [f"g{j}" for j in rng.sample(range(i), min(i, 2))],
                [rng.random() for _ in range(per)],
            )
            for i in range(args.groups)
        ]
        stages = stages_of(groups)
        path = best_ms(lambda: critical_path(stages))  # noqa: B023
        one = best_ms(lambda: simulate_threads(stages, 8))  # noqa: B023
        counts = len(what_if(stages))
        whole = best_ms(lambda: what_if(stages), runs=1)  # noqa: B023
        print(f"{per * args.groups:>9,} {path:>9.1f} {one:>17.1f} {whole:>11.1f} {counts:>7} "
              f"{one / path:>9.1f} {whole / path:>13.1f}")  # fmt: skip
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
