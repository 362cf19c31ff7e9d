"""First load of the account page (or, with ``--page cluster``, of a cluster page) in
Chromium on loopback: a fresh browser context each time (nothing cached), ``daskscope
serve`` in its own process.

``--page cluster`` opens the first cluster the store lists (``/clusters/{id}``, its
overview tab) and prints when the HTML arrived, the first contentful paint,
``DOMContentLoaded``, the first frame after its first chart (the task-prefix chart) was
in the page with its axis titles (*chart*: as the server drew it, or, on a page that
draws it only with plotly, as plotly did), the first frame after plotly's interactive
chart was (*plotly*), plotly.js's bytes and all the bytes fetched (issue 26, point 8:
time to first chart <= 1 s on a fresh browser). The account page's figures follow.

For each load it prints when the HTML arrived (``responseEnd``), the first contentful
paint, ``DOMContentLoaded``, the first frame after the heat map was drawn (a map drawn by
the server: its table is in the page down to the week labels; one drawn by a script:
``#usage-chart`` got ``data-ready="1"``), the first frame after the page's scripts made
it respond to clicks (``data-ready="1"``), the first frame after the listing's first row
was in the page, and the bytes fetched. With
``--before SRC URL`` it also serves the page from another source tree (for example the
commit before the rework: ``git archive <commit> src | tar -x -C DIR``) on its own store
(the same data at that tree's schema), alternating loads, and prints the ratio of the
medians (now / before).

    python bench/first_load.py sqlite:////tmp/dash.db [--loads 5] [--before DIR URL]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SRC = Path(__file__).resolve().parents[1] / "src"

# Installed before the page's own scripts: note the first frame after the heat map is
# drawn and after the listing's first row is in the document
OBSERVE = """
window.__marks = {};
const mark = (name) => {
  if (name in window.__marks) return;
  window.__marks[name] = -1;
  requestAnimationFrame(() => { window.__marks[name] = performance.now(); });
};
new MutationObserver(() => {
  const heat = document.getElementById("usage-chart");
  if (heat && (heat.dataset.ready === "1" || heat.querySelector("tfoot th"))) mark("drawn");
  if (heat && heat.dataset.ready === "1") mark("ready");
  if (document.querySelector("#cluster-listing tbody tr")) mark("listing");
}).observe(document, {
  subtree: true, childList: true, attributes: true, attributeFilter: ["data-ready"] });
"""

READ = """() => {
  const n = performance.getEntriesByType("navigation")[0];
  const bytes = performance.getEntriesByType("resource")
    .reduce((a, e) => a + e.transferSize, n.transferSize);
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  return { html: n.responseEnd, fcp: paint ? paint.startTime : NaN,
           dcl: n.domContentLoadedEventEnd, drawn: window.__marks.drawn,
           ready: window.__marks.ready, listing: window.__marks.listing, bytes };
}"""

FIGURES = ("html", "fcp", "dcl", "drawn", "ready", "listing")
HEADS = ("html", "FCP", "DCL", "drawn", "ready", "listing")
KEYS = (*FIGURES, "bytes")

# A cluster page: when its task-prefix chart was first painted with its axis titles: as
# the server drew it, when both titles were painted (Element Timing: the frame's paint,
# not the frame's start); as plotly drew it (a page that draws it only with plotly: the
# tree before), the first frame after it was in the page. And the first frame after
# plotly's (interactive) chart was in the page.
OBSERVE_CLUSTER = """
window.__marks = {};
const mark = (name) => {
  if (name in window.__marks) return;
  window.__marks[name] = -1;
  requestAnimationFrame(() => { window.__marks[name] = performance.now(); });
};
// the server's drawing: when its axis titles were painted (Element Timing)
window.__painted = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    if (e.identifier === 'prefix-chart') window.__painted.push(e.renderTime || e.loadTime);
  }
}).observe({ type: 'element', buffered: true });
new MutationObserver(() => {
  if (document.querySelector('#prefix-chart .sb-time .sb-title')) mark('chart');
  if (!document.querySelector('#prefix-chart .main-svg .g-x2title')) return;
  mark('chart');
  mark('plotly');
}).observe(document, { subtree: true, childList: true });
"""

READ_CLUSTER = """() => {
  const n = performance.getEntriesByType("navigation")[0];
  const resources = performance.getEntriesByType("resource");
  const bytes = resources.reduce((a, e) => a + e.transferSize, n.transferSize);
  const plotly = resources.filter((e) => e.name.includes("/assets/plotly"))
    .reduce((a, e) => a + e.transferSize, 0);
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  // drawn by the server: when both titles were painted; else the frame after plotly's
  const painted = window.__painted.length === 2 ? Math.max(...window.__painted) : null;
  return { html: n.responseEnd, fcp: paint ? paint.startTime : NaN,
           dcl: n.domContentLoadedEventEnd, chart: painted ?? window.__marks.chart,
           interactive: window.__marks.plotly, plotly, bytes };
}"""

PAGES = {
    "account": {"figures": FIGURES, "heads": HEADS, "bytes": ("bytes",)},
    "cluster": {
        "figures": ("html", "fcp", "dcl", "chart", "interactive"),
        "heads": ("html", "FCP", "DCL", "chart", "plotly"),
        "bytes": ("plotly", "bytes"),
    },
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(src: Path, url: str) -> Iterator[str]:
    """``daskscope serve`` of the sources in ``src`` on ``url``; yields its base URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-m", "daskscope.cli.main", "--database", url, "serve"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # the first open may migrate the store
        while True:
            try:
                if httpx.get(f"{base}/openapi.json", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise SystemExit(f"the server of {src} did not start: {process.stderr.read()!r}")
            time.sleep(0.2)
        httpx.get(base + "/", timeout=60)  # warm: templates, imports, the database's cache
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def load(browser: Any, base: str, page_name: str = "account") -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    if page_name == "cluster":
        context.add_init_script(OBSERVE_CLUSTER)
        page = context.new_page()
        page.goto(f"{base}/clusters/{first_cluster(base)}", wait_until="domcontentloaded")
        page.wait_for_function("() => window.__marks.plotly > 0", timeout=60_000)
        figures = page.evaluate(READ_CLUSTER)
        context.close()
        return figures
    context.add_init_script(OBSERVE)
    page = context.new_page()
    page.goto(base + "/", wait_until="domcontentloaded", timeout=60_000)
    page.wait_for_function(
        "() => ['drawn', 'ready', 'listing'].every((k) => window.__marks[k] > 0)", timeout=60_000
    )
    figures = page.evaluate(READ)
    context.close()
    return figures


_clusters: dict[str, str] = {}


def first_cluster(base: str) -> str:
    """The id of the first cluster the store lists (the same in both stores: seeded ids
    are stable), asked once per server."""
    if base not in _clusters:
        body = httpx.get(f"{base}/api/v1/clusters", timeout=60).json()
        _clusters[base] = body["clusters"][0]["id"]
    return _clusters[base]


def row(name: str, figures: dict[str, float], page_name: str = "account") -> str:
    spec = PAGES[page_name]
    times = "  ".join(f"{figures[k]:7.0f}" for k in spec["figures"])
    return f"{name:<8}{times}" + "".join(f"  {figures[k]:>10,.0f}" for k in spec["bytes"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the seeded store (bench/seed.py)")
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--before", nargs=2, metavar=("SRC", "URL"), help="another tree and store")
    parser.add_argument("--page", choices=sorted(PAGES), default="account")
    args = parser.parse_args()
    spec = PAGES[args.page]
    keys = (*spec["figures"], *spec["bytes"])
    trees = {"now": (SRC, args.url)}
    if args.before:
        trees["before"] = (Path(args.before[0]).resolve(), args.before[1])
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        with ExitStack() as servers:
            bases = {name: servers.enter_context(serve(*tree)) for name, tree in trees.items()}
            heads = "  ".join(f"{k:>7}" for k in spec["heads"])
            names = {"plotly": "plotly.js"}  # its bytes: "plotly" heads its chart's time
            byte_heads = "".join(f"  {names.get(k, k):>10}" for k in spec["bytes"])
            print(f"{'':<8}{heads}{byte_heads}  (ms, bytes)")
            for i in range(args.loads):
                for name, base in bases.items():  # alternate, so both see the same load
                    figures = load(browser, base, args.page)
                    results[name].append(figures)
                    print(row(f"{name} {i + 1}", figures, args.page), flush=True)
        browser.close()
    # a load without a paint entry (NaN) leaves that figure's median to the others
    medians = {
        name: {k: statistics.median(r[k] for r in runs if r[k] == r[k]) for k in keys}
        for name, runs in results.items()
    }
    for name, m in medians.items():
        print(row(f"{name} med", m, args.page))
    if "before" in medians:
        ratios = {k: medians["now"][k] / medians["before"][k] for k in keys}
        print(
            "ratio   "
            + "  ".join(f"{ratios[k]:7.2f}" for k in spec["figures"])
            + "".join(f"  {ratios[k]:>10.3f}" for k in spec["bytes"])
        )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(json.dumps({"medians": medians, "loads": args.loads, "page": args.page}))


if __name__ == "__main__":
    main()
