"""The first (cold) request of a 10,000-group computation's page, with Python's cyclic
garbage collector paused while a view is built (``views/memo.py``, now) and running as
before, alternating in one process (issue 26, point 8).

Against a store of ``bench/seed.py --many-groups 40000`` (4 computations of 10,000
groups), through the in-process ASGI client: each round empties the kept views
(``memo.clear(store)``), asks for a computation's page (its critical path worked out) and
then for its graph with the path (``graph?path=1``: what the page's script asks next,
the groups read and folded), once with the collector paused during builds and once
with it running. The process holds the other three computations' views throughout, as a
server that has served other pages holds what it keeps; ``--bare`` holds none.

    python bench/computation_cold.py sqlite:////tmp/dash.db [--rounds 8] [--bare]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from typing import Any

import httpx
import sqlalchemy as sa

from daskscope.model import stable_id
from daskscope.store import schema as s
from daskscope.views import memo
from daskscope.views.critical_path import critical_path_view
from daskscope.web import create_app

MODES = {"paused": True, "running": False}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="a store seeded with --many-groups 40000")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--bare", action="store_true", help="hold no other view")
    args = parser.parse_args()
    app = create_app(args.url)
    store = app.state.store
    cluster_id = stable_id("bench", "many-groups")
    with store.engine.connect() as conn:
        comps = sorted(
            conn.execute(
                sa.select(s.computations.c.id).where(s.computations.c.cluster_id == cluster_id)
            ).scalars()
        )
    held: list[Any] = []
    if not args.bare:
        held = [critical_path_view(store, cluster_id, c) for c in comps[1:]]
    page = f"/clusters/{cluster_id}/computations/{comps[0]}"
    graph = f"/api/v1/clusters/{cluster_id}/computations/{comps[0]}/graph?path=1"
    times: dict[str, dict[str, list[float]]] = {m: {"page": [], "graph": []} for m in MODES}
    print(f"load average at the start: {os.getloadavg()[0]:.2f}; holding {len(held)} views")

    async def run() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            await client.get(page)  # imports, templates, the database's cache
            for i in range(args.rounds):
                for mode, pause in MODES.items():  # alternate: both see the same load
                    memo.PAUSE_COLLECTOR = pause
                    memo.clear(store)
                    row = []
                    for name, path in (("page", page), ("graph", graph)):
                        started = time.perf_counter()
                        response = await client.get(path)
                        assert response.status_code == 200, response.text[:200]
                        ms = (time.perf_counter() - started) * 1000
                        times[mode][name].append(ms)
                        row.append(f"{name} {ms:7.1f}")
                    print(f"{mode:<8} {i + 1}  " + "  ".join(row), flush=True)

    asyncio.run(run())
    memo.PAUSE_COLLECTOR = True
    medians = {m: {k: statistics.median(v) for k, v in t.items()} for m, t in times.items()}
    for mode, m in medians.items():
        print(f"{mode:<8} med  page {m['page']:7.1f}  graph {m['graph']:7.1f}")
    ratio = {k: medians["paused"][k] / medians["running"][k] for k in ("page", "graph")}
    print(f"ratio paused / running: page {ratio['page']:.2f}  graph {ratio['graph']:.2f}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(json.dumps({"medians": medians, "rounds": args.rounds, "held": len(held)}))
    store.close()


if __name__ == "__main__":
    main()
