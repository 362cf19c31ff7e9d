"""Member usage as the account page reads it, on SQLite and PostgreSQL: every cluster's
hours, compute and cost counted once, in its member's row and the week it started,
checked against the cluster rows written; the heat map's ranking, "others" row and
colours; the covering index declared in the schema and made by migration 0008."""

from __future__ import annotations

import random
import time

import dask
import pytest
import sqlalchemy as sa

from daskscope import model
from daskscope.catalogue import figure
from daskscope.store import schema as s
from daskscope.store import write_records
from daskscope.views.account import TOP_MEMBERS, usage_map, usage_view
from daskscope.web.usage_heat import IDLE, SCALE, colour, heat_map
from factories import make_cluster
from webutil import GIB, monday

WEEK = 7 * 86400
# "default": None takes away the shipped default prices: account "unpriced" has none
PRICES = {
    "default": None,
    "cheap": {"per-core-hour": 0.04, "per-gib-hour": 0.005},
    "dear": {"per-core-hour": 1.5, "currency": "USD"},
}


def random_clusters(now: float, n: int, members: int, seed: int = 7) -> list[model.ClusterRecord]:
    """``n`` clusters of ``members`` members in three accounts (one without prices: no
    ``default`` entry either) over the
    last 8 weeks; some still running (no stop), a few before the range."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        start = now - rng.uniform(0, 10 * WEEK)
        seconds = rng.uniform(60, 20_000)
        stopped = None if i % 9 == 0 else start + seconds
        rows.append(
            make_cluster(
                f"c{i}",
                start=start,
                id=model.stable_id("usage", i),
                user=f"m{rng.randrange(members):02d}",
                account=rng.choice(["cheap", "dear", "unpriced"]),
                stopped_at=stopped,
                last_seen_at=start + seconds,
                core_seconds=seconds * rng.randint(1, 64),
                compute_seconds=seconds * rng.uniform(0, 8),
                memory_limit_byte_seconds=seconds * rng.randint(1, 256) * GIB,
            )
        )
    return rows


def expected_usage(rows: list[model.ClusterRecord], since: float) -> dict[tuple[str, float], dict]:
    """(user, Monday) -> sums, straight from the records, priced by hand."""
    out: dict[tuple[str, float], dict] = {}
    for c in rows:
        if c.started_at < since:
            continue
        cell = out.setdefault(
            (c.user, monday(c.started_at)), {"hours": 0.0, "compute": 0.0, "cost": 0.0, "n": 0}
        )
        end = c.stopped_at if c.stopped_at is not None else c.last_seen_at
        cell["hours"] += (end - c.started_at) / 3600
        cell["compute"] += c.compute_seconds / 3600
        cell["n"] += 1
        if c.account == "cheap":
            cell["cost"] += c.core_seconds / 3600 * 0.04
            cell["cost"] += c.memory_limit_byte_seconds / GIB / 3600 * 0.005
        elif c.account == "dear":
            cell["cost"] += c.core_seconds / 3600 * 1.5
    return out


def test_every_cluster_counts_once_in_its_member_week(store: object) -> None:
    now = time.time()
    rows = random_clusters(now, 400, members=30)
    write_records(store, rows)
    with dask.config.set({"daskscope.cost": PRICES}):
        usage = usage_view(store, 8, now=now)  # type: ignore[arg-type]
    assert usage.weeks[-1] == monday(now) and len(usage.weeks) == 8
    want = expected_usage(rows, usage.since)
    got = {}
    for m in usage.members:
        for i, week in enumerate(usage.weeks):
            if m.clusters[i]:
                got[(m.user, week)] = (
                    m.cluster_hours[i],
                    m.compute_hours[i],
                    m.cost[i],
                    m.clusters[i],
                )
            else:
                assert m.cluster_hours[i] == m.compute_hours[i] == m.cost[i] == 0
    assert set(got) == set(want)
    for key, (hours, compute, cost, n) in got.items():
        assert n == want[key]["n"]
        assert hours == pytest.approx(want[key]["hours"], rel=1e-9)
        assert compute == pytest.approx(want[key]["compute"], rel=1e-9)
        assert cost == pytest.approx(want[key]["cost"], rel=1e-9)
    # in all: every cluster of the range once
    assert sum(sum(m.clusters) for m in usage.members) == sum(
        c.started_at >= usage.since for c in rows
    )


def test_heat_map_ranks_groups_and_colours(store: object) -> None:
    now = time.time()
    rows = random_clusters(now, 600, members=40, seed=3)
    write_records(store, rows)
    with dask.config.set({"daskscope.cost": PRICES}):
        usage = usage_view(store, 8, now=now)  # type: ignore[arg-type]
    want = expected_usage(rows, usage.since)
    totals: dict[str, float] = {}
    for (user, _), cell in want.items():
        totals[user] = totals.get(user, 0.0) + cell["cost"]
    ranked = sorted(totals, key=lambda u: (-totals[u], u))
    drawn = usage_map(usage, "cost")
    assert [r.user for r in drawn.members] == [*ranked[:TOP_MEMBERS], None]
    others = drawn.members[-1]
    assert others.label == f"others ({len(ranked) - TOP_MEMBERS} members)"
    assert others.grouped == sorted(ranked[TOP_MEMBERS:])
    for i, week in enumerate(drawn.weeks):
        rest = [want.get((u, week), {"cost": 0.0, "n": 0}) for u in ranked[TOP_MEMBERS:]]
        assert others.values[i] == pytest.approx(sum(c["cost"] for c in rest), rel=1e-9)
        assert others.clusters[i] == sum(c["n"] for c in rest)
    member_cells = [v for r in drawn.members[:-1] for v in r.values]
    assert drawn.scale_max == max(member_cells)
    # as drawn: idle grey, the largest member cell the darkest blue, money in its unit
    drawn_map = heat_map(drawn, figure("member.cost"), "USD")
    assert drawn_map.title == "cost (USD)"
    assert drawn_map.high.endswith(" USD")
    colours = {c.colour for r in drawn_map.rows[:-1] for c in r.cells}
    assert SCALE[-1][1] in colours
    assert all(
        c.colour == IDLE for r, row in zip(drawn_map.rows, drawn.members, strict=True)
        for c, v in zip(r.cells, row.values, strict=True) if v == 0
    )  # fmt: skip
    with pytest.raises(ValueError, match="metric must be one of"):
        usage_map(usage, "bytes")


def test_colour_scale_ends() -> None:
    assert colour(0.0, 10.0) == IDLE
    assert colour(1e-12, 10.0) == SCALE[0][1]
    assert colour(5.0, 10.0) == SCALE[1][1]
    assert colour(10.0, 10.0) == colour(99.0, 10.0) == SCALE[-1][1]


def test_few_members_have_no_others_row(store: object) -> None:
    now = time.time()
    rows = random_clusters(now, 120, members=TOP_MEMBERS + 1, seed=5)
    write_records(store, rows)
    drawn = usage_map(usage_view(store, 12, now=now))  # type: ignore[arg-type]
    assert len(drawn.members) == len({c.user for c in rows if c.started_at >= drawn.since})
    assert all(r.user is not None for r in drawn.members)


def test_usage_index_is_declared_and_migrated(store: object) -> None:
    engine = store.engine  # type: ignore[attr-defined]
    found = {ix["name"]: ix["column_names"] for ix in sa.inspect(engine).get_indexes("clusters")}
    declared = next(ix for ix in s.clusters.indexes if ix.name == "ix_clusters_usage")
    assert found["ix_clusters_usage"] == [c.name for c in declared.columns]
