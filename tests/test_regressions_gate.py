"""The regression check as a CI gate, on real runs of one long-lived in-process cluster
(a service running the same two jobs over and over): the span "etl" runs 10 times, its
"extract" task sleeping 0.6 s times a wobble of ±20 % (the last three runs all +20 %)
beside two "transform" tasks whose sleeps double in the last three runs; the span
"steady" runs the same wobble with nothing doubled. The first run of each keeps its
results, so their task groups live on and Dask puts every later run's tasks into that
first span (one Dask span per tag): daskscope must still see ten runs of each.

Ground truth: Dask's own task stream (compute seconds per prefix and run, each run's
first start and last stop) and its spans extension (how many spans it made)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import dask
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster, get_task_stream, span

import daskscope
from daskscope.cli.main import cli
from daskscope.store import open_store
from daskscope.store.history import recurring_names
from daskscope.views.history import history_view, regressions_view

MAIN, HOT, RUNS, DOUBLED = 0.6, 0.15, 10, 3
#: ±20 % around the main task's sleep; the last three runs all at +20 %
WOBBLE = (1.0, 1.2, 0.8, 1.1, 0.9, 1.0, 0.8, 1.2, 1.2, 1.2)
#: Per tag: the main task's prefix and the prefix of the two short tasks beside it
PREFIXES = {"etl": ("extract", "transform"), "steady": ("ingest", "clean")}


def extract(seconds: float, i: int) -> int:
    time.sleep(seconds)
    return i


def transform(seconds: float, i: int) -> int:
    time.sleep(seconds)
    return i


def ingest(seconds: float, i: int) -> int:
    time.sleep(seconds)
    return i


def clean(seconds: float, i: int) -> int:
    time.sleep(seconds)
    return i


FUNCTIONS = {f.__name__: f for f in (extract, transform, ingest, clean)}


async def heartbeat(dask_worker: Any) -> None:
    await dask_worker.heartbeat()


def dask_spans(dask_scheduler: Any) -> dict[str, int]:
    """How many spans Dask made of each tag."""
    spans = dask_scheduler.extensions["spans"].spans.values()
    return dict(Counter("/".join(s.name) for s in spans))


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('gate') / 'store.db'}"
    keys: dict[tuple[str, int], set[str]] = {}
    held: list[Any] = []
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=3, processes=False, dashboard_address=":0"
        ) as lc,
        Client(lc) as client,
    ):
        daskscope.register(client, database=url, name="service")
        with get_task_stream(client) as ts:
            for run in range(RUNS):
                for tag, (main, hot) in PREFIXES.items():
                    short = 2 * HOT if tag == "etl" and run >= RUNS - DOUBLED else HOT
                    with span(tag):
                        work = [
                            dask.delayed(FUNCTIONS[main])(MAIN * WOBBLE[run], 0),
                            *(dask.delayed(FUNCTIONS[hot])(short, i) for i in (1, 2)),
                        ]
                        keys[tag, run] = {str(d.key) for d in work}
                        if run == 0:  # kept: their groups live, later runs join this span
                            held.extend(client.compute(work))
                            client.gather(held[-len(work) :])
                        else:
                            dask.compute(*work)
        client.run(heartbeat)
        assert daskscope.flush(client)["write_failures"] == 0
        made = client.run_on_scheduler(dask_spans)
    truth: dict[tuple[str, int], dict[str, Any]] = {}
    for (tag, run), mine in keys.items():
        seconds: dict[str, float] = {}
        starts, stops = [], []
        for t in ts.data:
            if str(t["key"]) not in mine:
                continue
            for ss in t["startstops"]:
                if ss["action"] == "compute":
                    prefix = str(t["key"]).split("-", 1)[0]
                    seconds[prefix] = seconds.get(prefix, 0.0) + ss["stop"] - ss["start"]
                    starts.append(ss["start"])
                    stops.append(ss["stop"])
        truth[tag, run] = {"seconds": seconds, "wall": max(stops) - min(starts)}
    yield {"url": url, "truth": truth, "dask_spans": made}


def test_dask_merged_the_runs_and_daskscope_splits_them(service: dict[str, Any]) -> None:
    # the premise: Dask made one span per tag, all ten runs' tasks in it
    assert service["dask_spans"]["etl"] == 1 and service["dask_spans"]["steady"] == 1
    with open_store(service["url"]) as store:
        for tag, prefixes in PREFIXES.items():
            view = history_view(store, "span", tag)
            assert len(view.points) == RUNS, (tag, [p.id for p in view.points])
            assert len({p.id for p in view.points}) == RUNS
            series = {s.id: s for s in view.series}
            for run in range(RUNS):
                truth = service["truth"][tag, run]
                for prefix in prefixes:
                    value = series[f"prefix.duration_s:{prefix}"].values[run]
                    assert value == pytest.approx(truth["seconds"][prefix], abs=1e-3), (
                        tag, run, prefix,
                    )  # fmt: skip
                wall = series["span.wall_s"].values[run]
                assert wall == pytest.approx(truth["wall"], abs=0.01), (tag, run)
                task_time = series["span.duration_s"].values[run]
                assert task_time == pytest.approx(sum(truth["seconds"].values()), abs=1e-3)
        names = recurring_names(store, min_runs=8)
    assert {"etl", "steady"} <= set(names["span"])


def test_a_doubled_prefix_is_caught_while_wall_time_wobbles(service: dict[str, Any]) -> None:
    with open_store(service["url"]) as store:
        etl = history_view(store, "span", "etl")
        steady = history_view(store, "span", "steady")
    truth = service["truth"]
    # the wall time wobbled (+20 % in each of the last three runs): within the noise
    assert "span.wall_s" not in etl.regressed and "span.wall_s" not in steady.regressed
    assert "prefix.duration_s:extract" not in etl.regressed
    # the doubled prefix is, with the numbers of its check
    assert "prefix.duration_s:transform" in etl.regressed, etl.regressed
    hot = next(s for s in etl.series if s.id == "prefix.duration_s:transform")
    assert hot.prefix == "transform" and hot.flagged == list(range(RUNS - DOUBLED, RUNS))
    check = hot.check
    assert check is not None and check.status == "regressed"
    before = [truth["etl", run]["seconds"]["transform"] for run in range(RUNS - DOUBLED)]
    assert check.median == pytest.approx(sorted(before)[len(before) // 2], abs=1e-3)
    assert check.threshold is not None and check.threshold < min(check.recent)
    assert all(v >= 0.99 * 2 * 2 * HOT for v in check.recent)  # two sleeps of 2 * HOT
    # identical reruns: nothing flagged
    assert steady.regressed == [], [(s.id, s.texts) for s in steady.series if s.flagged]


def test_the_ci_gate(service: dict[str, Any]) -> None:
    url = service["url"]
    failed = CliRunner().invoke(cli, ["--database", url, "regressions", "--name", "etl"])
    assert failed.exit_code == 1, failed.output
    assert "etl" in failed.output and "task time of transform" in failed.output
    passed = CliRunner().invoke(cli, ["--database", url, "regressions", "--name", "steady"])
    assert passed.exit_code == 0, passed.output
    assert "no regressions (1 recurring things checked)" in passed.output
    both = CliRunner().invoke(cli, ["--database", url, "regressions", "--json"])
    assert both.exit_code == 1
    found = json.loads(both.output)["regressions"]
    assert {r["name"] for r in found} == {"etl"}
    assert {r["prefix"] for r in found if r["prefix"]} == {"transform"}
    with open_store(url) as store:
        assert regressions_view(store).checked == 2
