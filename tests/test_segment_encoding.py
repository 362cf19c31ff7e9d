"""The task log's segment encoding on its own: every key of any shape comes back as its
exact ``str(key)``, the key filter admits every stored key (and refuses most others),
filters written by the first encoder are still read, and a realistic segment stays
within the 32 bytes a task the store promises."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daskscope.tasklog.repeats import RepeatFilter
from daskscope.tasklog.segments import (
    FORMAT,
    FORMAT_1,
    KEY_IS_GROUP,
    KEY_TUPLE,
    KEY_WHOLE,
    decode_segment,
    encode_segment,
    execution,
    key_filter_may_hold,
)
from daskscope.text import escape_text

T0 = 1.8e9
WORKERS = ["tcp://10.0.0.1:4001", "tcp://10.0.0.2:4001"]

# -- keys of every shape Dask allows ------------------------------------------------------

names = st.sampled_from(
    ["inc-3f2a", "x", "getitem-9c", "it's", 'say "hi"', "naïve-π", "tab\there", "back\\slash"]
)
atoms = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=6),
    st.binary(max_size=4),
)
items = st.recursive(atoms, lambda inner: st.tuples(inner, inner) | st.tuples(inner), max_leaves=4)


@st.composite
def key_and_group(draw: Any) -> tuple[Any, str]:
    """A key and the group name Dask gives it: tuples led by the group, string keys,
    keys equal to their group, a 1-tuple, a tuple led by something else."""
    group = draw(names)
    shape = draw(st.sampled_from(["tuple", "tuple", "string", "group", "one", "other-head"]))
    if shape == "tuple":
        return (group, *draw(st.lists(items, min_size=1, max_size=3))), group
    if shape == "string":
        return f"{group}-{draw(st.text(max_size=8))}", group
    if shape == "group":
        return group, group
    if shape == "one":
        return (group,), group
    return (draw(atoms), draw(items)), group


def executions_of(keyed: list[tuple[Any, str]], seed: int = 0) -> list[Any]:
    """One execution per key: back to back on two threads, every third with a transfer
    first, every seventh erred."""
    rnd = random.Random(seed)
    rows = []
    for i, (key, group) in enumerate(keyed):
        start = T0 + i * 0.01 + rnd.random() * 1e-3
        startstops = [{"action": "compute", "start": start, "stop": start + 0.005}]
        if i % 3 == 0:
            startstops.insert(
                0, {"action": "transfer", "start": start - 0.002, "stop": start,
                    "source": WORKERS[1]},
            )  # fmt: skip
        erred = i % 7 == 6
        rows.append(
            execution(key, group, group.split("-")[0], WORKERS[i % 2], 7000 + i % 2, startstops,
                      erred=erred, nbytes=None if erred else 100 + i, computation="c-1",
                      span=None if i % 2 else "span-1")
        )  # fmt: skip
    return rows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(key_and_group(), min_size=1, max_size=20))
def test_every_key_comes_back_as_its_text(keyed: list[tuple[Any, str]]) -> None:
    rows = executions_of(keyed)
    [record] = encode_segment("cluster", 0, rows)
    seg = decode_segment(record.format, record.payload)
    by_start = sorted(range(len(rows)), key=lambda i: rows[i][5] or rows[i][7][-1]["start"])
    # as every table keeps text: NUL and lone surrogates escaped
    assert [seg.key(r) for r in range(len(seg))] == [escape_text(str(rows[i][0])) for i in by_start]
    for r, i in enumerate(by_start):
        key, group = keyed[i]
        assert seg.names[int(seg.group[r])] == group
        form = int(seg.key_form[r])
        # kept compactly where the key allows it, whole otherwise
        if str(key) == group:
            assert form == KEY_IS_GROUP
        elif type(key) is tuple and len(key) > 1 and key[0] == group == escape_text(group):
            assert form == KEY_TUPLE and seg.key_rest[r].as_py() != str(key)
        else:
            assert form == KEY_WHOLE
        assert key_filter_may_hold(record.key_filter, str(key))
    assert record.groups == sorted({g for _, g in keyed})


def test_a_segment_keeps_what_each_execution_was() -> None:
    keyed = [(("inc-3f2a", i), "inc-3f2a") for i in range(40)] + [("x", "x")]
    rows = executions_of(keyed)
    [record] = encode_segment("cluster", 0, rows)
    seg = decode_segment(record.format, record.payload)
    for r in range(len(seg)):
        i = next(i for i, row in enumerate(rows) if str(row[0]) == seg.key(r))
        worker, thread, erred, nbytes, span = (
            rows[i][3],
            rows[i][4],
            rows[i][8],
            rows[i][9],
            rows[i][11],
        )
        assert seg.names[int(seg.worker[r])] == worker and int(seg.thread[r]) == thread
        assert int(seg.state[r]) == erred
        assert int(seg.nbytes[r]) == (-1 if erred else nbytes)
        assert (seg.names[int(seg.span[r])] if seg.span[r] >= 0 else None) == span
        actions = rows[i][7] or [{"action": "compute", "start": rows[i][5], "stop": rows[i][6]}]
        compute = next(a for a in actions if a["action"] == "compute")
        assert abs(seg.start[r] - compute["start"]) < 1.5e-6
        assert abs(seg.stop[r] - compute["stop"]) < 1.5e-6
        mine = np.flatnonzero(seg.action_row == r)
        others = [a for a in actions if a is not compute]
        assert [seg.names[int(seg.action_name[j])] for j in mine] == [a["action"] for a in others]
        assert [seg.names[int(seg.action_source[j])] for j in mine] == [a["source"] for a in others]


def test_payloads_of_the_first_format_are_still_read() -> None:
    """Format 1 compressed each buffer inside the IPC streams; stores hold such
    segments. The same streams are written that way here with pyarrow's own writer."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    rows = executions_of([(("inc-3f2a", i), "inc-3f2a") for i in range(30)])
    [record] = encode_segment("cluster", 0, rows)
    assert record.format == FORMAT
    size = int.from_bytes(record.payload[:8], "little")
    raw = pa.decompress(record.payload[8:], decompressed_size=size, codec="zstd", asbytes=True)
    first = int.from_bytes(raw[:8], "little")
    streams = []
    for part in (raw[8 : 8 + first], raw[8 + first :]):
        table = ipc.open_stream(pa.py_buffer(part)).read_all()
        sink = pa.BufferOutputStream()
        options = ipc.IpcWriteOptions(compression="zstd")
        with ipc.new_stream(sink, table.schema, options=options) as writer:
            writer.write_table(table)
        streams.append(sink.getvalue().to_pybytes())
    first_format = len(streams[0]).to_bytes(8, "little") + streams[0] + streams[1]
    old, new = decode_segment(FORMAT_1, first_format), decode_segment(FORMAT, record.payload)
    assert [old.key(r) for r in range(len(old))] == [new.key(r) for r in range(len(new))]
    for name in ("start", "stop", "thread", "nbytes", "action_start", "action_row"):
        assert np.array_equal(getattr(old, name), getattr(new, name)), name
    with pytest.raises(ValueError, match="upgrade daskscope"):
        decode_segment("arrow-ipc-zstd/99", record.payload)


# -- the key filter -----------------------------------------------------------------------


def realistic(n: int, seed: int = 3) -> list[Any]:
    """``n`` executions as a run makes them: ``('inc-<token>', i)`` and
    ``('x-<token>', i, j)`` tuples, ``client.submit`` string keys, 15 % with a transfer
    before the compute, on 4 workers x 4 threads."""
    rnd = random.Random(seed)
    token = f"{rnd.getrandbits(128):032x}"
    workers = [f"tcp://10.0.0.{w}:3{w}417" for w in range(1, 5)]
    clock = [T0] * 16
    rows = []
    for i in range(n):
        lane = i % 16
        draw = rnd.random()
        if draw < 0.5:
            key, group = (f"inc-{token}", i), f"inc-{token}"
        elif draw < 0.9:
            key, group = (f"x-{token}", i // 100, i % 100), f"x-{token}"
        else:
            key, group = f"slow_inc-{rnd.getrandbits(128):032x}", "slow_inc"
        start = clock[lane] + rnd.random() * 1e-4
        startstops = []
        if rnd.random() < 0.15:
            took = rnd.uniform(1e-4, 2e-3)
            startstops.append({"action": "transfer", "start": start, "stop": start + took,
                               "source": workers[(lane // 4 + 1) % 4]})  # fmt: skip
            start += took
        stop = start + rnd.uniform(1e-4, 1e-2)
        startstops.append({"action": "compute", "start": start, "stop": stop})
        clock[lane] = stop
        rows.append(
            execution(key, group, group.split("-")[0], workers[lane // 4], 139_000 + lane % 4,
                      startstops, erred=False, nbytes=8 * rnd.randrange(1, 1 << 16),
                      computation="computation-1", span="span-1")
        )  # fmt: skip
    return rows


def test_the_key_filter_admits_every_key_and_refuses_most_others() -> None:
    rows = realistic(10_000)
    [record] = encode_segment("cluster", 0, rows)
    keys = {str(r[0]) for r in rows}
    assert all(key_filter_may_hold(record.key_filter, k) for k in keys)
    token = rows[0][1].split("-")[1]
    absent = [str((f"inc-{token}", i)) for i in range(20_000, 22_000)]
    absent += [str((f"x-{token}", i, 777)) for i in range(1_000)]
    admitted = sum(key_filter_may_hold(record.key_filter, k) for k in absent)
    print(f"false positives: {admitted / len(absent):.2%} of {len(absent)} absent keys")
    assert admitted / len(absent) < 0.03  # ~1 % expected at 10 bits and 7 hashes a key


#: a filter the first encoder (version 0: FNV-1a over a key's last 96 bytes) wrote for
#: FIRST_KEYS; stores hold such filters
FIRST_FILTER = bytes.fromhex("960000000000000092e55a2af60b7305c7d3cbb41cd266b7eb8816")
FIRST_KEYS = [str(("inc-3f2a", i)) for i in range(12)] + [
    "finalize-9b1c",
    "('x-77', 1, 2)",
    "slow_inc-0a1b2c3d",
]


#: the same keys' filter as version 1 wrote it (the polynomial hash summed the other way)
SECOND_FILTER = bytes.fromhex("96000000000000011d2f928a256f6cea7b254bc3f6c453cbf9e702")


def test_filters_of_earlier_encoders_are_still_read() -> None:
    absent = [str(("inc-3f2a", i)) for i in range(12, 1012)]
    for written in (FIRST_FILTER, SECOND_FILTER):
        assert all(key_filter_may_hold(written, k) for k in FIRST_KEYS)
        assert sum(key_filter_may_hold(written, k) for k in absent) < 50
    assert key_filter_may_hold(b"", "anything")  # no filter: the segment may hold it


# -- size ---------------------------------------------------------------------------------


def test_a_realistic_segment_stays_within_32_bytes_a_task() -> None:
    rows = realistic(50_000)
    [record] = encode_segment("cluster", 0, rows)
    stored = len(record.payload) + len(record.key_filter) + len(record.summary)
    per_task = stored / len(rows)
    print(
        f"bytes per execution: {per_task:.2f} (payload {len(record.payload) / len(rows):.2f},"
        f" filter {len(record.key_filter) / len(rows):.2f},"
        f" summary {len(record.summary) / len(rows):.2f})"
    )
    # the same input encodes to the same bytes: a property of the format, not of timing
    assert per_task <= 32


def test_keys_with_lone_surrogates_are_kept_escaped_as_the_store_keeps_text() -> None:
    """Dask allows any str in a key; UTF-8 cannot hold a lone surrogate. The segment keeps
    such a key escaped (daskscope.text), as every table does, instead of failing whole."""
    rows = [
        ("plain-\ud800key", "plain", "plain", "tcp://w:1", 1, 1.0, 2.0, None, False, 8, "c",
         None, None, None),
        (("inc-0f3a", 1), "inc-0f3a", "inc", "tcp://w:1", 1, 1.5, 2.5, None, False, 8, "c",
         None, None, None),
    ]  # fmt: skip
    record = encode_segment("cluster-1", 0, rows)[0]
    seg = decode_segment(record.format, record.payload)
    assert [seg.key(i) for i in range(len(seg))] == [
        escape_text("plain-\ud800key"),
        "('inc-0f3a', 1)",
    ]
    assert key_filter_may_hold(record.key_filter, "plain-\ud800key")
    assert key_filter_may_hold(record.key_filter, escape_text("plain-\ud800key"))


def test_a_repeated_report_of_an_execution_is_kept_once() -> None:
    """A worker asked for a key it still holds re-sends the execution it ran (same key,
    worker and startstops, another computation): kept once, within a segment and across
    segments; an equal start of another key, or of the key on another worker, is
    another execution."""
    rows = realistic(300)
    again = [(*row[:10], "computation-2", *row[11:]) for row in rows[100:110]]
    other_key = (("other", 1), *rows[5][1:])
    other_worker = (*rows[6][:3], "tcp://10.0.0.9:1", *rows[6][4:])
    repeats = RepeatFilter(capacity=1_000)
    first = encode_segment("c", 0, [*rows[:200], *again[:4], other_key, other_worker], repeats)
    assert sum(r.executions for r in first) == 202
    second = encode_segment("c", 1, [*again[4:], *rows[200:]], repeats)
    assert sum(r.executions for r in second) == 100
    # every original execution is there once, with the computation that ran it
    kept = [decode_segment(r.format, r.payload) for r in first + second]
    keys = Counter(seg.key(i) for seg in kept for i in range(len(seg)))
    assert keys[str(rows[100][0])] == 1 and keys[str(rows[6][0])] == 2
    assert keys[str(("other", 1))] == 1 and len(keys) == 301
    computations = {seg.names[int(c)] for seg in kept for c in seg.computation}
    assert computations == {"computation-1"}
    # only repeats: no segment at all
    assert encode_segment("c", 2, again[:3], repeats) == []
    # a repeat older than the filter's memory is kept as another execution
    short = RepeatFilter(capacity=10)
    encode_segment("c", 0, rows[:20], short)
    encode_segment("c", 1, rows[20:60], short)
    encode_segment("c", 2, rows[60:100], short)
    assert sum(r.executions for r in encode_segment("c", 3, rows[:1], short)) == 1
