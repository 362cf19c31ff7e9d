"""A computation of 10,000 task groups: its page, its JSON and its graph are bounded and
readable (issue 26). Ground truth: the groups written to the store here (2,500 files,
each read, indexed, multiplied and summed: four task prefixes in a chain, two spans).

The layout and the folding are pure functions, checked on hand-built graphs (cycles,
wide layers); the routes on the 10,000-group store; the browser tests read the drawn
chart: no two nodes overlap, the folded count is said, a click opens a fold and the URL
keeps it. Screenshots go to test-artifacts/screenshots/."""
# ruff: noqa: RUF001 (the page writes ranges with an en dash, counts with a times sign)

from __future__ import annotations

import dataclasses
import itertools
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import needs_chromium, screenshot
from daskscope.analysis.graph_layout import MAX_OPEN, fold_groups, layered_layout
from daskscope.format import duration_text
from daskscope.model import ClusterRecord, ComputationRecord, SpanRecord, TaskGroupRecord
from daskscope.store import open_store, write_records
from webutil import call

pytest.importorskip("fastapi")
from daskscope.views import memo
from daskscope.web import create_app

CLUSTER = "large-computation"
BIG = "comp-10000"
SMALL = "comp-small"
FILES = 2500
OPS = ("read-file", "getitem", "mul", "sum-chunk")
NOW = time.time()
PAGE_LIMIT = 300_000  # bytes: the bound for every page at this size


def group_records() -> list[TaskGroupRecord]:
    rng = random.Random(26)
    groups = []
    for f in range(FILES):
        for k, op in enumerate(OPS):
            seconds = round(10 ** rng.uniform(-2, 1), 6)
            start = NOW - 3000 + f * 0.1 + k
            groups.append(
                TaskGroupRecord(
                    id=f"tg-{op}-{f}",
                    cluster_id=CLUSTER,
                    name=f"{op}-{f:05d}",
                    prefix=op,
                    computation_id=BIG,
                    span_id="span-load" if op == "read-file" else "span-compute",
                    dependencies=[f"{OPS[k - 1]}-{f:05d}"] if k else [],
                    states={"memory": 4},
                    tasks_total=4,
                    tasks_executed=4 if f % 1000 else 3,
                    tasks_erred=0 if f % 1000 else 1,
                    nbytes_total=1000 * (1 + f % 50) * (k + 1),
                    duration_s=seconds,
                    durations={"compute": seconds} if op != "read-file" else {"disk-read": seconds},
                    started_at=start,
                    stopped_at=start + seconds,
                )
            )
    for i in range(3):  # a small computation: drawn unfolded
        groups.append(
            TaskGroupRecord(
                id=f"tg-small-{i}", cluster_id=CLUSTER, name=f"small-{i}", prefix="small",
                computation_id=SMALL, dependencies=[f"small-{i - 1}"] if i else [],
                tasks_total=1, tasks_executed=1, nbytes_total=10, duration_s=1.0 + i,
                durations={"compute": 1.0 + i}, started_at=NOW - 100 + i, stopped_at=NOW - 99 + i,
            )
        )  # fmt: skip
    return groups


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('large-computation') / 'store.db'}"
    groups = group_records()
    cluster = ClusterRecord(
        id=CLUSTER, name="large computation", account="default", user="ana",
        scheduler_address="tcp://127.0.0.1:8786", dask_version="2026.8.0",
        distributed_version="2026.8.0", python_version="3.11", started_at=NOW - 3600,
        stopped_at=NOW, last_seen_at=NOW,
    )  # fmt: skip
    comps = [
        ComputationRecord(
            id=cid, cluster_id=CLUSTER, started_at=NOW - 3000 + i, stopped_at=NOW - 10,
            code=[f"x_{i}.compute()\n"], group_count=n,
            tasks_executed=sum(g.tasks_executed for g in groups if g.computation_id == cid),
        )
        for i, (cid, n) in enumerate(((BIG, 4 * FILES), (SMALL, 3)))
    ]  # fmt: skip
    spans = [
        SpanRecord(id=f"row-{s}", cluster_id=CLUSTER, span_id=s, name=name, enqueued_at=NOW - 3000)
        for s, name in (("span-load", ["load"]), ("span-compute", ["load", "compute"]))
    ]
    with open_store(url) as store:
        write_records(store, [cluster, *comps, *spans, *groups])
    app = create_app(url)
    big = [g for g in groups if g.computation_id == BIG]
    yield {"url": url, "app": app, "groups": big}
    app.state.store.close()


def get(app: Any, url: str, status: int = 200) -> Any:
    response = call(app, "GET", url)
    assert response.status_code == status, response.text[:500]
    return response


# ------------------------------------------------------------------ pure: the layout


def cells_are_distinct(position: dict[str, tuple[int, float]]) -> bool:
    return len(set(position.values())) == len(position)


def test_a_wide_layer_fills_the_width_instead_of_one_column() -> None:
    # 300 groups without dependencies between them: one layer, formerly one column
    names = [f"g{i:03d}" for i in range(300)]
    layout = layered_layout(names, [])
    assert cells_are_distinct(layout.position)
    assert layout.columns > 1 and layout.rows < 300
    ratio = layout.columns / layout.rows
    assert 1.2 < ratio < 4.8, (layout.columns, layout.rows)  # near the chart's 2.4
    assert layout.bands == [(0, layout.columns - 1)]


def test_layers_point_rightwards_and_cycles_are_set_aside() -> None:
    edges = [("a", "b"), ("b", "c"), ("c", "a"), ("a", "d"), ("d", "c")]
    layout = layered_layout(["a", "b", "c", "d"], edges)
    assert cells_are_distinct(layout.position)
    x = {n: p[0] for n, p in layout.position.items()}
    forward = [e for e in edges if e not in layout.reversed]
    assert layout.reversed == {("c", "a")}  # the one edge closing the cycle
    assert all(x[a] < x[b] for a, b in forward)
    assert x["a"] > x["c"] or ("c", "a") in layout.reversed
    # a chain of 20,000 is no recursion
    chain = [f"n{i}" for i in range(20_000)]
    long = layered_layout(chain, itertools.pairwise(chain))
    assert long.columns == 20_000 and long.rows == 1


def test_wrapped_columns_keep_each_layer_apart() -> None:
    names = [f"s{i}" for i in range(40)] + [f"t{i}" for i in range(40)]
    edges = [(f"s{i}", f"t{i}") for i in range(40)]
    layout = layered_layout(names, edges)
    assert cells_are_distinct(layout.position)
    (s_first, s_last), (t_first, t_last) = layout.bands
    assert s_last < t_first  # every column of the first layer left of the second's
    x = {n: p[0] for n, p in layout.position.items()}
    assert all(s_first <= x[f"s{i}"] <= s_last for i in range(40))
    assert all(t_first <= x[f"t{i}"] <= t_last for i in range(40))


# ------------------------------------------------------------------ pure: folding


def rows_of(groups: list[TaskGroupRecord]) -> list[dict[str, Any]]:
    keys = ("name", "prefix", "span_id", "dependencies", "tasks_total", "tasks_executed",
            "tasks_erred", "nbytes_total", "duration_s", "durations", "started_at")  # fmt: skip
    return [{k: getattr(g, k) for k in keys} for g in groups]


def test_folding_counts_every_group_once_and_opens_on_demand() -> None:
    rows = rows_of(group_records()[: 4 * FILES])
    folded = fold_groups(rows, by="prefix")
    assert [n["id"] for n in sorted(folded["nodes"], key=lambda n: n["x"])] == [
        f"prefix:{op}" for op in OPS
    ]
    assert all(n["groups"] == FILES and n["kind"] == "fold" for n in folded["nodes"])
    assert folded["groups_folded"] == 4 * FILES and folded["groups_drawn"] == 0
    assert folded["groups_not_drawn"] == 0 and folded["fold_nodes"] == 4
    # the edges between folds stand for every dependency between their groups
    assert {(e["source"], e["target"]): e["groups"] for e in folded["edges"]} == {
        (f"prefix:{a}", f"prefix:{b}"): FILES for a, b in itertools.pairwise(OPS)
    }
    nodes = {n["id"]: n for n in folded["nodes"]}
    mul = [r for r in rows if r["prefix"] == "mul"]
    assert nodes["prefix:mul"]["duration_s"] == pytest.approx(sum(r["duration_s"] for r in mul))
    assert nodes["prefix:mul"]["tasks_erred"] == 3 and nodes["prefix:mul"]["activity"] == "compute"
    assert nodes["prefix:read-file"]["activity"] == "disk-read"

    opened = fold_groups(rows, by="prefix", opened=["prefix:mul"])
    kinds: dict[str, list[dict[str, Any]]] = {}
    for n in opened["nodes"]:
        kinds.setdefault(n["kind"], []).append(n)
    longest = sorted(mul, key=lambda r: (-r["duration_s"], r["name"]))[:MAX_OPEN]
    assert sorted(n["id"] for n in kinds["group"]) == sorted(r["name"] for r in longest)
    (rest,) = kinds["more"]
    assert rest["groups"] == FILES - MAX_OPEN and rest["fold"] == "prefix:mul"
    assert sum(n["groups"] for n in opened["nodes"]) == 4 * FILES
    assert opened["groups_drawn"] == MAX_OPEN and opened["groups_folded"] == 4 * FILES - MAX_OPEN
    assert cells_are_distinct({n["id"]: (n["x"], n["y"]) for n in opened["nodes"]})
    assert opened["columns"] > opened["layers"]  # the opened layer takes several columns
    # by span, named by the spans' tags; an unknown fold to open is ignored
    spans = fold_groups(rows, by="span", opened=["prefix:nope"], labels={"span-load": "load"})
    assert {n["label"]: n["groups"] for n in spans["nodes"]} == {
        "load": FILES,
        "span-compute": 3 * FILES,
    }
    assert spans["opened"] == []


def test_folds_past_the_limit_are_one_node_and_the_path_is_counted() -> None:
    rows = [
        {"name": f"p{i}-g", "prefix": f"p{i}", "dependencies": [f"p{i - 1}-g"] if i else [],
         "duration_s": float(100 - i), "started_at": float(i)}
        for i in range(60)
    ]  # fmt: skip
    graph = fold_groups(rows, by="prefix", max_folds=40, path=["p0-g", "p1-g", "p2-g"])
    ids = [n["id"] for n in graph["nodes"]]
    assert len(ids) == 40 and "other" in ids
    other = next(n for n in graph["nodes"] if n["id"] == "other")
    assert other["groups"] == 21 and other["label"] == "21 other prefixes"
    lit = {n["id"]: n["highlighted"] for n in graph["nodes"] if n["highlighted"]}
    assert lit == {"prefix:p0": 1, "prefix:p1": 1, "prefix:p2": 1}
    steps = {(e["source"], e["target"]) for e in graph["edges"] if e["path_steps"]}
    assert steps == {("prefix:p0", "prefix:p1"), ("prefix:p1", "prefix:p2")}


def test_kept_values_are_bounded_by_weight(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'kept.db'}") as store:
        built: list[str] = []

        def build(name: str) -> str:
            built.append(name)
            return name

        for name in ("a", "b", "c"):
            memo.memoized(store, name, 1, lambda n=name: build(n), lambda v: memo.MAX_WEIGHT // 2)
        assert memo.memoized(store, "c", 1, lambda: build("c!")) == "c"  # kept
        assert memo.memoized(store, "a", 1, lambda: build("a!")) == "a!"  # weighed out
        assert memo.memoized(store, "c", 2, lambda: build("c2")) == "c2"  # a new fingerprint
        assert built == ["a", "b", "c", "a!", "c2"]
        memo.clear(store)
        assert memo.memoized(store, "c", 2, lambda: build("c3")) == "c3"


# ------------------------------------------------------------------ the routes


def test_the_page_and_its_json_are_bounded_at_10000_groups(site: dict[str, Any]) -> None:
    app = site["app"]
    page = get(app, f"/clusters/{CLUSTER}/computations/{BIG}")
    assert len(page.content) <= PAGE_LIMIT, len(page.content)
    rows = re.findall(r'<tr data-group="([^"]+)"', page.text)
    assert len(rows) == 100
    answer = get(app, f"/api/v1/clusters/{CLUSTER}/computations/{BIG}/critical-path")
    assert len(answer.content) <= PAGE_LIMIT, len(answer.content)
    body = answer.json()
    assert body["groups_total"] == body["groups_matched"] == 4 * FILES
    assert len(body["groups"]) == 100 and body["groups_next_offset"] == 100
    assert [g["name"] for g in body["groups"]] == rows  # the page lists the JSON's page
    listed = {g["name"] for g in body["groups"]}
    assert all(e["source"] in listed and e["target"] in listed for e in body["edges"])
    assert body["edges_total"] == 3 * FILES
    # the path is a file's four groups, and the whole of it is sent
    assert body["path_total"] == len(body["path"]) == 4
    graph = get(app, f"/api/v1/clusters/{CLUSTER}/computations/{BIG}/graph?path=1").json()
    assert len(json_bytes(graph)) <= PAGE_LIMIT
    assert graph["groups_folded"] == 4 * FILES and len(graph["nodes"]) == 4
    assert sum(n["highlighted"] for n in graph["nodes"]) == 4
    # the view before: every group and every edge, megabytes
    from daskscope.views import to_json
    from daskscope.views.critical_path import critical_path_view

    with open_store(site["url"]) as store:
        whole = critical_path_view(store, CLUSTER, BIG)
    assert whole is not None and len(to_json(whole)) > 3 * PAGE_LIMIT
    assert [g.name for g in whole.groups[:100]] == rows


def json_bytes(body: Any) -> bytes:
    import json

    return json.dumps(body).encode()


def test_paging_search_and_sort_follow_the_whole_list(site: dict[str, Any]) -> None:
    app = site["app"]
    base = f"/api/v1/clusters/{CLUSTER}/computations/{BIG}/critical-path"
    from daskscope.views.critical_path import critical_path_view

    with open_store(site["url"]) as store:  # the whole view, each group's longest task
        whole = critical_path_view(store, CLUSTER, BIG)
    assert whole is not None and len(whole.groups) == 4 * FILES
    truth = sorted(whole.groups, key=lambda g: (-g.longest_s, g.name))
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        body = get(app, f"{base}?sort=longest&limit=1000&offset={offset}").json()
        seen += [g["name"] for g in body["groups"]]
        offset = body["groups_next_offset"]
    assert seen == [g.name for g in truth]  # every group exactly once, in order
    found = get(app, f"{base}?q=MUL-0012&limit=1000").json()
    expected = sorted(g.name for g in site["groups"] if "mul-0012" in g.name)
    assert sorted(g["name"] for g in found["groups"]) == expected
    assert found["groups_matched"] == len(expected) == 10 and found["groups_query"] == "MUL-0012"
    assert found["groups_total"] == 4 * FILES
    assert get(app, f"{base}?sort=bogus", 400).json()["error"]["message"].startswith("sort must")
    # the one paging type of every route (at most 10,000); a page lists at most 1,000
    assert get(app, f"{base}?limit=10001", 400).status_code == 400
    assert len(get(app, f"{base}?limit=1001").json()["groups"]) == 1000
    # the page keeps it in its address: its links carry the search and the sort
    page = get(app, f"/clusters/{CLUSTER}/computations/{BIG}?q=mul&sort=tasks&offset=100").text
    assert re.findall(r'<tr data-group="([^"]+)"', page)[0].startswith("mul-")
    assert "Groups 101–200 of 2,500 whose name holds “mul” (of 10,000)" in page
    nxt = re.search(r'id="groups-next" rel="next" href="([^"]+)"', page)
    assert nxt is not None and "q=mul" in nxt.group(1) and "sort=tasks" in nxt.group(1)
    assert "offset=200" in nxt.group(1)


def test_totals_are_the_databases_not_the_pages(site: dict[str, Any]) -> None:
    groups = site["groups"]
    body = get(site["app"], f"/api/v1/clusters/{CLUSTER}/computations/{BIG}/critical-path").json()
    totals = body["group_totals"]
    assert totals["count"] == len(groups) == 4 * FILES
    assert totals["tasks_total"] == sum(g.tasks_total for g in groups)
    assert totals["tasks_executed"] == sum(g.tasks_executed for g in groups)
    assert totals["tasks_erred"] == sum(g.tasks_erred for g in groups) == 12
    assert totals["nbytes_total"] == sum(g.nbytes_total for g in groups)
    assert totals["duration_s"] == pytest.approx(sum(g.duration_s for g in groups))
    page = get(site["app"], f"/clusters/{CLUSTER}/computations/{BIG}?q=read").text
    executed = sum(g.tasks_executed for g in groups)
    assert f"10,000 task groups · {executed:,} of 40,000 tasks executed" in page
    assert "12 failed" in page


def test_the_kept_view_is_built_again_when_its_data_changes(site: dict[str, Any]) -> None:
    app = site["app"]
    url = f"/api/v1/clusters/{CLUSTER}/computations/{BIG}/critical-path?sort=longest&limit=1"
    first = get(app, url).json()
    before = memo.stats()
    again = get(app, url).json()
    assert again == first and memo.stats()["builds"] == before["builds"]  # kept
    longest = first["groups"][0]
    victim = next(g for g in site["groups"] if g.name == "sum-chunk-00007")
    changed = dataclasses.replace(
        victim, duration_s=1000.0, durations={"compute": 1000.0}, revision=10**18
    )
    with open_store(site["url"]) as store:
        write_records(store, [changed])
    try:
        now = get(app, url).json()
        assert now["groups"][0]["name"] == "sum-chunk-00007" != longest["name"]
        assert now["group_totals"]["duration_s"] == pytest.approx(
            first["group_totals"]["duration_s"] - victim.duration_s + 1000.0
        )
    finally:  # as it was, for the other tests
        with open_store(site["url"]) as store:
            write_records(store, [dataclasses.replace(victim, revision=10**18 + 1)])


def test_the_graph_route_folds_and_opens(site: dict[str, Any]) -> None:
    app = site["app"]
    base = f"/api/v1/clusters/{CLUSTER}/computations"
    auto = get(app, f"{base}/{BIG}/graph").json()
    assert auto["fold"] == "prefix" and auto["groups_total"] == 4 * FILES
    assert sorted(n["label"] for n in auto["nodes"]) == sorted(OPS)
    opened = get(app, f"{base}/{BIG}/graph?open=prefix:mul").json()
    assert opened["opened"] == ["prefix:mul"] and len(opened["nodes"]) == 3 + MAX_OPEN + 1
    spans = get(app, f"{base}/{BIG}/graph?fold=span").json()
    assert sorted(n["label"] for n in spans["nodes"]) == ["load", "load / compute"]
    unfolded = get(app, f"{base}/{BIG}/graph?fold=none").json()
    assert unfolded["fold"] is None and unfolded["groups_drawn"] == 300
    assert unfolded["groups_not_drawn"] == 4 * FILES - 300
    small = get(app, f"{base}/{SMALL}/graph").json()
    assert small["fold"] is None and [n["name"] for n in small["nodes"]] == [
        "small-0",
        "small-1",
        "small-2",
    ]
    assert get(app, f"{base}/{BIG}/graph?fold=bogus", 400).status_code == 400


# ------------------------------------------------------------------ in a browser

# the drawn nodes' boxes, from the chart's own SVG
BOXES = """(id) => [...document.getElementById(id)
  .querySelectorAll(".scatterlayer .trace .points path.point")]
  .map((p) => { const r = p.getBoundingClientRect();
                return [r.left, r.top, r.right, r.bottom]; })"""


def no_overlaps(boxes: list[list[float]]) -> list[tuple[int, int]]:
    """Pairs of nodes whose boxes overlap (a circle lies inside its box)."""
    return [
        (i, j)
        for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2)
        if a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5
    ]


def click_node(page: Any, chart: str, label: str) -> None:
    """Clicks the drawn node whose label is ``label`` (plotly's points in trace order)."""
    at = page.evaluate(
        """([id, label]) => {
          const div = document.getElementById(id);
          for (const layer of div.querySelectorAll('.scatterlayer .trace')) {
            const trace = layer.__data__[0].trace; // the trace this group of points draws
            const i = (trace.text || []).findIndex((x) => x.startsWith(label));
            if (i < 0) continue;
            const r = layer.querySelectorAll('.points path.point')[i].getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2];
          }
          return null; }""",
        [chart, label],
    )
    assert at is not None, label
    page.mouse.click(*at)


@needs_chromium
def test_the_graph_of_10000_groups_is_readable_and_says_what_is_folded(
    site: dict[str, Any], open_page: Any
) -> None:
    from webutil import serving

    with serving(site["app"]) as base:
        page = open_page(1440, 900)
        page.goto(f"{base}/clusters/{CLUSTER}?tab=computations&computation={BIG}")
        chart = f"graph-{BIG}"
        page.wait_for_selector(f"#{chart}[data-ready='1']")
        boxes = page.evaluate(BOXES, chart)
        assert len(boxes) == 4 and no_overlaps(boxes) == []
        # the layers use the width: four folds side by side, not a column
        assert len({round(b[0]) for b in boxes}) == 4
        note = page.locator(f"#graph-note-{BIG}").inner_text()
        assert "10,000 task groups: 10,000 folded into 4 nodes, one per task prefix" in note
        labels = page.evaluate(f"() => document.getElementById('{chart}').data.at(-1).text")
        assert sorted(labels) == sorted(f"{op} ×2,500" for op in OPS)
        page.locator(f"#{chart}").scroll_into_view_if_needed()
        click_node(page, chart, "mul")
        page.wait_for_selector(f"#{chart}[data-opened='prefix:mul']")
        boxes = page.evaluate(BOXES, chart)
        assert len(boxes) == 3 + MAX_OPEN + 1 and no_overlaps(boxes) == []
        assert "open=prefix%3Amul" in page.url
        note = page.locator(f"#graph-note-{BIG}").inner_text()
        assert "Open: mul." in note and f"{MAX_OPEN} drawn each as its own node" in note
        page.evaluate("(id) => document.getElementById(id).scrollIntoView()", f"graph-tools-{BIG}")
        page.mouse.move(5, 5)  # no tooltip over the chart in the picture
        screenshot(page, "graph-10000-groups-opened", full_page=False)
        # the address keeps it
        page.reload()
        page.wait_for_selector(f"#{chart}[data-opened='prefix:mul']")
        assert page.evaluate(BOXES, chart).__len__() == 3 + MAX_OPEN + 1
        # the wheel zooms in, a drag pans
        x_range = f"() => document.getElementById('{chart}')._fullLayout.xaxis.range.slice()"
        before = page.evaluate(x_range)
        box = page.locator(f"#{chart} .nsewdrag").first.bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.wheel(0, -300)
        page.wait_for_function(
            f"(r) => ({x_range})()[1] - ({x_range})()[0] < r[1] - r[0]", arg=before
        )
        zoomed = page.evaluate(x_range)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] / 2 + 150, box["y"] + box["height"] / 2, steps=5)
        page.mouse.up()
        page.wait_for_function(f"(r) => ({x_range})()[0] < r[0]", arg=zoomed)
        # by span: the spans' names
        page.select_option(f"#graph-tools-{BIG} select", "span")
        page.wait_for_selector(f"#{chart}[data-fold='span']")
        assert "fold=span" in page.url and "open=" not in page.url
        labels = page.evaluate(f"() => document.getElementById('{chart}').data.at(-1).text")
        assert sorted(labels) == ["load / compute ×7,500", "load ×2,500"]
        page.go_back()
        page.wait_for_selector(f"#{chart}[data-opened='prefix:mul']")


@needs_chromium
def test_the_computation_page_of_10000_groups(site: dict[str, Any], open_page: Any) -> None:
    from webutil import serving

    with serving(site["app"]) as base:
        page = open_page(1440, 900)
        page.goto(f"{base}/clusters/{CLUSTER}/computations/{BIG}")
        page.wait_for_function("() => document.getElementById('path-graph').dataset.ready === '1'")
        page.wait_for_function("() => document.getElementById('whatif').dataset.ready === '1'")
        boxes = page.evaluate(BOXES, "path-graph")
        assert len(boxes) == 4 and no_overlaps(boxes) == []
        assert page.evaluate("() => document.getElementById('path-graph').dataset.onPath") == "4"
        note = page.locator("#path-graph-note").inner_text()
        assert "10,000 folded into 4 nodes" in note
        assert page.locator("#path-groups tbody tr").count() == 100
        assert page.locator("#group-page-note").inner_text().startswith("Groups 1–100 of 10,000")
        screenshot(page, "computation-10000-groups")
        # search: typed and sent with Enter, kept in the address
        page.fill("#group-q", "getitem-0001")
        page.press("#group-q", "Enter")
        page.wait_for_url("**q=getitem-0001**")
        names = page.locator("#path-groups tbody tr td:first-child code").all_inner_texts()
        assert sorted(names) == [f"getitem-{i:05d}" for i in range(10, 20)]
        assert (
            "of 10 whose name holds “getitem-0001” (of 10,000)"
            in page.locator("#group-page-note").inner_text()
        )
        # sort by longest task, then the next page
        page.click("#path-groups th a[data-sort='longest']")
        page.wait_for_url("**sort=longest**")
        assert "q=getitem-0001" in page.url
        page.goto(f"{base}/clusters/{CLUSTER}/computations/{BIG}?sort=longest")
        page.click("#groups-next")
        page.wait_for_url("**offset=100**")
        body = page.request.get(
            f"{base}/api/v1/clusters/{CLUSTER}/computations/{BIG}/critical-path"
            "?sort=longest&offset=100"
        ).json()
        names = page.locator("#path-groups tbody tr td:first-child code").all_inner_texts()
        assert names == [g["name"] for g in body["groups"]] and len(names) == 100
        longest = page.locator("#path-groups tbody tr td:nth-child(3)").all_inner_texts()
        assert longest == [duration_text(g["longest_s"]) for g in body["groups"]]
        page.go_back()
        page.wait_for_function("() => !location.search.includes('offset')")
        # open a fold in the path's graph
        page.wait_for_function("() => document.getElementById('path-graph').dataset.ready === '1'")
        page.locator("#path-graph").scroll_into_view_if_needed()
        click_node(page, "path-graph", "sum-chunk")
        page.wait_for_selector("#path-graph[data-opened='prefix:sum-chunk']")
        boxes = page.evaluate(BOXES, "path-graph")
        assert len(boxes) == 3 + MAX_OPEN + 1 and no_overlaps(boxes) == []
        page.hover("#path-graph-note")  # no tooltip over the chart in the picture
        screenshot(page, "computation-10000-groups-opened", full_page=False)
        # the table's links keep the graph as it is now
        page.click("#path-groups th a[data-sort='tasks']")
        page.wait_for_url("**sort=tasks**")
        assert "open=prefix%3Asum-chunk" in page.url
        page.wait_for_selector("#path-graph[data-opened='prefix:sum-chunk']")
        phone = open_page(390, 844)
        phone.goto(f"{base}/clusters/{CLUSTER}/computations/{BIG}")
        phone.wait_for_function("() => document.getElementById('path-graph').dataset.ready === '1'")
        assert no_overlaps(phone.evaluate(BOXES, "path-graph")) == []
        assert phone.evaluate("() => document.documentElement.scrollWidth") <= 390
        screenshot(phone, "computation-10000-groups-390")
