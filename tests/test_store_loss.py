"""A store that goes away is noticed: a deleted or replaced SQLite file, a store that
cannot be written, and a ``-shm`` file that would kill the process mapping it (SIGBUS)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from daskscope.collector.sink import StoreLost
from daskscope.collector.store_sink import StoreSink
from daskscope.model import ClusterRecord, EventRecord, stable_id
from daskscope.store import (
    WriteFailed,
    cluster_detail,
    list_clusters,
    open_store,
    table_counts,
)

T0 = 1_767_225_600.5
needs_chattr = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("chattr") is None, reason="needs root and chattr"
)


def cluster(cid: str = "c") -> ClusterRecord:
    return ClusterRecord(
        id=cid, name="n", account="a", user="u", scheduler_address="tcp://x:1",
        dask_version="x", distributed_version="x", python_version="x",
        started_at=T0, last_seen_at=T0,
    )  # fmt: skip


def events(n: int, start: int = 0, cid: str = "c") -> list[EventRecord]:
    return [
        EventRecord(id=stable_id(cid, "e", i), cluster_id=cid, at=T0 + i, kind="x")
        for i in range(start, start + n)
    ]


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[StoreSink]:
    opened = StoreSink(f"sqlite:///{tmp_path / 'store.db'}")
    opened.open()
    yield opened
    opened.close()


def counts(path: Path) -> dict[str, int]:
    with open_store(f"sqlite:///{path}") as store:
        return table_counts(store)


def test_a_sqlite_store_is_written_by_a_child_process(sink: StoreSink, tmp_path: Path) -> None:
    sink.write([cluster(), *events(5)])
    assert sink._process is not None and sink._process.pid != os.getpid()
    assert counts(tmp_path / "store.db")["events"] == 5


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_store_file_that_goes_away_is_noticed_and_made_again(
    sink: StoreSink, tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "store.db"
    sink.write([cluster(), *events(5)])
    if how == "deleted":
        path.unlink()
    else:  # e.g. a backup copied back over it
        other = tmp_path / "other.db"
        open_store(f"sqlite:///{other}").close()
        other.replace(path)
    with caplog.at_level(logging.WARNING, logger="daskscope"), pytest.raises(StoreLost) as info:
        sink.write(events(3, start=5))
    assert str(path) in str(info.value) and how in str(info.value)
    assert str(path) in caplog.text and how in caplog.text
    # a daskscope store is there again; the collector now writes everything again
    assert counts(path)["events"] in (0, 5)  # a replaced file may have got the old WAL
    sink.write([cluster(), *events(8)])
    assert counts(path)["events"] == 8
    assert counts(path)["clusters"] == 1


def test_a_store_that_cannot_be_written_fails_loudly_until_it_can(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the store's directory should be")
    path = blocker / "store.db"
    sink = StoreSink(f"sqlite:///{path}")
    sink.open()
    with caplog.at_level(logging.WARNING, logger="daskscope"):
        for _ in range(3):
            with pytest.raises(Exception, match="data"):
                sink.write([cluster(), *events(2)])
        assert caplog.text.count("cannot write to") == 1  # said once, not at every flush
        blocker.unlink()
        sink.write([cluster(), *events(2)])
        assert "writes to" in caplog.text and "again" in caplog.text
    assert counts(path)["events"] == 2
    sink.close()


# -- SIGBUS: SQLite's -shm file made unwritable while mapped --------------------------------

REPRODUCE = """
import os, subprocess, sys
from daskscope.model import EventRecord
from daskscope.store import open_store, write_records
path = sys.argv[1]
store = open_store("sqlite:///" + path)
event = lambda i: EventRecord(id=str(i), cluster_id="c", at=1.0 + i, kind="x")
write_records(store, [event(0)])
subprocess.run(["chattr", "+i", path + "-shm"], check=True)
write_records(store, [event(1)])
print("survived")
"""


@needs_chattr
def test_sqlite_in_process_dies_of_sigbus_when_its_shm_becomes_immutable(
    tmp_path: Path,
) -> None:
    """The mechanism, reproduced: why the recorder does not write SQLite in-process."""
    path = tmp_path / "store.db"
    try:
        done = subprocess.run(
            [sys.executable, "-c", REPRODUCE, str(path)], capture_output=True, text=True
        )
    finally:
        subprocess.run(["chattr", "-i", f"{path}-shm"], check=False)
    assert done.returncode == -signal.SIGBUS, done.stderr[-2000:]
    assert "survived" not in done.stdout


RECORDED_RUN = """
import asyncio, json, os, subprocess, sys
from distributed import Client, LocalCluster
import daskscope

def inc(x):
    return x + 1

async def main(path, how):
    shm = path + "-shm"
    async with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                            asynchronous=True, dashboard_address=":0") as cluster, \\
               Client(cluster, asynchronous=True) as client:
        await daskscope.register(client, database="sqlite:///" + path)
        await client.gather(client.map(inc, range(10)))
        first = await daskscope.flush(client)
        if how == "immutable":
            subprocess.run(["chattr", "+i", shm], check=True)
        else:
            os.truncate(shm, 0)
        await client.gather(client.map(inc, range(100, 130)))
        broken = await daskscope.flush(client)
        subprocess.run(["chattr", "-i", shm], check=True)
        await client.gather(client.map(inc, range(200, 205)))
        mended = await daskscope.flush(client)
        executed = sum(
            tp.state_counts["memory"] + tp.state_counts["released"]
            for tp in cluster.scheduler.task_prefixes.values()
        )
        print(json.dumps({"first": first, "broken": broken, "mended": mended,
                          "executed": executed}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@needs_chattr
@pytest.mark.parametrize("how", ["immutable", "truncated"])
def test_a_broken_shm_file_never_takes_the_scheduler_down(tmp_path: Path, how: str) -> None:
    import json

    path = tmp_path / "store.db"
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(RECORDED_RUN), str(path), how],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        subprocess.run(["chattr", "-i", f"{path}-shm"], check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["first"]["write_failures"] == 0
    if how == "immutable":  # a truncated -shm may be rebuilt by SQLite before any fault
        assert report["broken"]["write_failures"] >= 1
        assert "SIGBUS" in done.stderr or "readonly" in done.stderr
    assert report["mended"]["last_write_error"] is None
    with open_store(f"sqlite:///{path}") as store:
        (stored,) = [
            c["tasks_executed"] for c in __import__("daskscope").store.list_clusters(store)
        ]
    assert stored == report["executed"] == 45


def test_write_failed_is_what_a_dead_writer_raises(tmp_path: Path) -> None:
    sink = StoreSink(f"sqlite:///{tmp_path / 'store.db'}")
    sink.write([cluster()])
    os.kill(sink._process.pid, signal.SIGKILL)
    with pytest.raises(WriteFailed, match="signal 9"):
        sink.write([cluster()])
    sink.write([cluster(), *events(1)])  # a new writer
    assert counts(tmp_path / "store.db")["events"] == 1
    sink.close()


def test_a_store_deleted_mid_run_ends_up_holding_the_whole_cluster(tmp_path: Path) -> None:
    import asyncio

    from distributed import Client, LocalCluster

    import daskscope

    path = tmp_path / "store.db"

    def inc(x: int) -> int:
        return x + 1

    async def body() -> tuple[str, dict, int]:
        async with (
            LocalCluster(
                n_workers=1, threads_per_worker=2, processes=False, asynchronous=True,
                dashboard_address=":0",
            ) as cluster,
            Client(cluster, asynchronous=True) as client,
        ):  # fmt: skip
            cid = await daskscope.register(client, database=f"sqlite:///{path}")
            futures = client.map(inc, range(20))  # kept: their groups stay live
            await client.gather(futures)
            await daskscope.flush(client)
            path.unlink()
            more = client.map(inc, range(100, 130))
            await client.gather(more)
            lost = await daskscope.flush(client)  # notices, re-creates, asks for all again
            status = await daskscope.flush(client)
            executed = sum(
                tp.state_counts["memory"] for tp in cluster.scheduler.task_prefixes.values()
            )
            # noticed once: by this flush (which says so) or by a periodic one just before
            assert lost["write_failures"] == 1
            assert lost["last_write_error"] is None or "deleted" in lost["last_write_error"]
            return cid, status, executed

    cid, status, executed = asyncio.run(body())
    assert status["last_write_error"] is None
    with open_store(f"sqlite:///{path}") as store:
        (stored,) = list_clusters(store)
        events = {e["kind"] for e in cluster_detail(store, cid)["events"]}
    assert stored["id"] == cid
    assert stored["tasks_executed"] == executed == 50
    assert "cluster-started" in events


#: a scheduler in a fresh interpreter (LocalCluster's scheduler runs in the calling
#: process, and here its worker too) recording into a SQLite file: which modules that
#: process imported
_LIGHT_SCHEDULER = """
import json, sys
from distributed import Client, LocalCluster
import daskscope

def inc(x):
    return x + 1

if __name__ == "__main__":
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        daskscope.register(client, database=sys.argv[1])
        futures = client.map(inc, range(25))
        assert client.gather(futures) == list(range(1, 26))
        status = daskscope.flush(client)
        executed = sum(tp.state_counts["memory"] for tp in cluster.scheduler.task_prefixes.values())
        print(json.dumps({
            "error": status["last_write_error"], "executed": executed,
            "imported": sorted(m for m in sys.modules if m.split(".")[0] == "sqlalchemy"
                               or m.startswith("daskscope.store.")),
        }))
"""


def test_a_scheduler_writing_a_sqlite_file_never_imports_sqlalchemy(tmp_path: Path) -> None:
    """The child parses the URL and writes the file: the scheduler's process holds no
    SQLAlchemy and no store module (their objects would be walked by every full garbage
    collection of the scheduler's heap), and every task still arrives."""
    script = tmp_path / "scheduler.py"
    script.write_text(_LIGHT_SCHEDULER)
    path = tmp_path / "store.db"
    done = subprocess.run(
        [sys.executable, str(script), f"sqlite:///{path}"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["error"] is None
    assert report["imported"] == ["daskscope.store.errors"]
    with open_store(f"sqlite:///{path}") as store:
        (stored,) = list_clusters(store)
    assert stored["tasks_executed"] == report["executed"] == 25


def test_the_child_resolves_a_relative_file_and_leaves_memory_to_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    relative = StoreSink("sqlite:///relative.db")
    relative.write([cluster(), *events(2)])
    assert relative._process is not None and relative._path == Path("relative.db")
    assert counts(tmp_path / "relative.db")["events"] == 2
    (tmp_path / "relative.db").unlink()  # noticed through the path the child opened
    with pytest.raises(StoreLost, match="deleted"):
        relative.write([cluster()])
    relative.close()

    memory = StoreSink("sqlite://")
    memory.write([cluster(), *events(3)])
    assert memory._process is None and memory._store is not None
    assert table_counts(memory._store)["events"] == 3
    memory.close()


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("sqlite+aiosqlite:///x.db", "unsupported SQLite driver"),
        ("sqlite:///a-file/x.db", "a-file"),  # its directory is a file
    ],
)
def test_a_sqlite_url_the_child_refuses_says_why_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, said: str
) -> None:
    from daskscope.store import BadDatabaseURL, StoreError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a directory")
    sink = StoreSink(url)
    expected = BadDatabaseURL if "driver" in said else StoreError
    with pytest.raises(expected, match=said):
        sink.write([cluster()])
    assert sink._process is None and sink._store is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    sink.close()
