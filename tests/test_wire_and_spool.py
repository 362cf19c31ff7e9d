"""The batch format a collector sends to a server, and the spool that holds undelivered
batches: real files, real JSON, every kind of record."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import subprocess
import sys
import typing
from pathlib import Path

import msgspec
import pytest

from daskscope.collector.spool import Spool
from daskscope.model import RECORD_TYPES, Record
from daskscope.shape import Column, FieldShape, col, record_fields
from daskscope.wire import (
    WireError,
    decode_batch,
    decode_rows_json,
    encode_batch,
    encode_batches,
    wire_struct,
)
from factories import (
    make_cluster,
    make_event,
    make_group,
    make_span_metric,
    make_worker_sample,
    one_of_each_kind,
)


def sample_records() -> list:
    c = "cluster-1"
    return [
        make_group(
            c, "inc-abc", dependencies=["ones-def"], states={"memory": 3}, tasks_executed=3,
            nbytes_total=2**40, durations={"compute": 0.5}, started_at=1.8e9,
        ),
        make_span_metric(c, "s"),
        make_worker_sample(c, "tcp://a:1", 1.8e9, nthreads=2),
        make_event(c, "worker-added", 1.8e9, detail={"n": 1}),
    ]  # fmt: skip


def test_round_trip_is_lossless() -> None:
    records = sample_records()
    assert decode_batch(encode_batch(records)) == records


def test_batches_keep_within_the_limits_in_order_clusters_first() -> None:
    records = sample_records() * 7
    cluster = make_cluster("n", id="c")
    batches = list(encode_batches([*records, cluster], max_records=10, max_bytes=1 << 20))
    assert len(records) == 28
    assert [len(decode_batch(b)) for b in batches] == [10, 10, 9]
    decoded = [r for b in batches for r in decode_batch(b)]
    assert decoded == [cluster, *records]
    one_size = len(encode_batch(records[:1]))
    small = list(encode_batches(records, max_records=100, max_bytes=3 * one_size))
    assert all(len(b) <= 3 * one_size for b in small) and len(small) >= len(records) // 4
    assert [r for b in small for r in decode_batch(b)] == records
    # a record larger than the limit goes alone (the server will refuse only that one)
    (alone,) = encode_batches(records[:1], max_records=10, max_bytes=10)
    assert decode_batch(alone) == records[:1]


def test_non_finite_numbers_travel_as_not_measured() -> None:
    # JSON has no NaN: a sender's NaN is sent as null, which optional fields take
    sample = make_worker_sample("c", "tcp://a:1", 1.8e9, cpu_percent=float("nan"), memory=None)
    (decoded,) = decode_batch(encode_batch([sample]))
    assert decoded.cpu_percent is None


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(version=99), "version"),
        (lambda d: d.update(records="nope"), "records"),
        (lambda d: d["records"][1].update(kind="gossip"), "records[1].kind"),
        (lambda d: d["records"][1].update(data=[]), "records[1].data"),
        (
            lambda d: d["records"][0]["data"].update(tasks_executed="many"),
            "records[0].data.tasks_executed",
        ),
        (
            lambda d: d["records"][0]["data"].update(tasks_executed=-3),
            "records[0].data.tasks_executed",
        ),
        (lambda d: d["records"][0]["data"].update(colour="red"), "records[0].data.colour"),
        (lambda d: d["records"][0]["data"].pop("cluster_id"), "records[0].data.cluster_id"),
        (lambda d: d["records"][2]["data"].update(sampled_at=1e20), "records[2].data.sampled_at"),
        (lambda d: d["records"][1]["data"].update(value=None), "records[1].data.value"),
        (lambda d: d["records"][1]["data"].update(value=float("nan")), "body"),  # not JSON
        (lambda d: d.update(colour="red"), "colour"),
        (lambda d: d["records"][1].pop("kind"), "records[1].kind"),
        (lambda d: d["records"][3]["data"].update(detail=[1, 2]), "records[3].data.detail"),
    ],
)
def test_bad_batches_name_the_field(mutate, field: str) -> None:
    document = json.loads(encode_batch(sample_records()))
    mutate(document)
    with pytest.raises(WireError) as caught:
        decode_batch(json.dumps(document).encode())
    assert caught.value.field == field


# ---------------------------------------------------------------- rules as declared


def test_every_field_of_every_record_declares_its_shape_and_the_wire_bounds_it() -> None:
    assert {type(r) for r in one_of_each_kind()} == set(RECORD_TYPES.values())
    for cls in RECORD_TYPES.values():
        wire_types = typing.get_type_hints(wire_struct(cls), include_extras=True)
        for f in record_fields(cls):  # raises for a field declared without col()
            assert isinstance(f.shape, FieldShape), f"{cls.__name__}.{f.name}"
            scalars = (int, float, str, int | None, float | None, str | None)
            if f.hint in (*scalars, dict[str, int], dict[str, float]):
                assert "msgspec.Meta(" in repr(wire_types[f.name]), f"{cls.__name__}.{f.name}"


def test_a_field_declared_without_its_shape_is_an_error() -> None:
    @dataclasses.dataclass(kw_only=True)
    class Careless:
        id: str = col(Column.STRING, primary_key=True)
        count: int = 0

    with pytest.raises(TypeError, match=r"Careless\.count declares no shape"):
        record_fields(Careless)


@pytest.mark.parametrize("record", one_of_each_kind(), ids=lambda r: r.KIND)
def test_numbers_refuse_negatives_exactly_where_declared(record: Record) -> None:
    refused = []
    for f in record_fields(type(record)):
        if f.hint not in (int, float, int | None, float | None):
            continue
        document = json.loads(encode_batch([record]))
        document["records"][0]["data"][f.name] = -1
        try:
            ((_, row),) = decode_rows_json(json.dumps(document).encode())
        except WireError as exc:
            assert exc.field == f"records[0].data.{f.name}"
            refused.append(f.name)
        else:
            assert row[f.name] == -1
    declared = [
        f.name
        for f in record_fields(type(record))
        if f.shape.nonnegative or f.shape.column is Column.TIME
    ]
    assert refused == declared


def test_a_rule_follows_the_declaration_not_the_name() -> None:
    @dataclasses.dataclass(kw_only=True)
    class Probe:
        tally: int = col(Column.BIGINT, nonnegative=True)  # a name no rule ever matched
        tasks_done: int = col(Column.BIGINT)  # "tasks_..." once meant non-negative
        ended_at: float = col(Column.DOUBLE)  # "..._at" once meant an epoch time
        owner_id: str = col(Column.STRING)  # "..._id" once meant short
        label: str = col(Column.STRING, short=True)

    def decode(**changes: object) -> object:
        fields = {"tally": 0, "tasks_done": -1, "ended_at": -1e20, "owner_id": "x" * 600}
        document = {**fields, "label": "x", **changes}
        return msgspec.json.decode(json.dumps(document), type=wire_struct(Probe))

    decode()
    for bad in ({"tally": -1}, {"label": "x" * 600}):
        with pytest.raises(msgspec.ValidationError):
            decode(**bad)


_FIRST_DECODES_AT_ONCE = """
import sys
import threading

sys.path.insert(0, sys.argv[1])
from test_wire_and_spool import sample_records
from daskscope.wire import decode_rows_json, encode_batch

body = encode_batch(sample_records() * 50)
start = threading.Barrier(8)

def decode():
    start.wait()
    for _ in range(20):
        decode_rows_json(body)

threads = [threading.Thread(target=decode) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def test_first_decodes_in_many_threads_at_once_do_not_crash() -> None:
    # A server's threads all decode their first batches together; building msgspec's
    # decoder in two of them at once crashed the server (SIGSEGV) under load. Without
    # the lock that builds it once, this test failed 4 runs out of 4.
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _FIRST_DECODES_AT_ONCE, str(Path(__file__).parent)],
            stderr=subprocess.PIPE,
        )
        for _ in range(12)
    ]
    for run in runs:
        _, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr.decode()[-2000:]


def test_spool_keeps_order_and_survives_a_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for i in range(12):
        spool.put(f"batch {i}".encode())
    # a new process (a restarted scheduler) sees the same queue and appends after it
    again = Spool(tmp_path)
    again.put(b"batch 12")
    assert [p.read_bytes() for p in again.pending()] == [f"batch {i}".encode() for i in range(13)]
    first = again.pending()[0]
    again.delivered(first)
    rejected = again.reject(again.pending()[0])
    assert rejected.read_bytes() == b"batch 1" and len(again) == 11
    assert not list(tmp_path.glob("*.tmp"))


def _hold_drain_lock(directory: str, ready, release) -> None:
    with Spool(directory).draining() as mine:
        assert mine
        ready.set()
        release.wait(10)


def test_one_process_drains_at_a_time(tmp_path: Path) -> None:
    ready, release = multiprocessing.Event(), multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold_drain_lock, args=(str(tmp_path), ready, release))
    holder.start()
    try:
        assert ready.wait(10)
        with Spool(tmp_path).draining() as mine:
            assert not mine
    finally:
        release.set()
        holder.join(10)
    with Spool(tmp_path).draining() as mine:
        assert mine
