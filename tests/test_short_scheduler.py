"""A scheduler that lives less than a second is recorded (issue 25, point 4).

distributed's own ``test_lifecycle`` starts a scheduler and closes it at once; with the
preload in dask's config, each such scheduler is a cluster the preload attached to. The
ground truth is the scheduler itself: its id, when it started, and that it closed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dask
import pytest
import sqlalchemy as sa
from distributed import Scheduler

from daskscope.store import Store
from daskscope.store import schema as s


def recorded(store: Store, cluster_id: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The cluster's row (None when there is none) and its events' kinds."""
    with store.engine.connect() as conn:
        row = conn.execute(sa.select(s.clusters).where(s.clusters.c.id == cluster_id)).first()
        kinds = conn.execute(
            sa.select(s.events.c.kind).where(s.events.c.cluster_id == cluster_id)
        ).scalars()
        return (dict(row._mapping) if row else None), sorted(kinds)


async def start_and_close(database_url: str, *, at_once: bool) -> Any:
    """A scheduler with the preload, closed as soon as it has started (``at_once``: in
    the same step of the event loop, before anything else of it ran)."""
    config = {"distributed.scheduler.preload": ["daskscope"], "daskscope.database": database_url}
    with dask.config.set(config):
        scheduler = Scheduler(dashboard_address=":0", port=0)
        if at_once:
            await scheduler
            await scheduler.close()
        else:
            async with scheduler:
                await asyncio.sleep(0)
    return scheduler


@pytest.mark.parametrize("at_once", [True, False])
def test_a_scheduler_closed_as_it_starts_is_recorded(
    store: Store, database_url: str, at_once: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        scheduler = asyncio.run(start_and_close(database_url, at_once=at_once))
    recorder = scheduler.plugins["daskscope"]
    info = recorder.handle_info()
    assert info["hook_failures"] == {} and info["write_failures"] == 0
    row, kinds = recorded(store, recorder.cluster_id)
    assert row is not None, "no cluster row"
    assert row["name"] == scheduler.id
    assert abs(row["started_at"] - scheduler.time_started) < 1e-6
    assert row["stopped_at"] is not None and row["stopped_at"] >= row["started_at"]
    assert kinds == ["cluster-closed", "cluster-started"]
    # nothing of the recorder outlived the scheduler, or failed unseen
    problems = [r for r in caplog.records if r.name in ("daskscope", "asyncio")]
    assert problems == []


def test_a_dask_scheduler_stopped_right_after_start_is_recorded(
    store: Store, database_url: str, tmp_path: Path
) -> None:
    """``dask scheduler --preload daskscope`` stopped with Ctrl-C as soon as the preload
    has attached."""
    log = tmp_path / "scheduler.log"
    command = [os.path.join(os.path.dirname(sys.executable), "dask"), "scheduler"]
    command += ["--preload", "daskscope", "--port", "0", "--dashboard-address", ":0"]
    env = {**os.environ, "DASK_DASKSCOPE__DATABASE": database_url}
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "Run preload setup: daskscope" not in log.read_text():
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = log.read_text()
    assert "daskscope" not in text.split("Run preload setup: daskscope", 1)[1].replace(
        "Stopped scheduler", ""
    ), text[-3000:]  # the recorder said nothing after attaching: no error, no warning
    with store.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sa.select(s.clusters))]
    (row,) = rows
    address = text.split("Scheduler at:", 1)[1].split()[0]
    assert row["scheduler_address"] == address
    assert row["stopped_at"] is not None and row["stopped_at"] >= row["started_at"]
    _, kinds = recorded(store, row["id"])
    assert kinds == ["cluster-closed", "cluster-started"]
