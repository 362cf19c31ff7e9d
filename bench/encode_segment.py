"""What encoding a task-log segment costs, this daskscope's encoder beside an earlier
one, in one run.

The earlier encoder is ``src/daskscope/tasklog/segments.py`` (before the task log's
package: ``src/daskscope/segments.py``) at ``--baseline`` (a git revision),
loaded from ``git show`` into a module of its own; both encode the same executions,
built as the recorder's hook buffers them: 4 workers x 4 threads, tuple keys
``('inc-<token>', i)`` and ``('x-<token>', i, j)``, ``getitem`` tuples, string keys of
``client.submit`` (``'slow_inc-<token>'``, group ``slow_inc``), keys equal to their group,
about 15 % fetching their input first (a transfer, then the compute), one in 997 erred.

It prints, for a large segment (``--executions``, a segment the recorder seals every
50,000) and a small one (``--small``, what a 1-second flush seals in the 20,000-task
overhead benchmark): the writer thread's CPU per execution for each encoder (best of
``--repeat``) and their ratio; bytes per execution stored (payload, key filter,
summary); the CPU of each phase of the current encoder (thread time, the phases'
functions wrapped for the measurement); and the first segment a fresh process encodes,
which pays for imports (and, in the earlier encoder, Arrow's compute functions).

    python bench/encode_segment.py [--executions 50000] [--small 1250] [--repeat 5]
                                   [--baseline REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from daskscope.tasklog import segments
from daskscope.tasklog.segments import Execution, decode_segment, execution

ROOT = Path(__file__).resolve().parent.parent
#: the encoder before it was vectorised (str of every key, Arrow's dictionary encoding)
BASELINE = "3e307d6"


def realistic(n: int, seed: int = 1, t0: float = 1.8e9) -> list[Execution]:
    """``n`` executions as the hook buffers them (see the module's docstring)."""
    rnd = random.Random(seed)
    workers = [f"tcp://10.0.0.{i}:3{i}417" for i in range(1, 5)]
    threads = [139_700_000_000 + 4096 * i for i in range(4)]
    lanes = [(w, t) for w in workers for t in threads]
    clock = dict.fromkeys(lanes, t0)

    def token() -> str:
        return f"{rnd.getrandbits(128):032x}"

    # (group, key shape): 2 and 3 are tuples of that length, 0 a string key, 1 the group
    kinds = [("inc-" + token(), 2), ("x-" + token(), 3), ("getitem-" + token(), 2),
             ("slow_inc", 0), ("finalize", 1)]  # fmt: skip
    shares = [0.4, 0.7, 0.85, 0.99, 1.0]
    computations = ["computation-" + token() for _ in range(3)]
    spans = ["span-" + token() for _ in range(2)]
    rows = []
    for i in range(n):
        worker, thread = lane = lanes[i % len(lanes)]
        draw = rnd.random()
        group, shape = next(k for k, share in zip(kinds, shares, strict=True) if draw < share)
        key: Any = {2: (group, i), 3: (group, i // 100, i % 100), 0: f"{group}-{token()}"}.get(
            shape, group
        )
        start = clock[lane] + rnd.random() * 1e-4
        startstops = []
        if rnd.random() < 0.15:
            took = rnd.uniform(1e-4, 2e-3)
            source = workers[(workers.index(worker) + 1) % len(workers)]
            startstops.append(
                {"action": "transfer", "start": start, "stop": start + took, "source": source}
            )
            start += took
        stop = start + rnd.uniform(1e-4, 1e-2)
        startstops.append({"action": "compute", "start": start, "stop": stop})
        clock[lane] = stop
        erred = i % 997 == 5
        rows.append(
            execution(key, group, group.split("-")[0], worker, thread, startstops, erred=erred,
                      nbytes=None if erred else 8 * rnd.randrange(1, 1 << 16),
                      computation=computations[i * 3 // n], span=spans[i % 2])
        )  # fmt: skip
    return rows


#: where segments.py and its helpers were before the task log had its package
_MOVED = {
    "daskscope.segment_keys": "daskscope.tasklog.keys",
    "daskscope.segment_repeats": "daskscope.tasklog.repeats",
    "daskscope.arrow_buffers": "daskscope.tasklog.arrow",
    "daskscope.summaries": "daskscope.tasklog.summaries",
}


def baseline_module(revision: str) -> ModuleType:
    """``segments.py`` as it was at ``revision``, as a module of its own (an encoder
    from before ``tasklog/`` finds its helpers under their old names)."""
    for where in ("src/daskscope/tasklog/segments.py", "src/daskscope/segments.py"):
        shown = subprocess.run(
            ["git", "show", f"{revision}:{where}"], cwd=ROOT, capture_output=True, text=True
        )
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"{revision} has no segments.py: {shown.stderr.strip()}")
    text = shown.stdout
    for old, new in _MOVED.items():
        sys.modules.setdefault(old, importlib.import_module(new))
    path = Path(tempfile.mkdtemp(prefix="daskscope-baseline-")) / "segments_baseline.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("segments_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def best_cpu(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best


def same_executions(a: Any, b: Any) -> None:
    """Both encoders' segments decode to the same executions (else the comparison is
    of different work)."""
    one, two = decode_segment(a.format, a.payload), decode_segment(b.format, b.payload)
    assert len(one) == len(two)
    for name in ("thread", "start", "stop", "state", "nbytes", "action_start", "action_stop"):
        assert np.array_equal(getattr(one, name), getattr(two, name)), name
    for name in ("group", "worker", "computation", "span", "action_name", "action_source"):
        codes_one, codes_two = getattr(one, name), getattr(two, name)
        texts_one = [one.names[c] if c >= 0 else None for c in codes_one.tolist()]
        texts_two = [two.names[c] if c >= 0 else None for c in codes_two.tolist()]
        assert texts_one == texts_two, name
    assert [one.key(i) for i in range(len(one))] == [two.key(i) for i in range(len(two))]


#: the current encoder's phases: functions it calls, wrapped to add up their CPU time
PHASES = {
    "split actions": (segments, "_split_actions"),
    "string columns interned": (segments._Names, "codes"),
    "key forms and rests": (segments, "key_columns"),
    "UTF-8 of rests and names": (segments, "utf8"),
    "key filter": (segments, "key_filter"),
    "Arrow arrays from buffers": (segments, "numbers"),
    "Arrow dictionary arrays": (segments, "dictionary_array"),
    "Arrow string arrays": (segments, "string_array"),
    "IPC streams + zstd": (segments, "_ipc_bytes"),
    "summary (summaries.summarize)": (segments, "summarize"),
}


def phases(rows: list[Execution], repeat: int) -> dict[str, float]:
    """CPU seconds per phase of one encoding (the fastest of ``repeat``), the rest
    (transposing the tuples, sorting, time offsets) as "other"."""
    spent: dict[str, float] = defaultdict(float)
    originals = {name: getattr(owner, attr) for name, (owner, attr) in PHASES.items()}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.process_time() - started

        return wrapper

    best: dict[str, float] = {}
    try:
        for name, (owner, attr) in PHASES.items():
            setattr(owner, attr, timed(name, originals[name]))
        for _ in range(repeat):
            spent.clear()
            started = time.process_time()
            segments.encode_segment("c", 0, rows)
            total = time.process_time() - started
            if total < best.get("total", float("inf")):
                best = dict(spent, total=total)
    finally:
        for name, (owner, attr) in PHASES.items():
            setattr(owner, attr, originals[name])
    best["other (transpose, sort, offsets)"] = best["total"] - sum(
        v for k, v in best.items() if k != "total"
    )
    return best


FIRST_SEGMENT = """
import sys, time
sys.path.insert(0, {bench!r})
import distributed  # a scheduler has it (and numpy) imported already
from encode_segment import realistic, baseline_module
rows = realistic({n})
encode = baseline_module({revision!r}).encode_segment if {old} else None
if encode is None:
    from daskscope.tasklog.segments import encode_segment as encode
started = time.process_time()
encode("c", 0, rows)
print(time.process_time() - started)
"""


def first_segment(n: int, revision: str, old: bool) -> float:
    """CPU of the first segment a fresh process encodes (imports included)."""
    code = FIRST_SEGMENT.format(bench=str(ROOT / "bench"), n=n, revision=revision, old=old)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--executions", type=int, default=50_000)
    parser.add_argument("--small", type=int, default=1_250)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", default=BASELINE)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; baseline {args.baseline}")
    old = baseline_module(args.baseline)
    rows = realistic(args.executions)
    for n in (args.executions, args.small):
        part = rows[:n]
        # the baseline buffered 12 fields a task (no trigger yet)
        old_part = [r[:12] for r in part]
        before = old.encode_segment("c", 0, old_part)
        after = segments.encode_segment("c", 0, part)
        same_executions(before[0], after[0])
        assert all(segments.key_filter_may_hold(after[0].key_filter, str(r[0])) for r in part)
        t_old = best_cpu(lambda part=old_part: old.encode_segment("c", 0, part), args.repeat)
        t_new = best_cpu(lambda part=part: segments.encode_segment("c", 0, part), args.repeat)
        r = after[0]
        print(f"\nsegment of {n:,} executions (writer-thread CPU, best of {args.repeat}):")
        print(f"  before {t_old / n * 1e6:6.2f} µs/execution")
        print(f"  now    {t_new / n * 1e6:6.2f} µs/execution   (before/now {t_old / t_new:.2f}x)")
        sizes = [len(r.payload) / n, len(r.key_filter) / n, len(r.summary) / n]
        earlier = sum(len(getattr(before[0], f)) for f in ("payload", "key_filter", "summary"))
        print(
            f"  bytes per execution: payload {sizes[0]:.2f}, key filter {sizes[1]:.2f}, "
            f"summary {sizes[2]:.2f}; total {sum(sizes):.2f} (before {earlier / n:.2f})"
        )
        print("  phases now (µs/execution):")
        spent = phases(part, args.repeat)
        for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
            print(f"    {name:34s} {seconds / n * 1e6:6.3f}")
    print(f"\nfirst segment of a fresh process ({args.small:,} executions, imports included):")
    cpu_old = first_segment(args.small, args.baseline, old=True)
    cpu_new = first_segment(args.small, args.baseline, old=False)
    print(f"  before {cpu_old * 1e3:7.1f} ms CPU   now {cpu_new * 1e3:7.1f} ms CPU")


if __name__ == "__main__":
    main()
