"""What a fresh browser's first chart costs in plotly.js, by how plotly.js is sent
(issue 26, point 8): gzip (as the app sent it before), uncompressed (what bytes cost on
loopback, so what a smaller encoding could gain at most), and gzip with V8's compile hint
first (as the app sends it now: ``web/routes/assets.py``).

A page of one small bar chart and nothing else, served on 127.0.0.1 by the standard
library's HTTP server; plotly.js from the installed ``plotly`` package. Each round opens
the page once per variant, alternating, in a fresh Chromium context (nothing cached),
and reads the first frame after the chart was drawn and, from a trace, the main thread's
time evaluating plotly.js. Prints each load and the medians.

    python bench/plotly_load.py [--loads 10]
"""

from __future__ import annotations

import argparse
import gzip
import http.server
import json
import os
import socketserver
import statistics
import threading
from importlib import resources
from typing import Any

from playwright.sync_api import sync_playwright

from first_load import CHROMIUM, FLAGS

PLOTLY = (resources.files("plotly") / "package_data" / "plotly.min.js").read_bytes()
HINT = b"//# allFunctionsCalledOnLoad\n"
#: name -> (body, Content-Encoding)
VARIANTS: dict[str, tuple[bytes, str | None]] = {
    "gzip": (gzip.compress(PLOTLY, 6), "gzip"),
    "identity": (PLOTLY, None),
    "gzip+hint": (gzip.compress(HINT + PLOTLY, 6), "gzip"),
}
PAGE = """<!doctype html><html><body><div id="c" style="width:800px;height:400px"></div>
<script src="/{name}.js"></script><script>
Plotly.newPlot("c", [{{type: "bar", orientation: "h", x: [3, 2, 1], y: ["a", "b", "c"]}}],
  {{xaxis: {{title: {{text: "tasks"}}}}}})
  .then(() => requestAnimationFrame(() => {{ window.__chart = performance.now(); }}));
</script></body></html>"""


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        name = self.path.strip("/").removesuffix(".js")
        if name not in VARIANTS:
            self.send_error(404)
            return
        if self.path.endswith(".js"):
            body, encoding = VARIANTS[name]
            self.send_response(200)
            self.send_header("Content-Type", "text/javascript")
            if encoding:
                self.send_header("Content-Encoding", encoding)
        else:
            body = PAGE.format(name=name).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def load(browser: Any, base: str, name: str) -> dict[str, float]:
    context = browser.new_context()
    page = context.new_page()
    browser.start_tracing(page=page, categories=["devtools.timeline"])
    page.goto(f"{base}/{name}")
    page.wait_for_function("() => window.__chart > 0", timeout=60_000)
    chart = page.evaluate("window.__chart")
    trace = json.loads(browser.stop_tracing())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    evaluate = sum(
        e.get("dur", 0)
        for e in events
        if e.get("name") == "EvaluateScript"
        and str((e.get("args", {}).get("data") or {}).get("url", "")).endswith(f"/{name}.js")
    )
    context.close()
    return {"chart": chart, "evaluate": evaluate / 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=10)
    args = parser.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    sizes = {name: len(body) for name, (body, _) in VARIANTS.items()}
    print(f"load average at the start: {os.getloadavg()[0]:.2f}; bytes sent {sizes}")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        for i in range(args.loads):
            for name in VARIANTS:  # alternate, so each sees the same load
                figures = load(browser, base, name)
                results[name].append(figures)
                print(
                    f"{name:<10} {i + 1:>2}  chart {figures['chart']:7.0f}  "
                    f"evaluate {figures['evaluate']:7.0f}  (ms)",
                    flush=True,
                )
        browser.close()
    server.shutdown()
    medians = {
        name: {k: statistics.median(r[k] for r in runs) for k in ("chart", "evaluate")}
        for name, runs in results.items()
    }
    for name, m in medians.items():
        print(f"{name:<10} med chart {m['chart']:7.0f}  evaluate {m['evaluate']:7.0f}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(json.dumps({"medians": medians, "bytes": sizes, "loads": args.loads}))


if __name__ == "__main__":
    main()
