"""A cluster with many task groups: pages and ``show --json`` carry a summary and a
bounded selection, the paged route lists every group exactly once, and every cut says
what it left out. Ground truth: the groups written to the store here."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from browser import needs_chromium
from daskscope.cli.main import JSON_GROUPS, TABLE_GROUPS, cli
from daskscope.model import ClusterRecord, ComputationRecord, TaskGroupRecord
from daskscope.store import open_store, write_records
from daskscope.store.queries import PAGE_NAMES_PER_COMPUTATION, PAGE_TOP_GROUPS
from webutil import call

pytest.importorskip("fastapi")
from daskscope.views.computation import FOLD_ABOVE
from daskscope.web import create_app
from daskscope.web.routes.clusters import MAX_GRAPH_GROUPS, MAX_GROUP_PAGE

CLUSTER = "many-groups-cluster"
#: groups per computation: one over every cap, one under them all, one in between;
#: None: groups whose computation was not recorded
SIZES = {"big": 1500, "small": 12, "middle": 400, None: 40}
NOW = time.time()


def seeded_groups() -> list[TaskGroupRecord]:
    rng = random.Random(7)
    groups = []
    for comp, n in SIZES.items():
        for i in range(n):
            prefix = ("load", "parse", "sum")[i % 3]
            started = None if i % 97 == 5 else NOW - 3000 + rng.randrange(300)  # ties too
            groups.append(
                TaskGroupRecord(
                    id=f"tg-{comp}-{i}",
                    cluster_id=CLUSTER,
                    # "shared-*" recurs in every computation, as Dask's names may
                    name=f"shared-{i}" if i < 5 else f"{prefix}-{comp}-{i:05d}",
                    prefix=prefix,
                    computation_id=None if comp is None else f"comp-{comp}",
                    dependencies=[f"{prefix}-{comp}-{i - 10:05d}"] if i >= 15 else [],
                    states={"memory": 3},
                    tasks_total=3 + i % 4,
                    tasks_executed=3,
                    tasks_erred=i % 4 if i % 50 == 0 else 0,
                    nbytes_total=1000 * (i + 1),
                    duration_s=round(rng.uniform(0.001, 100.0), 6),
                    durations={"compute": 1.0},
                    started_at=started,
                    stopped_at=None if started is None else started + 1,
                )
            )
    return groups


def start_order(g: dict[str, Any]) -> tuple:
    """The documented order of the full list: start (never started last), name, id."""
    return (g["started_at"] is None, g["started_at"] or 0.0, g["name"], g["id"])


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('many-groups') / 'store.db'}"
    yield _seed(url)


@pytest.fixture
def seeded_any(database_url: str) -> dict[str, Any]:
    """The same on SQLite and PostgreSQL (``database_url`` is parametrized in conftest)."""
    return _seed(database_url)


def _seed(url: str) -> dict[str, Any]:
    groups = seeded_groups()
    cluster = ClusterRecord(
        id=CLUSTER, name="many groups", account="default", user="ana",
        scheduler_address="tcp://127.0.0.1:8786", dask_version="2026.8.0",
        distributed_version="2026.8.0", python_version="3.11", started_at=NOW - 3600,
        stopped_at=NOW, last_seen_at=NOW,
    )  # fmt: skip
    comps = [
        ComputationRecord(
            id=f"comp-{c}",
            cluster_id=CLUSTER,
            started_at=NOW - 3000 + k,
            stopped_at=NOW - 10,
            code=[f"x_{c}.compute()\n"],
            group_count=n,
        )
        for k, (c, n) in enumerate(SIZES.items())
        if c is not None
    ]
    with open_store(url) as store:
        write_records(store, [cluster, *comps, *groups])
    rows = [
        {k: getattr(g, k) for k in ("id", "name", "computation_id", "duration_s", "started_at")}
        | {k: getattr(g, k) for k in ("tasks_total", "tasks_executed", "tasks_erred")}
        | {"nbytes_total": g.nbytes_total}
        for g in groups
    ]
    return {"url": url, "app": create_app(url), "groups": rows}


def get(app: Any, url: str, status: int = 200) -> Any:
    response = call(app, "GET", url)
    assert response.status_code == status, response.text
    return response


def longest(groups: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    return sorted(groups, key=lambda g: (-g["duration_s"], *start_order(g)))[:n]


# ------------------------------------------------------------------ the paged route


def test_the_paged_route_lists_every_group_exactly_once(seeded_any: dict[str, Any]) -> None:
    app, groups = seeded_any["app"], seeded_any["groups"]
    url: str | None = f"/api/v1/clusters/{CLUSTER}/task-groups?limit=333"
    listed = []
    while url is not None:
        body = get(app, url).json()
        assert body["total"] == len(groups)
        listed.extend(body["groups"])
        url = body["next"]
    assert len(listed) == len(groups) == sum(SIZES.values())
    assert [g["id"] for g in listed] == [g["id"] for g in sorted(groups, key=start_order)]
    by_id = {g["id"]: g for g in groups}
    for row in listed:  # full rows, as stored
        truth = by_id[row["id"]]
        assert {k: row[k] for k in truth} == pytest.approx(truth)
        assert row["dependencies"] is not None and row["durations"] == {"compute": 1.0}
    for comp, n in SIZES.items():
        if comp is None:
            continue
        body = get(app, f"/api/v1/clusters/{CLUSTER}/task-groups?computation=comp-{comp}"
                   f"&limit={MAX_GROUP_PAGE}").json()  # fmt: skip
        assert body["total"] == n and body["next"] is None
        assert sorted(g["id"] for g in body["groups"]) == sorted(
            g["id"] for g in groups if g["computation_id"] == f"comp-{comp}"
        )


def test_the_paged_route_refuses_bad_input_clearly(seeded: dict[str, Any]) -> None:
    app = seeded["app"]
    base = f"/api/v1/clusters/{CLUSTER}/task-groups"
    assert "greater than or equal to 0" in get(app, f"{base}?offset=-1", 400).text
    assert (
        f"less than or equal to {MAX_GROUP_PAGE}"
        in get(app, f"{base}?limit={MAX_GROUP_PAGE + 1}", 400).text
    )
    missing = get(app, f"{base}?computation=nope", 404).json()
    assert "has no computation 'nope'" in json.dumps(missing)
    get(app, "/api/v1/clusters/no-such-cluster/task-groups", 404)
    past = get(app, f"{base}?offset=100000").json()
    assert past["groups"] == [] and past["next"] is None and past["total"] == len(seeded["groups"])


# ------------------------------------------------------------------ page and JSON


def test_the_cluster_json_carries_totals_and_the_longest_groups(seeded: dict[str, Any]) -> None:
    groups = seeded["groups"]
    body = get(seeded["app"], f"/api/v1/clusters/{CLUSTER}").json()
    summary = body["task_group_summary"]
    assert summary["count"] == len(groups)
    for key in ("tasks_total", "tasks_executed", "tasks_erred", "nbytes_total"):
        assert summary[key] == sum(g[key] for g in groups)
    assert summary["duration_s"] == pytest.approx(sum(g["duration_s"] for g in groups))
    assert [g["name"] for g in summary["top"]] == [
        g["name"] for g in longest(groups, PAGE_TOP_GROUPS)
    ]
    assert summary["shown"] == PAGE_TOP_GROUPS
    assert summary["omitted"] == len(groups) - PAGE_TOP_GROUPS
    for comp in body["computations"]:
        mine = sorted((g for g in groups if g["computation_id"] == comp["id"]), key=start_order)
        assert comp["task_groups_total"] == len(mine)
        assert comp["task_groups"] == [g["name"] for g in mine[:PAGE_NAMES_PER_COMPUTATION]]
        assert comp["task_groups_omitted"] == max(0, len(mine) - PAGE_NAMES_PER_COMPUTATION)
    assert len(json.dumps(body)) < 100_000  # bounded, whatever the number of groups


def test_the_cluster_page_shows_the_summary_and_says_what_it_leaves_out(
    seeded: dict[str, Any],
) -> None:
    groups = seeded["groups"]
    html = get(seeded["app"], f"/clusters/{CLUSTER}").text
    assert f"{len(groups):,} task groups" in html
    for g in longest(groups, PAGE_TOP_GROUPS):
        assert f'data-group="{g["name"]}"' in html
    omitted = len(groups) - PAGE_TOP_GROUPS
    assert f"The {PAGE_TOP_GROUPS} longest of {len(groups):,} groups are listed" in html
    assert f"{omitted:,} more are not" in html
    assert f"/api/v1/clusters/{CLUSTER}/task-groups" in html
    big = SIZES["big"] - PAGE_NAMES_PER_COMPUTATION
    assert f"(+{big:,} more groups)" in html


def test_a_graph_draws_the_longest_groups_and_counts_the_rest(seeded: dict[str, Any]) -> None:
    groups = seeded["groups"]
    base = f"/api/v1/clusters/{CLUSTER}/computations"
    for comp, n in SIZES.items():
        if comp is None:
            continue
        # unfolded: the longest groups, the rest counted
        graph = get(seeded["app"], f"{base}/comp-{comp}/graph?fold=none").json()
        mine = [g for g in groups if g["computation_id"] == f"comp-{comp}"]
        drawn = longest(mine, MAX_GRAPH_GROUPS)
        assert sorted(node["name"] for node in graph["nodes"]) == sorted(g["name"] for g in drawn)
        assert graph["groups_total"] == n
        assert graph["groups_drawn"] == len(drawn)
        assert graph["groups_not_drawn"] == max(0, n - MAX_GRAPH_GROUPS)
        names = {node["name"] for node in graph["nodes"]}
        assert all(e["source"] in names and e["target"] in names for e in graph["edges"])
        assert graph["all_groups_url"].endswith(f"task-groups?computation=comp-{comp}")
        # as the page asks (fold=auto): past FOLD_ABOVE groups, every group in a fold
        auto = get(seeded["app"], f"{base}/comp-{comp}/graph").json()
        assert auto["groups_total"] == n and auto["groups_not_drawn"] == 0
        assert sum(node["groups"] for node in auto["nodes"]) == n
        if n > FOLD_ABOVE:
            assert auto["fold"] == "prefix" and auto["groups_folded"] == n
            assert sorted(node["label"] for node in auto["nodes"]) == ["load", "parse", "sum"]
        else:
            assert auto["fold"] is None and auto["groups_drawn"] == n


# ------------------------------------------------------------------ show


def test_show_json_carries_the_longest_groups_unless_asked_for_all(
    seeded: dict[str, Any],
) -> None:
    groups = seeded["groups"]
    runner = CliRunner()
    args = ["--database", seeded["url"], "show", CLUSTER, "--json"]
    default = json.loads(runner.invoke(cli, args, catch_exceptions=False).output)
    assert len(groups) > JSON_GROUPS
    expected = sorted(longest(groups, JSON_GROUPS), key=start_order)
    assert [g["id"] for g in default["task_groups"]] == [g["id"] for g in expected]
    summary = default["task_group_summary"]
    assert summary["count"] == len(groups) and summary["shown"] == JSON_GROUPS
    assert summary["omitted"] == len(groups) - JSON_GROUPS
    assert summary["selection"] == "longest"
    big = next(c for c in default["computations"] if c["id"] == "comp-big")
    assert big["task_groups_total"] == SIZES["big"]
    assert big["task_groups_omitted"] == SIZES["big"] - len(big["task_groups"])

    everything = json.loads(runner.invoke(cli, [*args, "--all-groups"]).output)
    assert [g["id"] for g in everything["task_groups"]] == [
        g["id"] for g in sorted(groups, key=start_order)
    ]
    assert everything["task_group_summary"]["omitted"] == 0

    refused = runner.invoke(cli, ["--database", seeded["url"], "show", CLUSTER, "--all-groups"])
    assert refused.exit_code == 2 and "add --json" in refused.output

    table = runner.invoke(cli, ["--database", seeded["url"], "show", CLUSTER], terminal_width=200)
    assert table.exit_code == 0, table.output
    note = " ".join(table.output.split())
    assert f"the {TABLE_GROUPS} first by start of {len(groups):,} are shown" in note
    assert "--json --all-groups" in note


# ------------------------------------------------------------------ in a browser


@needs_chromium
def test_the_graph_says_how_many_groups_it_did_not_draw(
    seeded: dict[str, Any], open_page: Any
) -> None:
    from webutil import serving

    with serving(seeded["app"]) as base:
        page = open_page(1300, 900)
        page.goto(f"{base}/clusters/{CLUSTER}")
        assert page.locator("#top-task-groups tbody tr").count() == PAGE_TOP_GROUPS
        page.click("#tab-computations")
        page.click('button.expand[data-id="comp-big"]')
        page.wait_for_selector("#graph-comp-big[data-ready='1']")
        graph = page.locator("#graph-comp-big")
        # folded by prefix: every group counted in a node, and the note says so
        assert graph.get_attribute("data-nodes") == "3"
        assert graph.get_attribute("data-folded") == str(SIZES["big"])
        note = page.locator("#graph-note-comp-big")
        assert note.is_visible()
        big = SIZES["big"]
        assert f"{big:,} task groups: {big:,} folded into 3 nodes" in note.inner_text()
        # unfolded, the longest are drawn and the rest counted
        page.select_option("#graph-tools-comp-big select", "none")
        page.wait_for_selector("#graph-comp-big[data-fold='none']")
        assert graph.get_attribute("data-nodes") == str(MAX_GRAPH_GROUPS)
        not_drawn = SIZES["big"] - MAX_GRAPH_GROUPS
        assert f"{not_drawn:,} more groups not drawn" in note.inner_text()
        page.select_option("#graph-tools-comp-big select", "prefix")
        page.wait_for_selector("#graph-comp-big[data-fold='prefix']")
        page.click('button.expand[data-id="comp-small"]')
        page.wait_for_selector("#graph-comp-small[data-ready='1']")
        assert not page.locator("#graph-note-comp-small").is_visible()


def test_the_longest_groups_come_from_their_index_and_equal_a_full_sort(
    seeded_any: dict[str, Any],
) -> None:
    """The page's longest groups (and ``show --json``'s) are read through the partial
    index ``ix_task_groups_longest`` on SQLite and PostgreSQL, and are the groups a full
    sort of every row finds; the page's other reads of all groups do not walk it."""
    import sqlalchemy as sa

    from daskscope.store.groups import BRIEF_COLUMNS, GROUP_ORDER, _longest_index
    from daskscope.store.groups import _g as g
    from daskscope.store.queries import cluster_detail

    groups = seeded_any["groups"]
    with open_store(seeded_any["url"]) as store:
        detail = cluster_detail(store, CLUSTER, max_groups=100)
        engine = store.engine
        postgres = engine.dialect.name == "postgresql"
        longest_read = (
            sa.select(*BRIEF_COLUMNS)
            .where(g.cluster_id == CLUSTER, *_longest_index(None))
            .order_by(g.duration_s.desc(), *GROUP_ORDER)
            .limit(PAGE_TOP_GROUPS)
        )
        page_read = sa.select(g.id).where(g.cluster_id == CLUSTER).order_by(*GROUP_ORDER)

        def plan(query: Any) -> str:
            sql = str(query.compile(engine, compile_kwargs={"literal_binds": True}))
            explain = "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "
            with engine.connect() as conn:
                if postgres:  # a small table: make the planner show what it would pick
                    conn.exec_driver_sql("SET enable_seqscan = off")
                rows = conn.exec_driver_sql(explain + sql).all()
            return "\n".join(str(row[-1]) for row in rows)

        assert "ix_task_groups_longest" in plan(longest_read)
        assert "ix_task_groups_longest" not in plan(page_read)
    summary = detail["task_group_summary"]
    assert [t["id"] for t in summary["top"]] == [t["id"] for t in longest(groups, PAGE_TOP_GROUPS)]
    assert {t["id"] for t in detail["task_groups"]} == {t["id"] for t in longest(groups, 100)}
