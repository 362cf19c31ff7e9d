"""The Perfetto protobuf export, checked with Perfetto's own generated trace messages.

Perfetto's trace processor (the reference parser) needs a ``trace_processor_shell``
binary that the ``perfetto`` package downloads from Google's storage on first use, which
this machine cannot reach; so :func:`checked_trace` parses the file back with the
package's generated classes and checks every packet as the trace processor reads them:
one sequence whose interned strings are defined before use, track descriptors with unique
uuids whose parents exist, begin/end pairs on known tracks that close in order, and
timestamps that never go back. Then the slices are compared with Dask's task stream of
the same run."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster, get_task_stream, span, wait
from distributed.utils import key_split
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TracePacket, TrackEvent

import daskscope
from daskscope.cli.main import cli
from daskscope.export.perfetto_proto import SEQUENCE, perfetto_proto_chunks
from daskscope.store import cluster_detail, open_store, write_records
from daskscope.tasklog import segments
from daskscope.views.export import NothingRecorded
from daskscope.web.app import create_app
from factories import make_cluster
from webutil import call

# -- the reference check --------------------------------------------------------------------


@dataclass
class Slice:
    track: str
    #: the worker of the track's process ("worker " left off)
    worker: str
    name: str
    categories: tuple[str, ...]
    begin_ns: int
    end_ns: int
    args: dict[str, Any]


@dataclass
class Parsed:
    slices: list[Slice] = field(default_factory=list)
    #: uuid -> (name, parent uuid)
    tracks: dict[int, tuple[str, int | None]] = field(default_factory=dict)


def checked_trace(data: bytes) -> Parsed:
    trace = Trace.FromString(data)
    packets = list(trace.packet)
    assert packets, "no packet"
    assert packets[0].sequence_flags & TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    interned: dict[str, dict[int, str]] = {
        k: {}
        for k in (
            "event_names",
            "event_categories",
            "debug_annotation_names",
            "debug_annotation_string_values",
        )
    }
    parsed = Parsed()
    worker_of: dict[int, str] = {}  # process track uuid -> worker
    pid_of: dict[int, int] = {}
    open_slices: dict[int, list[Slice]] = {}
    last_ts = -1
    for packet in packets:
        assert packet.trusted_packet_sequence_id == SEQUENCE
        for kind, known in interned.items():
            for entry in getattr(packet.interned_data, kind):
                text = entry.str.decode() if kind.endswith("string_values") else entry.name
                assert entry.iid > 0 and known.get(entry.iid, text) == text, (kind, entry)
                known[entry.iid] = text
        if packet.HasField("track_descriptor"):
            track = packet.track_descriptor
            assert track.uuid and track.uuid not in parsed.tracks, "uuid given twice"
            parent = track.parent_uuid if track.HasField("parent_uuid") else None
            if track.HasField("process"):
                assert parent is None
                assert track.process.process_name.startswith("worker ")
                assert track.process.pid not in pid_of.values()
                worker_of[track.uuid] = track.process.process_name.removeprefix("worker ")
                pid_of[track.uuid] = track.process.pid
                name = track.process.process_name
            else:
                assert parent in worker_of, "a track's parent is a worker's process track"
                worker_of[track.uuid] = worker_of[parent]
                if track.HasField("thread"):
                    assert track.thread.pid == pid_of[parent]
                    name = track.thread.thread_name
                else:
                    name = track.name
                assert name
            parsed.tracks[track.uuid] = (name, parent)
            continue
        if not packet.HasField("track_event"):
            continue
        assert packet.HasField("timestamp") and packet.timestamp >= last_ts, "time went back"
        assert packet.sequence_flags & TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        last_ts = packet.timestamp
        event = packet.track_event
        assert event.track_uuid in parsed.tracks, "an event on a track not described before"
        stack = open_slices.setdefault(event.track_uuid, [])
        if event.type == TrackEvent.TYPE_SLICE_END:
            assert stack, "an end without a begin on its track"
            done = stack.pop()
            done.end_ns = packet.timestamp
            parsed.slices.append(done)
            continue
        assert event.type == TrackEvent.TYPE_SLICE_BEGIN
        args: dict[str, Any] = {}
        for note in event.debug_annotations:
            key = interned["debug_annotation_names"][note.name_iid]
            which = note.WhichOneof("value")
            if which == "string_value_iid":
                args[key] = interned["debug_annotation_string_values"][note.string_value_iid]
            else:
                args[key] = getattr(note, which)
        stack.append(
            Slice(
                track=parsed.tracks[event.track_uuid][0],
                worker=worker_of[event.track_uuid],
                name=interned["event_names"][event.name_iid],
                categories=tuple(interned["event_categories"][i] for i in event.category_iids),
                begin_ns=packet.timestamp,
                end_ns=-1,
                args=args,
            )
        )
    assert not any(open_slices.values()), "slices never ended"
    return parsed


# -- a real run -----------------------------------------------------------------------------


@dataclass
class Recorded:
    url: str
    cluster_id: str
    stream: list[dict[str, Any]]
    std_keys: set[str]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """Two workers of two threads, some hundreds of tasks with transfers between them,
    in a span; Dask's task stream kept as ground truth."""
    url = f"sqlite:///{tmp_path_factory.mktemp('proto') / 'store.db'}"
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        with (
            get_task_stream(client) as stream,
            dask.config.set({"optimization.fuse.active": False}),
        ):
            with span("load"):
                x = da.random.random((1200, 1200), chunks=100).persist()
                wait(x)
            assert (x + 1).sum().compute() > 0
            with get_task_stream(client) as std_stream:
                assert x.std().compute() > 0
        assert daskscope.flush(client)["write_failures"] == 0
    yield Recorded(url, cluster_id, stream.data, {str(t["key"]) for t in std_stream.data})


def proto(recorded: Recorded, **kwargs: Any) -> bytes:
    return b"".join(perfetto_proto_chunks(open_store(recorded.url), recorded.cluster_id, **kwargs))


def compute_of(task: dict[str, Any]) -> dict[str, Any]:
    return next(ss for ss in task["startstops"] if ss["action"] == "compute")


def test_every_task_of_the_task_stream_where_and_when_dask_says(recorded: Recorded) -> None:
    parsed = checked_trace(proto(recorded))
    computes = [s for s in parsed.slices if s.categories[0] == "compute"]
    assert Counter(s.worker for s in computes) == Counter(t["worker"] for t in recorded.stream)
    truth = {str(t["key"]): t for t in recorded.stream}
    assert sorted(s.args["key"] for s in computes) == sorted(truth)
    for s in computes:
        task = truth[s.args["key"]]
        compute = compute_of(task)
        assert s.begin_ns / 1e9 == pytest.approx(compute["start"], abs=1e-6)
        assert (s.end_ns - s.begin_ns) / 1e9 == pytest.approx(
            compute["stop"] - compute["start"], abs=1e-6
        )
        assert s.args["bytes"] == task["nbytes"]
        assert s.args["state"] == "memory"
        assert s.name == key_split(task["key"])
        assert s.track.startswith("thread ")
    # the load's tasks carry their span, the others the default one; each its computation
    assert len({s.args["span"] for s in computes}) >= 2
    assert all(s.args["computation"] for s in computes)
    # transfers: slices on the receiving worker's "transfer" track, naming the sender
    transfers = [s for s in parsed.slices if s.categories == ("transfer",)]
    truth_transfers = [
        (t["worker"], ss["source"])
        for t in recorded.stream
        for ss in t["startstops"]
        if ss["action"] == "transfer"
    ]
    assert truth_transfers, "the run moved no data between workers"
    assert Counter((s.worker, s.args["source"]) for s in transfers) == Counter(truth_transfers)
    assert {s.track.split(" ")[0] for s in transfers} == {"transfer"}
    # one process track per worker, one thread track per thread Dask ran a task on
    processes = {name for name, parent in parsed.tracks.values() if parent is None}
    assert processes == {f"worker {w}" for w in {t["worker"] for t in recorded.stream}}
    threads = {(s.worker, s.track) for s in computes if "overlapping" not in s.track}
    assert len(threads) <= 4


def test_window_and_computation(recorded: Recorded) -> None:
    spans = sorted(
        (min(s["start"] for s in t["startstops"]), max(s["stop"] for s in t["startstops"]))
        for t in recorded.stream
    )
    a = spans[len(spans) // 3][0] + 1e-4
    b = spans[2 * len(spans) // 3][0] + 1e-4
    parsed = checked_trace(proto(recorded, start=a, stop=b, page_tasks=50))
    overlapping = [s for s in spans if s[1] > a and s[0] < b]
    computes = [s for s in parsed.slices if s.categories[0] == "compute"]
    assert len(computes) == len(overlapping) > 0

    store = open_store(recorded.url)
    computations = cluster_detail(store, recorded.cluster_id)["computations"]
    chosen = {
        c["id"]
        for c in computations
        if proto_keys(recorded, c["id"]) == recorded.std_keys  # the one of x.std()
    }
    assert len(chosen) == 1


def proto_keys(recorded: Recorded, computation: str) -> set[str]:
    try:
        data = proto(recorded, computation=computation)
    except NothingRecorded:
        return set()
    return {s.args["key"] for s in checked_trace(data).slices if s.categories[0] == "compute"}


def test_paged_the_same_file_and_smaller_than_the_json(recorded: Recorded) -> None:
    from daskscope.export.perfetto import perfetto_chunks

    chunks = list(
        perfetto_proto_chunks(open_store(recorded.url), recorded.cluster_id, page_tasks=40)
    )
    assert len(chunks) >= len(recorded.stream) / 40
    assert b"".join(chunks) == proto(recorded)
    text = "".join(perfetto_chunks(open_store(recorded.url), recorded.cluster_id))
    assert len(b"".join(chunks)) < len(text.encode()) / 2


def test_cli_file_equals_the_download(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(recorded.url)
    cid = recorded.cluster_id
    answer = call(app, "GET", f"/api/v1/clusters/{cid}/export/perfetto?format=proto")
    assert answer.status_code == 200
    name = f"daskscope-{cid}-timeline.pftrace"
    assert answer.headers["content-disposition"] == f'attachment; filename="{name}"'
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        cli, ["--database", recorded.url, "export", "perfetto", cid, "--format", "proto"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / name).read_bytes() == answer.content
    checked_trace(answer.content)
    wrong = call(app, "GET", f"/api/v1/clusters/{cid}/export/perfetto?format=protobuf")
    assert wrong.status_code in (400, 422)
    refused = CliRunner().invoke(
        cli, ["--database", recorded.url, "export", "perfetto", cid, "--format", "pb"]
    )
    assert refused.exit_code == 2 and "'json', 'proto'" in refused.output


def test_perfetto_proto_from_postgresql(recorded: Recorded, database_url: str) -> None:
    import sqlalchemy as sa

    from daskscope.store import schema as s
    from daskscope.store import write_rows

    source = open_store(recorded.url)
    with source.engine.connect() as conn:
        rows = {
            table: [dict(r._mapping) for r in conn.execute(sa.select(table))]
            for table in (s.clusters, s.computations, s.task_segments)
        }
    copy = open_store(database_url)
    try:
        write_rows(copy, rows)
        data = b"".join(perfetto_proto_chunks(copy, recorded.cluster_id, page_tasks=300))
        assert data == proto(recorded)
    finally:
        copy.close()


# -- tracks of crossing, nested and zero-length slices (a store made by hand) -------------


def hand_made_store(tmp_path: Path, executions: list[tuple[Any, ...]]) -> tuple[str, str]:
    cluster = make_cluster()
    url = f"sqlite:///{tmp_path / 'hand.db'}"
    records = segments.encode_segment(cluster.id, 0, executions)
    write_records(open_store(url), [cluster, *records])
    return url, cluster.id


def test_crossing_computes_go_to_an_overlapping_track(tmp_path: Path) -> None:
    t0 = make_cluster().started_at + 10

    def compute(key: str, start: float, stop: float, **extra: Any) -> tuple[Any, ...]:
        startstops = [{"action": "compute", "start": t0 + start, "stop": t0 + stop}]
        startstops += extra.get("more", [])
        return segments.execution(
            key, "g", "g", "tcp://w:1", 7, startstops, erred=extra.get("erred", False),
            nbytes=8, computation=None, span=None,
        )  # fmt: skip

    transfer = [{"action": "transfer", "start": t0 + 0.1, "stop": t0 + 0.9, "source": "tcp://v:2"}]
    url, cid = hand_made_store(
        tmp_path,
        [
            compute("a", 0.0, 2.0),
            compute("inside-a", 0.5, 1.0),
            compute("crossing-a", 1.5, 3.0),
            compute("after-a", 2.0, 2.5),
            compute("empty", 2.5, 2.5),
            compute("failed", 3.5, 4.0, erred=True, more=transfer),
            compute("other", 3.6, 3.7, more=[{**transfer[0], "start": t0 + 0.5, "stop": t0 + 1.2}]),
        ],
    )
    parsed = checked_trace(b"".join(perfetto_proto_chunks(open_store(url), cid)))
    tracks = {s.args["key"]: s.track for s in parsed.slices if s.categories[0] == "compute"}
    assert tracks == {
        "a": "thread 7",
        "inside-a": "thread 7",
        "crossing-a": "thread 7 · overlapping 1",
        "after-a": "thread 7",
        "empty": "thread 7",
        "failed": "thread 7",
        "other": "thread 7",
    }
    by_key = {s.args["key"]: s for s in parsed.slices if s.categories[0] == "compute"}
    assert by_key["empty"].begin_ns == by_key["empty"].end_ns
    assert by_key["failed"].categories == ("compute", "erred")
    assert by_key["failed"].args["state"] == "erred" and "bytes" not in by_key["failed"].args
    # the second transfer crosses the first: a track of its own
    transfers = sorted((s.begin_ns, s.track) for s in parsed.slices if "transfer" in s.categories)
    assert [track for _, track in transfers] == ["transfer", "transfer 2"]


def test_nothing_recorded_says_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    cluster = make_cluster()
    write_records(open_store(url), [cluster])
    result = CliRunner().invoke(
        cli, ["--database", url, "export", "perfetto", cluster.id, "--format", "proto"]
    )
    assert result.exit_code == 2 and "no task recorded" in result.output


def test_segments_that_overlap_in_time_come_out_in_time_order(tmp_path: Path) -> None:
    """Two flushes' segments whose executions interleave (as a slow task's report lands
    in a later flush): the packets still go forward in time, every execution once."""
    from daskscope.export.perfetto import perfetto_chunks
    from daskscope.tasklog.scan import ordered_rows, scan_segments

    cluster = make_cluster()
    t0 = cluster.started_at + 10

    def run(i: int, thread: int) -> tuple[Any, ...]:
        start = t0 + i * 0.5
        startstops = [{"action": "compute", "start": start, "stop": start + 0.4}]
        return segments.execution(
            ("g", i), "g", "g", "tcp://w:1", thread, startstops, erred=False,
            nbytes=i, computation=None, span=None,
        )  # fmt: skip

    evens = segments.encode_segment(cluster.id, 0, [run(i, 1) for i in range(0, 40, 2)])
    odds = segments.encode_segment(cluster.id, 1, [run(i, 2) for i in range(1, 40, 2)])
    url = f"sqlite:///{tmp_path / 'overlap.db'}"
    write_records(open_store(url), [cluster, *evens, *odds])
    store = open_store(url)
    batches = list(ordered_rows(scan_segments(store, cluster.id)))
    firsts = [
        float(b.segments[s].first[r])
        for b in batches
        for s, r in zip(b.segment, b.rows, strict=True)
    ]
    assert firsts == sorted(firsts) and len(firsts) == 40
    parsed = checked_trace(b"".join(perfetto_proto_chunks(store, cluster.id, page_tasks=3)))
    assert sorted(s.args["bytes"] for s in parsed.slices) == list(range(40))
    assert {s.track for s in parsed.slices} == {"thread 1", "thread 2"}
    text = "".join(perfetto_chunks(store, cluster.id, page_tasks=3))
    assert text.count('"ph":"X"') == 40
