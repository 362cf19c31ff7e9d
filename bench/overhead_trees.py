"""``bench/overhead.py`` for daskscope source trees side by side (e.g. before and after a
change): rounds of one ``overhead.py`` run per tree, the trees' order alternating from
round to round, each run in a fresh process importing daskscope from its tree, so that
the machine's load falls on every tree alike.

    python bench/overhead_trees.py [--rounds 3] [--args "--variants small --pairs 1
                                   --memory-tasks 20000"] OLD_SRC NEW_SRC [...]

``OLD_SRC`` etc. are ``src`` directories (``git archive REV src | tar -x -C DIR`` makes
one of an earlier revision). Each run is this checkout's ``bench/overhead.py`` with the
given arguments; the last line it prints (JSON) is kept. For each tree and variant the
summary gives the median over the rounds of daskscope's own work per task and its parts
(hooks, event-loop CPU, writer thread, store child), the hook's cost per call on each
path, the wall and CPU ratios and Dask's own wall time per task, and each figure's
ratio to the first tree's. The last line is JSON holding every run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent / "overhead.py"

#: the figures compared, as overhead.py's JSON names them
FIGURES = (
    "own_us_per_task",
    "own_hook_us_per_task",
    "own_loop_cpu_us_per_task",
    "own_writer_cpu_us_per_task",
    "own_store_child_cpu_us_per_task",
    "hook_filtered_us",
    "hook_counting_us",
    "hook_forgotten_us",
    "wall_ratio",
    "scheduler_cpu_ratio",
    "dask_us_per_task",
)


def one(src: str, args: list[str]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=src)
    with tempfile.TemporaryDirectory() as cwd:  # never the checkout's own package
        done = subprocess.run(
            [sys.executable, str(BENCH), *args],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
        )
    if done.returncode:
        raise RuntimeError(f"overhead.py failed for {src}:\n{done.stderr[-4000:]}")
    lines = done.stdout.strip().splitlines()
    for line in lines[:-1]:
        if " pair " in line:
            print("   ", line, flush=True)
    return json.loads(lines[-1])


def check_tree(src: str) -> None:
    """The run imports daskscope from ``src``, not from the checkout."""
    env = dict(os.environ, PYTHONPATH=src)
    with tempfile.TemporaryDirectory() as cwd:
        found = subprocess.run(
            [sys.executable, "-c", "import daskscope; print(daskscope.__file__)"],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    if not found.startswith(str(Path(src).resolve())):
        raise SystemExit(f"{src}: daskscope imports from {found}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--args", default="--variants small --pairs 1 --memory-tasks 20000")
    parser.add_argument("trees", nargs="+", help="daskscope src directories")
    args = parser.parse_args()
    for tree in args.trees:
        check_tree(tree)
    bench_args = shlex.split(args.args)
    runs: dict[str, list[dict[str, Any]]] = {tree: [] for tree in args.trees}
    for r in range(args.rounds):
        order = args.trees if r % 2 == 0 else list(reversed(args.trees))
        for tree in order:
            load = os.getloadavg()
            print(
                f"[{time.strftime('%H:%M:%S')}] round {r + 1}, {tree} (load {load[0]:.2f})",
                flush=True,
            )
            out = one(tree, bench_args)
            out["load"] = load
            runs[tree].append(out)
            for name, v in out["variants"].items():
                print(
                    f"    {name}: own {v['own_us_per_task']:.2f} µs/task = hooks "
                    f"{v['own_hook_us_per_task']:.2f} + loop {v['own_loop_cpu_us_per_task']:.2f}"
                    f" + writer {v['own_writer_cpu_us_per_task']:.2f} + child "
                    f"{v['own_store_child_cpu_us_per_task']:.2f}; wall ratio "
                    f"{v['wall_ratio']:.3f}",
                    flush=True,
                )
    first = args.trees[0]
    summary: dict[str, dict[str, dict[str, float]]] = {}
    variants = list(runs[first][0]["variants"])
    for variant in variants:
        print(f"\n== {variant}: medians over {args.rounds} rounds ==")
        print(f"{'figure':34s}" + "".join(f"{Path(t).parent.name or t:>22s}" for t in args.trees))
        table: dict[str, dict[str, float]] = {}
        for tree in args.trees:
            table[tree] = {
                f: statistics.median(run["variants"][variant][f] for run in runs[tree])
                for f in FIGURES
            }
        for f in FIGURES:
            cells = []
            for tree in args.trees:
                value, base = table[tree][f], table[first][f]
                ratio = f" ({value / base:.2f})" if tree != first and base else ""
                cells.append(f"{value:.3f}{ratio}")
            print(f"{f:34s}" + "".join(f"{c:>22s}" for c in cells))
        own = {t: [run["variants"][variant]["own_us_per_task"] for run in runs[t]] for t in runs}
        for tree in args.trees:
            print(f"own work per task, {tree}: " + ", ".join(f"{v:.2f}" for v in own[tree]))
        summary[variant] = table
    print(json.dumps({"summary": summary, "runs": runs}))


if __name__ == "__main__":
    main()
