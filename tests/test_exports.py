"""Exports of a real recorded cluster, each parsed back and checked against Dask's own
view of the same run: the task stream (Perfetto), the spans extension (OTLP), the
workers' profile (speedscope); and the CLI's files equal the dashboard's downloads."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster, get_task_stream, span, wait
from distributed.metrics import time as dask_time
from distributed.utils import key_split
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

import daskscope
from browser import needs_chromium, new_page, screenshot
from daskscope.cli.main import cli
from daskscope.export.common import call_line
from daskscope.export.otlp import (
    otlp_json,
    otlp_request,
    request_from_json,
    span_id_of,
    trace_id_of,
)
from daskscope.export.perfetto import perfetto_chunks
from daskscope.export.perfetto_proto import perfetto_proto_chunks
from daskscope.export.speedscope import (
    SCHEMA_URL,
    NamedTree,
    profile_interval,
    speedscope_document,
    speedscope_file,
)
from daskscope.store import cluster_detail, open_store, profile_trees, write_records
from daskscope.web.app import create_app
from factories import make_cluster
from webutil import call, serving


def spin(i: int) -> int:
    # Spin (not sleep) so that the statistical profile sees this function's frame.
    end = time.perf_counter() + 0.25
    n = 0
    while time.perf_counter() < end:
        n += 1
    return i + n * 0


@dataclass
class Recorded:
    url: str
    cluster_id: str
    stream: list[dict[str, Any]]
    #: span id -> (name, parent's span id) as the spans extension shows them
    spans: dict[str, tuple[tuple[str, ...], str | None]]
    #: (function, file) of every frame in Dask's own profile of the run
    profile_frames: set[tuple[str, str]]
    computations: int
    #: keys of the tasks x.std() ran (its own task stream)
    std_keys: set[str]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Two workers, a few thousand tasks in nested spans, spinning tasks the profiler
    samples; Dask's task stream and spans kept as ground truth."""
    url = f"sqlite:///{tmp_path_factory.mktemp('exports') / 'store.db'}"
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
        attached = dask_time()
        cluster_id = daskscope.register(
            client, database=url, profile_interval=0.5, worker_sampling_interval=0.2
        )
        with (
            get_task_stream(client) as stream,
            dask.config.set({"optimization.fuse.active": False}),
        ):
            with span("load"):
                x = da.random.random((2000, 2000), chunks=100).persist()
                wait(x)
            with span("reduce"):
                with span("inner"):
                    assert (x + 1).sum().compute() > 0
                with get_task_stream(client) as std_stream:
                    assert x.std().compute() > 0
            assert client.gather(client.map(spin, range(8))) == list(range(8))
        time.sleep(1.2)  # workers add their samples to the profile history once a second
        truth_profile = client.profile(start=attached)
        status = daskscope.flush(client)
        assert status["write_failures"] == 0
        extension = cluster.scheduler.extensions["spans"]
        spans = {
            sid: (tuple(sp.name), sp.parent.id if sp.parent else None)
            for sid, sp in extension.spans.items()
        }
        computations = len(cluster.scheduler.computations)
    frames: set[tuple[str, str]] = set()
    pending = [truth_profile]
    while pending:
        node = pending.pop()
        for child in node["children"].values():
            frames.add((child["description"]["name"], child["description"]["filename"]))
            pending.append(child)
    return Recorded(
        url,
        cluster_id,
        stream.data,
        spans,
        frames,
        computations,
        {str(t["key"]) for t in std_stream.data},
    )


# -- speedscope -------------------------------------------------------------------------


def check_speedscope_shape(document: dict[str, Any]) -> None:
    """The file format's required fields and types (its JSON schema, by hand: the
    schema ships in the `speedscope` npm package, not installable here)."""
    assert document["$schema"] == SCHEMA_URL
    frames = document["shared"]["frames"]
    assert all(isinstance(f["name"], str) for f in frames)
    assert all(isinstance(f.get("file", ""), str) for f in frames)
    assert all(isinstance(f.get("line", 0), int) for f in frames)
    for profile in document["profiles"]:
        assert profile["type"] == "sampled"
        assert profile["unit"] in ("seconds",)
        assert isinstance(profile["name"], str)
        assert len(profile["samples"]) == len(profile["weights"])
        for stack in profile["samples"]:
            assert all(isinstance(i, int) and 0 <= i < len(frames) for i in stack)
        assert all(w > 0 for w in profile["weights"])
        assert profile["startValue"] == 0
        assert profile["endValue"] == pytest.approx(sum(profile["weights"]))


def stored_frames(trees: list[dict[str, Any]]) -> set[tuple[str, str, int]]:
    """(function, file, first line) of every node of the stored trees, from Dask's
    identifier and, for the function and file, its description."""
    out = set()
    pending = list(trees)
    while pending:
        node = pending.pop()
        for ident, child in node["children"].items():
            d = child["description"]
            first_line = int(ident.rsplit(";", 1)[1])
            assert ident.startswith(d["name"] + ";" + d["filename"] + ";")
            out.add((d["name"], d["filename"], first_line))
            pending.append(child)
    return out


def test_speedscope_weights_and_frames_are_the_stored_profile(recorded: Recorded) -> None:
    store = open_store(recorded.url)
    document = speedscope_document(store, recorded.cluster_id)
    check_speedscope_shape(document)
    windows = profile_trees(store, recorded.cluster_id)
    stored_count = sum(w["tree"]["count"] for w in windows)
    assert stored_count > 0
    whole = document["profiles"][0]
    assert whole["name"].startswith("cluster ")
    # the weights add up to the stored samples x the profiler's interval
    assert sum(whole["weights"]) == pytest.approx(stored_count * profile_interval())
    # its frames are the stored frames (functions, at their first line), and Dask's own
    # profile of the run is in them
    frames = document["shared"]["frames"]
    exported = {(f["name"], f.get("file", ""), f.get("line", 0)) for f in frames}
    assert exported == stored_frames([w["tree"] for w in windows])
    assert recorded.profile_frames <= {(name, file) for name, file, _ in exported}
    assert any(f["name"] == "spin" and f["file"].endswith("test_exports.py") for f in frames)


def test_speedscope_stacks_end_in_the_innermost_frame_dask_names() -> None:
    """Dask counts every frame of a sample but the innermost: a single child takes its
    parent's remaining samples; among several, they stay with the parent."""

    def node(ident: str, count: int, *children: tuple[str, dict[str, Any]]) -> dict[str, Any]:
        name, file, _ = ident.split(";")
        return {
            "count": count,
            "description": {"name": name, "filename": file, "line_number": 1},
            "children": dict(children),
        }

    call = "call;w.py;10"
    tree = node(
        "root;;0",
        10,
        (
            call,
            node(
                call,
                10,
                ("outer;a.py;1", node("outer;a.py;1", 4, ("leaf;a.py;5", node("leaf;a.py;5", 0)))),
                ("other;b.py;3", node("other;b.py;3", 0)),
            ),
        ),
    )
    document = speedscope_file([NamedTree("t", tree)], name="t", interval=0.01)
    frames = [f["name"] for f in document["shared"]["frames"]]
    [profile] = document["profiles"]
    stacks = {
        tuple(frames[i] for i in s): w
        for s, w in zip(profile["samples"], profile["weights"], strict=True)
    }
    assert stacks == pytest.approx({("call",): 0.06, ("call", "outer", "leaf"): 0.04})
    assert sum(profile["weights"]) == pytest.approx(10 * 0.01)
    assert document["shared"]["frames"][frames.index("leaf")] == {
        "name": "leaf",
        "file": "a.py",
        "line": 5,
    }


def test_speedscope_per_computation(recorded: Recorded) -> None:
    store = open_store(recorded.url)
    document = speedscope_document(store, recorded.cluster_id)
    per_computation = document["profiles"][1:]
    assert per_computation, "no computation got a profile"
    # what a failure shows: each computation's window and code, and the profile windows'
    # dates, beside the profiles' names (a CI run of 2026-11-26: windows were dated by
    # when they were taken, test_flamegraph_counts)
    detail = cluster_detail(store, recorded.cluster_id)
    windows = profile_trees(store, recorded.cluster_id)
    seen = "\n".join(
        [f"profile: {p['name']}" for p in per_computation]
        + [
            f"computation {c['started_at']}..{c['stopped_at']}: {c['code'][-1:]}"
            for c in detail["computations"]
        ]
        + [f"window {w['started_at']}..{w['stopped_at']}: {w['samples']}" for w in windows]
    )
    names = [p["name"] for p in per_computation]
    assert any("client.map(spin" in n or "gather" in n for n in names), seen
    comp_id = per_computation[0]["name"].split()[1].rstrip(":")
    only = speedscope_document(store, recorded.cluster_id, computation=comp_id)
    assert [p["name"] for p in only["profiles"]] == [per_computation[0]["name"]]
    assert only["profiles"][0]["weights"] == per_computation[0]["weights"]


def test_speedscope_names_the_windows_a_computation_shares(recorded: Recorded) -> None:
    """A window of samples overlapping several computations is in each one's profile, so
    they add up to more than the cluster's: each profile's name says how many of its
    windows it shares (counted here from the stored windows and computations)."""
    store = open_store(recorded.url)
    document = speedscope_document(store, recorded.cluster_id)
    detail = cluster_detail(store, recorded.cluster_id)
    end = detail["cluster"]["last_seen_at"]
    spans = [(c["started_at"], c["stopped_at"] or end) for c in detail["computations"]]
    windows = [w for w in profile_trees(store, recorded.cluster_id) if w["samples"]]

    def overlapping(start: float, stop: float) -> list[dict[str, Any]]:
        return [w for w in windows if w["stopped_at"] >= start and w["started_at"] <= stop]

    shared_somewhere = False
    by_id = {c["id"]: c for c in detail["computations"]}
    counted = 0  # samples over the profiles: each window's, once for each it is in
    for profile in document["profiles"][1:]:
        comp = by_id[profile["name"].split()[1].rstrip(":")]
        mine = overlapping(comp["started_at"], comp["stopped_at"] or end)
        counted += sum(w["tree"]["count"] for w in mine)
        shared = sum(
            sum(w["stopped_at"] >= a and w["started_at"] <= b for a, b in spans) > 1 for w in mine
        )
        count = f"({len(mine)} profile window{'s' if len(mine) != 1 else ''}"
        assert count in profile["name"], profile["name"]
        if shared:
            shared_somewhere = True
            said = "all" if shared == len(mine) else str(shared)
            assert f", {said} of them shared with other computations" in profile["name"]
        else:
            assert "shared" not in profile["name"]
    # the run's computations follow each other within a window: their profiles overlap,
    # and a shared window's samples are in each
    assert shared_somewhere
    computations_s = sum(sum(p["weights"]) for p in document["profiles"][1:])
    assert computations_s == pytest.approx(counted * profile_interval())


# -- Perfetto ------------------------------------------------------------------------------


def perfetto(recorded: Recorded, **kwargs: Any) -> str:
    return "".join(perfetto_chunks(open_store(recorded.url), recorded.cluster_id, **kwargs))


#: The Trace Event Format's fields (its JSON Object Format): what every event holds, and
#: what each phase used here adds ("X" complete events their duration, "b"/"e" nestable
#: async events their id, "M" metadata events their args)
EVENT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "ph": str,
    "ts": (int, float),
    "pid": int,
    "tid": int,
}
PHASE_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "X": {"dur": (int, float), "cat": str, "args": dict},
    "b": {"id": (int, str), "cat": str, "args": dict},
    "e": {"id": (int, str), "cat": str},
    "M": {"args": dict},
}
#: metadata events' names and the argument each holds
METADATA_ARGS = {
    "process_name": ("name", str),
    "process_sort_index": ("sort_index", int),
    "thread_name": ("name", str),
    "thread_sort_index": ("sort_index", int),
}
OPTIONAL_FIELDS = {"cat", "args", "dur", "id", "tts", "s", "bp", "cname"}


def check_trace_event_schema(document: dict[str, Any]) -> None:
    """The file against the Trace Event Format's documented fields: the object form's
    keys, each event's required fields and types by phase, nothing unknown."""
    assert set(document) <= {"traceEvents", "displayTimeUnit", "otherData"}
    assert document.get("displayTimeUnit", "ms") in ("ms", "ns")
    assert isinstance(document.get("otherData", {}), dict)
    assert isinstance(document["traceEvents"], list)
    for event in document["traceEvents"]:
        phase = event["ph"]
        assert phase in PHASE_FIELDS, f"a phase this export does not write: {phase}"
        required = {**EVENT_FIELDS, **PHASE_FIELDS[phase]}
        for name, kind in required.items():
            assert isinstance(event.get(name), kind), (name, event)
        assert set(event) <= set(EVENT_FIELDS) | OPTIONAL_FIELDS, event
        assert event["ts"] >= 0 and event.get("dur", 0) >= 0
        if "cat" in event:  # a comma-separated list of categories
            assert all(part for part in event["cat"].split(",")), event
        if phase == "M":
            arg, kind = METADATA_ARGS[event["name"]]
            assert isinstance(event["args"].get(arg), kind), event


def parsed_trace(text: str) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """The events of a trace-event file, checked against the format's fields and as
    ui.perfetto.dev's JSON importer reads them; and each process id's worker."""
    document = json.loads(text)
    check_trace_event_schema(document)
    events = document["traceEvents"]
    for event in events:
        assert {"ph", "ts", "pid", "tid", "name"} <= set(event), event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
    workers = {
        e["pid"]: e["args"]["name"].removeprefix("worker ")
        for e in events
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    threads = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    slices = [e for e in events if e["ph"] == "X"]
    assert all(e["dur"] >= 0 for e in slices)
    assert {(e["pid"], e["tid"]) for e in slices} <= threads
    # complete events of one thread nest or follow one another, never cross (the
    # importer drops crossing slices); 1 µs of slack for the rounding to microseconds
    by_thread: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in slices:
        by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        open_ends: list[float] = []
        for begin, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= begin + 1:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1, "crossing slices"
            open_ends.append(end)
    # every async begin has its end, on the same track, not before it
    begins = {(e["cat"], e["id"]): e for e in events if e["ph"] == "b"}
    ends = {(e["cat"], e["id"]): e for e in events if e["ph"] == "e"}
    assert begins.keys() == ends.keys()
    assert all(ends[k]["ts"] >= begins[k]["ts"] for k in begins)
    return events, workers


def compute_of(task: dict[str, Any]) -> dict[str, Any]:
    return next(ss for ss in task["startstops"] if ss["action"] == "compute")


def test_perfetto_holds_every_task_of_the_task_stream(recorded: Recorded) -> None:
    text = perfetto(recorded)
    events, workers = parsed_trace(text)
    slices = [e for e in events if e["ph"] == "X"]
    assert Counter(workers[e["pid"]] for e in slices) == Counter(
        t["worker"] for t in recorded.stream
    )
    assert len(set(workers.values())) == 2
    assert sorted(e["args"]["key"] for e in slices) == sorted(
        str(t["key"]) for t in recorded.stream
    )
    # each compute where and when Dask says it ran, and its output's size
    origin = json.loads(text)["otherData"]["origin_epoch_s"]
    truth = {str(t["key"]): t for t in recorded.stream}
    for e in slices:
        task = truth[e["args"]["key"]]
        compute = compute_of(task)
        assert e["ts"] / 1e6 + origin == pytest.approx(compute["start"], abs=1e-5)
        assert e["dur"] / 1e6 == pytest.approx(compute["stop"] - compute["start"], abs=1e-5)
        assert e["args"]["bytes"] == task["nbytes"]
        assert e["name"] == key_split(task["key"])
    # transfers: async slices on the receiving worker naming the sender
    transfers = [e for e in events if e["ph"] == "b" and e["cat"] == "transfer"]
    truth_transfers = [
        (t["worker"], ss["source"])
        for t in recorded.stream
        for ss in t["startstops"]
        if ss["action"] == "transfer"
    ]
    assert Counter((workers[e["pid"]], e["args"]["source"]) for e in transfers) == Counter(
        truth_transfers
    )
    assert truth_transfers, "the run moved no data between workers"


def test_perfetto_streams_page_by_page_the_same_file(recorded: Recorded) -> None:
    chunks = list(perfetto_chunks(open_store(recorded.url), recorded.cluster_id, page_tasks=100))
    assert len(chunks) >= len(recorded.stream) / 100  # one chunk a page read
    assert "".join(chunks) == perfetto(recorded)


def test_perfetto_window_and_computation(recorded: Recorded) -> None:
    spans = sorted(
        (min(s["start"] for s in t["startstops"]), max(s["stop"] for s in t["startstops"]))
        for t in recorded.stream
    )
    a = spans[len(spans) // 3][0] + 1e-4
    b = spans[2 * len(spans) // 3][0] + 1e-4
    events, _ = parsed_trace(perfetto(recorded, start=a, stop=b, page_tasks=250))
    overlapping = [s for s in spans if s[1] > a and s[0] < b]
    assert len([e for e in events if e["ph"] == "X"]) == len(overlapping) > 0

    store = open_store(recorded.url)
    computations = cluster_detail(store, recorded.cluster_id)["computations"]
    [std_computation] = [c["id"] for c in computations if "x.std()" in (call_line(c) or "")]
    events, _ = parsed_trace(perfetto(recorded, computation=std_computation))
    keys = {e["args"]["key"] for e in events if e["ph"] == "X"}
    assert keys == recorded.std_keys
    assert all(e["args"]["computation"] == std_computation for e in events if e["ph"] == "X")


# -- OpenTelemetry ------------------------------------------------------------------------


def attributes(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        which = kv.value.WhichOneof("value")
        value = getattr(kv.value, which)
        if which == "array_value":
            value = [v.string_value for v in value.values]
        out[kv.key] = value
    return out


def test_otlp_trace_holds_the_span_tree_dask_showed(recorded: Recorded) -> None:
    store = open_store(recorded.url)
    request = otlp_request(store, recorded.cluster_id, groups=True)
    [resource] = request.resource_spans
    resource_attrs = attributes(resource.resource)
    assert resource_attrs["service.name"] == "dask"
    assert resource_attrs["daskscope.cluster.id"] == recorded.cluster_id
    spans = list(resource.scope_spans[0].spans)
    assert {s.trace_id for s in spans} == {trace_id_of(recorded.cluster_id)}
    assert len({s.span_id for s in spans}) == len(spans)
    by_id = {s.span_id: s for s in spans}
    [root] = [s for s in spans if not s.parent_span_id]
    assert root.span_id == span_id_of(recorded.cluster_id, "cluster", recorded.cluster_id)
    assert all(s.parent_span_id in by_id for s in spans if s is not root)
    assert all(s.end_time_unix_nano >= s.start_time_unix_nano > 0 for s in spans)

    # one span per computation Dask saw, below the root, the calling line in its name
    computations = [s for s in spans if "dask.computation.id" in attributes(s)]
    assert len(computations) == recorded.computations
    assert all(s.parent_span_id == root.span_id for s in computations)
    assert any(s.name == "computation: assert (x + 1).sum().compute() > 0" for s in computations)
    executed = sum(attributes(s)["dask.computation.tasks.executed"] for s in computations)
    assert executed == len(recorded.stream)

    # Dask's spans: the same names and the same tree as the spans extension
    dask_spans = {
        attributes(s)["dask.span.id"]: s for s in spans if "dask.span.id" in attributes(s)
    }
    assert set(dask_spans) == set(recorded.spans)
    for sid, (name, parent) in recorded.spans.items():
        exported = dask_spans[sid]
        assert tuple(attributes(exported)["dask.span.name"]) == name
        expected_parent = dask_spans[parent].span_id if parent else root.span_id
        assert exported.parent_span_id == expected_parent
    inner = next(s for s in dask_spans.values() if s.name == "reduce / inner")
    inner_attrs = attributes(inner)
    assert inner_attrs["dask.span.activity.compute.duration"] > 0
    assert inner_attrs["dask.span.bytes"] > 0

    # task groups below their span: every task of the stream counted once
    groups = [s for s in spans if "dask.task_group.name" in attributes(s)]
    assert sum(attributes(g)["dask.task_group.tasks.executed"] for g in groups) == len(
        recorded.stream
    )
    assert all(by_id[g.parent_span_id] is not root for g in groups)


def test_otlp_json_is_the_protobuf_with_hex_ids(recorded: Recorded) -> None:
    store = open_store(recorded.url)
    request = otlp_request(store, recorded.cluster_id)
    data = otlp_json(request)
    first = data["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert first["traceId"] == trace_id_of(recorded.cluster_id).hex()
    assert len(first["spanId"]) == 16 and int(first["spanId"], 16) >= 0
    assert first["kind"] == 1  # SPAN_KIND_INTERNAL, as a number in OTLP/JSON
    assert request_from_json(json.loads(json.dumps(data))) == request
    assert ExportTraceServiceRequest.FromString(request.SerializeToString()) == request


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """A tiny OTLP/HTTP receiver: keeps (path, content type, body) of each POST."""
    received: list[tuple[str, str, bytes]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", received
    finally:
        server.shutdown()
        thread.join(timeout=10)


def test_cli_sends_the_trace_to_a_collector(
    recorded: Recorded, collector: tuple[str, list[tuple[str, str, bytes]]]
) -> None:
    endpoint, received = collector
    result = CliRunner().invoke(
        cli,
        [
            "--database",
            recorded.url,
            "export",
            "otlp",
            recorded.cluster_id[:8],
            "--endpoint",
            endpoint,
        ],
    )
    assert result.exit_code == 0, result.output
    [(path, content_type, body)] = received
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    sent = ExportTraceServiceRequest.FromString(body)
    assert sent == otlp_request(open_store(recorded.url), recorded.cluster_id)
    spans = len(sent.resource_spans[0].scope_spans[0].spans)
    assert f"sent {spans} spans" in result.output


# -- CLI and dashboard -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "route", "name_tail"),
    [
        (["perfetto"], "perfetto", "timeline.json"),
        (["perfetto", "--format", "proto"], "perfetto?format=proto", "timeline.pftrace"),
        (["speedscope"], "speedscope", "profile.speedscope.json"),
        (["otlp"], "otlp", "trace.otlp.pb"),
        (["otlp", "--format", "json"], "otlp?format=json", "trace.otlp.json"),
    ],
)
def test_cli_file_equals_the_download(
    recorded: Recorded,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    route: str,
    name_tail: str,
) -> None:
    app = create_app(recorded.url)
    answer = call(app, "GET", f"/api/v1/clusters/{recorded.cluster_id}/export/{route}")
    assert answer.status_code == 200
    expected_name = f"daskscope-{recorded.cluster_id}-{name_tail}"
    disposition = answer.headers["content-disposition"]
    assert disposition == f'attachment; filename="{expected_name}"'
    monkeypatch.chdir(tmp_path)  # the default file name lands here
    result = CliRunner().invoke(
        cli, ["--database", recorded.url, "export", command[0], recorded.cluster_id, *command[1:]]
    )
    assert result.exit_code == 0, result.output
    assert f"wrote {expected_name}" in result.output
    assert (tmp_path / expected_name).read_bytes() == answer.content


def test_clear_errors(recorded: Recorded) -> None:
    runner = CliRunner()
    base = ["--database", recorded.url, "export"]
    unknown = runner.invoke(cli, [*base, "speedscope", "no-such-cluster"])
    assert unknown.exit_code == 2
    assert "no cluster with id 'no-such-cluster'" in unknown.output
    assert "daskscope clusters" in unknown.output
    no_comp = runner.invoke(cli, [*base, "speedscope", recorded.cluster_id, "--computation", "x"])
    assert no_comp.exit_code == 2 and "has no computation 'x'" in no_comp.output
    backwards = runner.invoke(
        cli, [*base, "speedscope", recorded.cluster_id, "--start", "10", "--stop", "5"]
    )
    assert backwards.exit_code == 2 and "give --start before --stop" in backwards.output
    nothing = runner.invoke(
        cli, [*base, "speedscope", recorded.cluster_id, "--start", "10", "--stop", "20"]
    )
    assert nothing.exit_code == 2 and "no profile sample in this window" in nothing.output
    refused = runner.invoke(
        cli, [*base, "otlp", recorded.cluster_id, "--endpoint", "http://127.0.0.1:9"]
    )
    assert refused.exit_code == 2 and "cannot reach the collector" in refused.output

    late = runner.invoke(cli, [*base, "perfetto", recorded.cluster_id, "--start", "4e9"])
    assert late.exit_code == 2 and "no task of cluster" in late.output

    app = create_app(recorded.url)
    prefix = f"/api/v1/clusters/{recorded.cluster_id}/export"
    assert call(app, "GET", "/api/v1/clusters/no-such-cluster/export/otlp").status_code == 404
    missing = call(app, "GET", f"{prefix}/speedscope?computation=x")
    assert (
        missing.status_code == 404
        and "has no computation 'x'" in missing.json()["error"]["message"]
    )
    bad = call(app, "GET", f"{prefix}/speedscope?start=10&stop=5")
    assert bad.status_code == 400
    for kind in ("perfetto", "speedscope"):
        odd = call(app, "GET", f"{prefix}/{kind}?start=nan")
        assert odd.status_code == 400, odd.text
        assert "start must be a finite number" in odd.json()["error"]["message"]


def test_a_cluster_without_tasks_or_profiles_says_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    cluster = make_cluster()
    write_records(open_store(url), [cluster])
    runner = CliRunner()
    for kind, says in (("perfetto", "no task recorded"), ("speedscope", "no profile sample")):
        result = runner.invoke(cli, ["--database", url, "export", kind, cluster.id])
        assert result.exit_code == 2 and says in result.output, result.output
        answer = call(create_app(url), "GET", f"/api/v1/clusters/{cluster.id}/export/{kind}")
        assert answer.status_code == 404 and says in answer.json()["error"]["message"]
    # a trace of the cluster alone is still a trace
    result = runner.invoke(cli, ["--database", url, "export", "otlp", cluster.id, "-o", "-"])
    assert result.exit_code == 0
    [span] = (
        ExportTraceServiceRequest.FromString(result.stdout_bytes)
        .resource_spans[0]
        .scope_spans[0]
        .spans
    )
    assert span.name.startswith("dask cluster")


# -- the pages' links --------------------------------------------------------------------


@needs_chromium
def test_pages_link_the_downloads(recorded: Recorded, tmp_path: Path, browser: Any) -> None:
    """In Chromium: the cluster page's Export line and the timeline page's link download
    the files the CLI writes, under the same names."""
    cid = recorded.cluster_id
    expected = {
        "task timeline for Perfetto": (f"daskscope-{cid}-timeline.json", ["perfetto"]),
        "protobuf": (f"daskscope-{cid}-timeline.pftrace", ["perfetto", "--format", "proto"]),
        "profile for speedscope": (f"daskscope-{cid}-profile.speedscope.json", ["speedscope"]),
        "spans as an OpenTelemetry trace": (f"daskscope-{cid}-trace.otlp.pb", ["otlp"]),
        "OTLP/JSON": (f"daskscope-{cid}-trace.otlp.json", ["otlp", "--format", "json"]),
    }
    app = create_app(recorded.url)
    with serving(app) as base:
        for width, height in ((1440, 900), (390, 844)):
            context, page, _ = new_page(browser, width, height, accept_downloads=True)
            page.goto(f"{base}/clusters/{cid}")
            line = page.locator("#exports")
            assert line.is_visible()
            assert line.inner_text().startswith("Export:")
            # nothing of the line runs past the window
            box = line.bounding_box()
            assert box is not None and box["x"] + box["width"] <= width
            screenshot(page, f"cluster-exports-{width}", full_page=False)
            if width == 1440:
                for text, (name, command) in expected.items():
                    with page.expect_download() as info:
                        line.get_by_role("link", name=text, exact=True).click()
                    download = info.value
                    assert download.suggested_filename == name
                    saved = tmp_path / f"page-{name}"
                    download.save_as(saved)
                    written = tmp_path / f"cli-{name}"
                    result = CliRunner().invoke(
                        cli,
                        ["--database", recorded.url, "export", command[0], cid,
                         *command[1:], "-o", str(written)],
                    )  # fmt: skip
                    assert result.exit_code == 0, result.output
                    assert saved.read_bytes() == written.read_bytes(), text
            page.goto(f"{base}/clusters/{cid}/timeline")
            screenshot(page, f"timeline-exports-{width}", full_page=False)
            link = page.locator("#exports").get_by_role("link", name="task timeline for Perfetto")
            box = link.bounding_box()
            assert box is not None and box["x"] + box["width"] <= width
            if width == 1440:
                with page.expect_download() as info:
                    link.click()
                assert info.value.suggested_filename == f"daskscope-{cid}-timeline.json"
                proto = page.locator("#exports").get_by_role("link", name="protobuf")
                with page.expect_download() as info:
                    proto.click()
                download = info.value
                assert download.suggested_filename == f"daskscope-{cid}-timeline.pftrace"
                saved = tmp_path / "timeline-page.pftrace"
                download.save_as(saved)
                assert saved.read_bytes() == b"".join(
                    perfetto_proto_chunks(open_store(recorded.url), cid)
                )
            context.close()


def test_every_export_is_the_same_from_postgresql(recorded: Recorded, database_url: str) -> None:
    """The recorded rows copied into a fresh store of each kind export the same bytes."""
    import sqlalchemy as sa

    from daskscope.store import schema as s
    from daskscope.store import write_rows

    source = open_store(recorded.url)
    with source.engine.connect() as conn:
        rows = {
            table: [dict(r._mapping) for r in conn.execute(sa.select(table))]
            for table in s.TABLES.values()
        }
    copy = open_store(database_url)
    assert write_rows(copy, rows) == sum(len(r) for r in rows.values())
    cid = recorded.cluster_id
    try:
        assert "".join(perfetto_chunks(copy, cid, page_tasks=500)) == perfetto(recorded)
        assert speedscope_document(copy, cid) == speedscope_document(source, cid)
        assert otlp_request(copy, cid, groups=True) == otlp_request(source, cid, groups=True)
    finally:
        copy.close()


def test_perfetto_moves_a_crossing_compute_to_an_overlapping_track() -> None:
    """Two computes Dask put on one thread whose times cross: both stay visible, the
    later on a second track of that thread; a nested or following one stays put."""
    from daskscope.export.perfetto import _Ids, perfetto_events
    from daskscope.tasklog.forms import TaskAction, TaskExecution

    def execution(key: str, start: float, stop: float) -> TaskExecution:
        return TaskExecution(
            key=key, group="g", prefix="g", worker="tcp://w:1", thread=7, start=start,
            stop=stop, state="memory", nbytes=8, computation_id=None, span_id=None,
            actions=(TaskAction("compute", start, stop),),
        )  # fmt: skip

    ids = _Ids()
    events = [
        e
        for x in (
            execution("a", 10.0, 12.0),
            execution("inside-a", 10.5, 11.0),
            execution("crossing-a", 11.5, 13.0),
            execution("after-a", 12.0, 12.5),
        )
        for e in perfetto_events(x, 10.0, ids)
    ]
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    tracks = {e["args"]["key"]: names[e["tid"]] for e in events if e["ph"] == "X"}
    assert tracks == {
        "a": "thread 7",
        "inside-a": "thread 7",
        "crossing-a": "thread 7 · overlapping 1",
        "after-a": "thread 7",
    }
