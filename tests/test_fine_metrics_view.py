"""Fine metrics of a span's subtree on hand-built rows: spans keep their metrics
exclusive, so a subtree's figure is the sum over its spans, whatever the depth."""

from __future__ import annotations

import pytest

from daskscope.analysis import fine_metrics_table
from daskscope.analysis.cluster import subtree_ids
from daskscope.catalogue import ACTIVITY_COLOURS, RESERVE, activity_colours

SPANS = [
    {"span_id": "root", "parent_span_id": None, "name": ["load"]},
    {"span_id": "a", "parent_span_id": "root", "name": ["load", "read"]},
    {"span_id": "a1", "parent_span_id": "a", "name": ["load", "read", "parse"]},
    {"span_id": "b", "parent_span_id": "root", "name": ["load", "write"]},
    {"span_id": "other", "parent_span_id": None, "name": ["other"]},
]


def metric(span: str, value: float, activity: str = "thread-cpu", unit: str = "seconds") -> dict:
    return {"span_id": span, "context": "execute", "prefix": "inc", "activity": activity,
            "unit": unit, "value": value}  # fmt: skip


METRICS = [metric("root", 1.0), metric("a", 2.0), metric("a1", 4.0), metric("b", 8.0),
           metric("other", 16.0), metric("a1", 32.0, "disk-write", "bytes")]  # fmt: skip


def value(rows: list[dict], activity: str = "thread-cpu") -> float:
    return sum(r["value"] for r in rows if r["activity"] == activity)


def test_subtree_ids_follow_the_parents_at_any_depth() -> None:
    assert subtree_ids(SPANS, "root") == {"root", "a", "a1", "b"}
    assert subtree_ids(SPANS, "a") == {"a", "a1"}
    assert subtree_ids(SPANS, "a1") == {"a1"}
    assert subtree_ids(SPANS, "nope") == set()
    chain = [{"span_id": str(i), "parent_span_id": str(i - 1) if i else None} for i in range(5000)]
    assert len(subtree_ids(chain, "0")) == 5000  # no recursion limit


@pytest.mark.parametrize(
    ("span", "seconds"), [("root", 15.0), ("a", 6.0), ("a1", 4.0), ("b", 8.0), (None, 31.0)]
)
def test_a_span_subtree_sums_its_spans(span: str | None, seconds: float) -> None:
    rows = fine_metrics_table(METRICS, spans=SPANS, span_id=span)
    assert value(rows) == seconds
    assert value(rows, "disk-write") == (32.0 if span in ("root", "a", "a1", None) else 0.0)


def test_span_and_tag_together_and_the_spans_needed() -> None:
    rows = fine_metrics_table(METRICS, spans=SPANS, span_id="root", tag="read")
    assert value(rows) == 6.0
    with pytest.raises(ValueError, match="needs the spans"):
        fine_metrics_table(METRICS, span_id="root")


def test_activity_colours_are_fixed_and_unknown_ones_never_shared() -> None:
    known = ["thread-cpu", "p2p-get-output-cpu", "send", "shards", "idle"]
    unknown = [f"label-{i:02d}" for i in range(40)]  # past the reserve's 21 too
    colours = activity_colours([*unknown, *known])
    assert {n: colours[n] for n in known} == {n: ACTIVITY_COLOURS[n] for n in known}
    assert len(set(colours.values())) == len(colours)  # none shared on one page
    assert [colours[n] for n in unknown[: len(RESERVE)]] == list(RESERVE)  # in order
    # deterministic: the same names, in any order, the same colours
    assert activity_colours(reversed([*known, *unknown])) == colours
