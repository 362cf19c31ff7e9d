"""Attached means recording, whatever happened to dask's config.

distributed's test harness (``gen_cluster``) starts every test from a snapshot of dask's
config taken when ``distributed.utils_test`` was imported. In a user's test suite that
import often comes before daskscope's, so the snapshot has no daskscope settings: each
test's cluster starts with a config in which only what the test sets is left.
"""

from __future__ import annotations

import atexit
import copy
import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pytest
from distributed import Client, Scheduler, utils_test
from distributed.utils_test import gen_cluster

import daskscope
from daskscope.store import cluster_detail, list_clusters, open_store

# gen_cluster's config is fixed when the test is defined: the stores live here, for the
# whole session (the tests may run in any order, others' between them)
_DIR = Path(tempfile.mkdtemp(prefix="daskscope-config-reset-"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)
FIRST_URL = f"sqlite:///{_DIR / 'first.db'}"
SECOND_URL = f"sqlite:///{_DIR / 'second.db'}"
PRELOAD = {"distributed.scheduler.preload": ["daskscope"]}
recorded: dict[str, tuple[str, int]] = {}  # store URL -> (cluster id, keys submitted)
pytestmark = pytest.mark.own_dask_config  # restored by the module's fixture below


@pytest.fixture(scope="module", autouse=True)
def harness_snapshot_without_daskscope() -> Iterator[None]:
    """The harness's snapshot as it is when distributed.utils_test was imported first."""
    saved = utils_test.original_config
    live = copy.deepcopy(dask.config.config)
    utils_test.original_config = {k: v for k, v in saved.items() if k != "daskscope"}
    yield
    utils_test.original_config = saved
    dask.config.config.clear()
    dask.config.config.update(live)


def inc(x: int) -> int:
    return x + 1


async def run_and_read(client: Client, scheduler: Scheduler, url: str, n: int) -> None:
    # The precondition: the settings registered at import are gone from the live config.
    assert dask.config.get("daskscope") == {"database": url}
    assert "daskscope" in scheduler.plugins, "the preload attached no recorder"
    futures = client.map(inc, range(n))
    assert await client.gather(futures) == [i + 1 for i in range(n)]
    status = await daskscope.flush(client)
    cluster_id = status["cluster_id"]
    detail = cluster_detail(open_store(url), cluster_id)
    # Ground truth: the keys this test submitted, as the scheduler counted them.
    executed = sum(
        tg.states["memory"] + tg.states["released"] + tg.states["forgotten"]
        for tg in scheduler.task_groups.values()
    )
    assert detail["cluster"]["tasks_executed"] == n == executed
    recorded[url] = (cluster_id, n)


@gen_cluster(client=True, config={**PRELOAD, "daskscope.database": FIRST_URL})
async def test_first_cluster_after_a_reset_is_recorded(
    c: Client, s: Scheduler, a: Any, b: Any
) -> None:
    await run_and_read(c, s, FIRST_URL, 7)


@gen_cluster(client=True, config={**PRELOAD, "daskscope.database": SECOND_URL})
async def test_second_cluster_after_a_reset_is_recorded(
    c: Client, s: Scheduler, a: Any, b: Any
) -> None:
    await run_and_read(c, s, SECOND_URL, 11)


def test_both_clusters_are_in_their_own_stores() -> None:
    # in any order: a cluster whose test has not run yet is recorded (and closed) here
    if FIRST_URL not in recorded:
        test_first_cluster_after_a_reset_is_recorded()
    if SECOND_URL not in recorded:
        test_second_cluster_after_a_reset_is_recorded()
    assert set(recorded) == {FIRST_URL, SECOND_URL}
    for url, (cluster_id, n) in recorded.items():
        rows = list_clusters(open_store(url))
        assert [r["id"] for r in rows] == [cluster_id]
        assert rows[0]["tasks_executed"] == n
        assert rows[0]["stopped_at"] is not None  # closed with its cluster


@gen_cluster(
    client=True,
    config={**PRELOAD, "daskscope.database": FIRST_URL, "daskscope.flush-interval": "0s"},
)
async def test_a_preload_that_cannot_attach_says_so(
    c: Client, s: Scheduler, a: Any, b: Any, caplog: pytest.LogCaptureFixture
) -> None:
    assert "daskscope" not in s.plugins
    errors = [r for r in caplog.records if r.name == "daskscope" and r.levelno == logging.ERROR]
    assert len(errors) == 1
    message = errors[0].getMessage()
    assert "NOT being recorded" in message and "flush_interval must be positive" in message
    assert "daskscope.register(client)" in message
    events = await c.get_events("daskscope")
    assert [e["action"] for _, e in events] == ["attach-failed"]
    assert "flush_interval must be positive" in events[0][1]["error"]
