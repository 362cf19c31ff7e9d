"""The task timeline page drawn in Chromium at a million tasks (issue 26, point 7), now
and, with ``--before DIR``, from another source tree (``git archive HEAD src | tar -x -C
DIR``) side by side in one run, alternating.

Builds one cluster of ``--tasks`` executions with ``bench/timeline_latency.py``'s builder
(16 worker threads), run by the before tree's code when given (so its store is at that
tree's schema; each server gets its own copy of the file), serves each tree with
``daskscope serve`` on loopback, and for each round opens the timeline page in a fresh
browser context at 1440x900 and measures, in milliseconds:

- ``first``: navigation start to the first frame after the page drew the whole run
  (its 700 bins a thread, in the page's HTML);
- ``zoom binned``, ``zoom raw``: a zoom (``Plotly.relayout`` of the time axis, as a drag
  does) into 10 % of the run (still bins) and into a window of just under 5,000 tasks
  (every task): from the zoom to the first frame after the page drew the new window
  (``total``), and from the window's JSON received (``responseEnd`` of its request) to
  that frame (``draw``: parsing the answer, the tables, and drawing).

The frame after a drawing: a ``requestAnimationFrame`` after ``body[data-window]`` changes,
which the page sets once its chart is drawn (both trees). Prints each load, the medians,
and the ratios now / before.

    python bench/timeline_draw.py [--tasks 1000000] [--rounds 5] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import sync_playwright

from first_load import CHROMIUM, FLAGS, SRC, serve

BENCH = Path(__file__).resolve().parent

OBSERVE = """
window.__drawn = [];
new MutationObserver(() => {
  const w = document.body && document.body.dataset.window;
  if (w === undefined || (window.__drawn.length && window.__drawn.at(-1).window === w)) return;
  const entry = { window: w, at: -1 };
  window.__drawn.push(entry);
  requestAnimationFrame(() => { entry.at = performance.now(); });
}).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-window"] });
"""

ZOOM = """async ([a, b]) => {
  const n = window.__drawn.length;
  const started = performance.now();
  Plotly.relayout('timeline', {'xaxis.range[0]': a, 'xaxis.range[1]': b});
  while (!(window.__drawn.length > n && window.__drawn.at(-1).at > 0)) {
    await new Promise((r) => setTimeout(r, 5));
  }
  const asked = performance.getEntriesByType('resource')
    .filter((e) => e.name.includes('/api/v1/') && e.name.includes('/timeline?')).at(-1);
  const drawn = window.__drawn.at(-1).at;
  return { total: drawn - started, draw: drawn - asked.responseEnd,
           mode: document.body.dataset.mode, bytes: asked.encodedBodySize };
}"""

FIGURES = ("first", "binned total", "binned draw", "raw total", "raw draw")


def build(src: Path, url: str, tasks: int) -> dict[str, Any]:
    """The store, built by the code of ``src`` (its schema), in a child process."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from timeline_latency import build;"
        "cid, first, last, _ = build(sys.argv[2], int(sys.argv[3]));"
        "print(json.dumps({'cluster_id': cid, 'first': first, 'last': last}))"
    )
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(BENCH), url, str(tasks)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def raw_window(base: str, cluster_id: str, first: float, last: float) -> tuple[float, float]:
    """A window in the middle of the run of just under 5,000 tasks (sent raw)."""
    width = (last - first) * 4800 / 1_000_000
    while True:
        start = first + (last - first) / 3
        params = {"start": f"{start:.6f}", "stop": f"{start + width:.6f}", "bins": "700"}
        body = httpx.get(f"{base}/api/v1/clusters/{cluster_id}/timeline", params=params).json()
        if body["raw"] and body["totals"]["tasks"] > 4000:
            return start, start + width
        width *= 0.9 if not body["raw"] else 1.05


def load(
    browser: Any, base: str, built: dict[str, Any], raw: tuple[float, float]
) -> dict[str, Any]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.add_init_script(OBSERVE)
    page = context.new_page()
    page.set_default_timeout(180_000)
    page.goto(f"{base}/clusters/{built['cluster_id']}/timeline", wait_until="domcontentloaded")
    page.wait_for_function("() => window.__drawn.length && window.__drawn[0].at > 0")
    figures: dict[str, Any] = {"first": page.evaluate("window.__drawn[0].at")}
    origin = page.evaluate("ds.data().totals.first")
    first, last = built["first"], built["last"]
    ten = (first + 0.45 * (last - first) - origin, first + 0.55 * (last - first) - origin)
    for name, (a, b) in (("binned", ten), ("raw", (raw[0] - origin, raw[1] - origin))):
        got = page.evaluate(ZOOM, [a, b])
        assert got["mode"] == name, got
        figures[f"{name} total"] = got["total"]
        figures[f"{name} draw"] = got["draw"]
        figures[f"{name} bytes"] = got["bytes"]
    context.close()
    return figures


def row(name: str, figures: dict[str, float]) -> str:
    return f"{name:<10}" + "  ".join(f"{figures[k]:>12.0f}" for k in FIGURES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", help="another source tree (its src/), to compare with")
    parser.add_argument("--keep", help="a folder to build the stores in and keep them")
    args = parser.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="timeline-draw-"))
    folder.mkdir(parents=True, exist_ok=True)
    trees = {"now": SRC}
    if args.before:
        trees["before"] = Path(args.before).resolve() / "src"
    built_db = folder / "built.db"
    print(f"load average at the start: {os.getloadavg()[0]:.2f}", flush=True)
    if not built_db.exists():
        built = build(trees.get("before", SRC), f"sqlite:///{built_db}", args.tasks)
        (folder / "built.json").write_text(json.dumps(built))
    built = json.loads((folder / "built.json").read_text())
    urls = {}
    for name in trees:
        copy = folder / f"{name}.db"
        shutil.copyfile(built_db, copy)
        urls[name] = f"sqlite:///{copy}"
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    with sync_playwright() as p, ExitStack() as servers:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        bases = {name: servers.enter_context(serve(src, urls[name])) for name, src in trees.items()}
        raw = raw_window(bases["now"], built["cluster_id"], built["first"], built["last"])
        for base in bases.values():  # each server's caches warm: segments decoded
            httpx.get(f"{base}/clusters/{built['cluster_id']}/timeline", timeout=120)
        print(f"{args.tasks:,} tasks; raw window {raw[1] - raw[0]:.3f} s")
        print(f"{'':<10}" + "  ".join(f"{k:>12}" for k in FIGURES) + "  (ms)")
        for i in range(args.rounds):
            for name, base in bases.items():  # alternate, so both see the same load
                figures = load(browser, base, built, raw)
                results[name].append(figures)
                print(row(f"{name} {i + 1}", figures), flush=True)
        browser.close()
    medians = {
        name: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for name, runs in results.items()
    }
    for name, m in medians.items():
        print(row(f"{name} med", m))
    if "before" in medians:
        print(
            f"{'ratio':<10}"
            + "  ".join(f"{medians['now'][k] / medians['before'][k]:>12.3f}" for k in FIGURES)
        )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(json.dumps({"medians": medians, "rounds": args.rounds, "tasks": args.tasks}))


if __name__ == "__main__":
    main()
