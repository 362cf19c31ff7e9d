"""The metric catalogue: complete entries, units the formatter knows, and docs/metrics.md
written from it (so the two cannot drift)."""

from __future__ import annotations

import re
from pathlib import Path

import distributed
import pytest

from daskscope import catalogue, format
from daskscope.analysis import cluster_statistics
from daskscope.catalogue import FIGURES, SCOPES, figure, figures
from daskscope.catalogue.__main__ import main
from daskscope.catalogue.docs import TABLES, render_docs, table

DOCS = Path(__file__).parents[1] / "docs" / "metrics.md"


def test_every_figure_is_complete_and_in_a_known_unit() -> None:
    assert len(FIGURES) > 100
    for fid, f in FIGURES.items():
        assert fid == f"{f.scope}.{f.key}"
        assert f.scope in SCOPES
        assert f.label.strip() and f.formula.strip() and f.source.strip(), fid
        assert f.unit in format.UNITS, f"{fid}: unit {f.unit!r} unknown to the formatter"
        assert f.better in ("higher", "lower", None)


def test_every_scope_has_figures() -> None:
    for scope in SCOPES:
        assert figures(scope), scope
    assert [f.key for f in figures("span")][:3] == ["enqueued_at", "started_at", "stopped_at"]


def test_lookup_by_id_or_scope_and_key() -> None:
    assert figure("cluster.duration_s") is figure("cluster", "duration_s")
    assert figure("cluster", "cost.total").unit == "currency"
    with pytest.raises(KeyError, match=r"no figure 'cluster.nope'.*'cluster':.*duration_s"):
        figure("cluster", "nope")
    with pytest.raises(KeyError, match="scopes"):
        figure("galaxy.mass")
    with pytest.raises(ValueError, match="unknown scope 'galaxy'"):
        figures("galaxy")


def test_text_formats_in_the_figure_unit() -> None:
    assert figure("cluster.utilisation").text(0.5) == "50.0 %"
    assert figure("cluster.duration_s").text(754) == "12 min 34 s"
    assert figure("cluster.cost.total").text(12.3, currency="EUR") == "12.30 EUR"
    assert figure("cluster.cost.total").text(12.3) == "12.30 USD"
    assert figure("workflow.speedup").text(3.456) == "3.46\u00d7"
    assert figure("workflow.data_rate_gbps").text(0.01234) == "0.0123 Gbit/s"
    assert figure("worker.net_read_bps").text(1536) == "1.5 KiB/s"
    assert figure("workflow.cores").text(None) == format.MISSING


def test_the_keys_are_those_of_the_data() -> None:
    # cluster_statistics returns figures under their catalogued keys (nested for cost)
    row = {"started_at": 0.0, "stopped_at": 3600.0, "core_seconds": 7200.0,
           "compute_seconds": 3600.0, "memory_limit_byte_seconds": 2.0**30 * 3600}  # fmt: skip
    stats = cluster_statistics(row, {"per_core_hour": 0.1, "per_gib_hour": 0.01})
    keys = {k for k, v in stats.items() if not isinstance(v, dict)}
    keys |= {f"cost.{k}" for k in stats["cost"] if k not in ("currency", "account")}
    assert keys <= {f.key for f in figures("cluster")}


def test_activities_are_described() -> None:
    names = [a.name for a in catalogue.ACTIVITIES]
    assert len(names) == len(set(names))
    assert {"thread-cpu", "thread-noncpu", "executor", "disk-read", "compress"} <= set(names)
    assert all(a.meaning and a.units for a in catalogue.ACTIVITIES)
    assert "made available" in catalogue.SPAN_FIGURES_NOTE
    described = catalogue.activity("thread-noncpu")
    assert described is not None and "GIL" in described.meaning
    assert catalogue.activity("my-custom-label") is None  # the set is open


def _emitted_by_dask() -> set[str]:
    """Every fine-metric label the installed distributed's code emits: its meters and
    digests, its limiters' labels, the coarse times of a stimulus (failed, cancelled,
    ...), "other" and the spans' idle; a P2P label also without its "p2p-", as the
    shuffle's own context receives it."""
    found: set[str] = {"other", "idle or other spans"}
    patterns = [
        r'context_meter\.(?:meter|digest_metric)\(\s*"([^"]+)"',
        r'metrics_label="([^"]+)"',
        r'coarse_time = "([^"]+)"',
    ]
    for path in Path(distributed.__file__).parent.rglob("*.py"):
        # the meter's own module holds examples only (dumps, network-write)
        if "tests" in path.parts or path.name == "metrics.py":
            continue
        text = path.read_text(encoding="utf-8")
        for pattern in patterns:
            found |= set(re.findall(pattern, text))
    return found | {n.removeprefix("p2p-") for n in found}


def test_every_activity_dask_emits_has_a_colour_of_its_own() -> None:
    emitted = _emitted_by_dask()
    assert {"p2p-get-output-cpu", "get-output-noncpu", "send", "shards", "idle"} <= emitted
    catalogued = {a.name for a in catalogue.ACTIVITIES}
    assert emitted <= catalogued, sorted(emitted - catalogued)
    colours = catalogue.ACTIVITY_COLOURS
    assert all(re.fullmatch("#[0-9a-f]{6}", c) for c in colours.values())
    assert len(set(colours.values())) == len(colours)  # none shared
    # the task stream's actions: the same colour as the activity of the same name
    for a in catalogue.TASK_ACTIONS:
        assert colours[a.name] == a.colour
        if catalogue.activity(a.name) is not None:
            assert a.colour == next(x.colour for x in catalogue.ACTIVITIES if x.name == a.name)
    reserve = set(catalogue.RESERVE)
    assert len(reserve) == len(catalogue.RESERVE) and not reserve & set(colours.values())


def test_committed_docs_equal_the_generated_tables() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert render_docs(text) == text, (
        "docs/metrics.md is stale: python -m daskscope.catalogue --write-docs docs/metrics.md"
    )
    for f in FIGURES.values():
        assert f"(`{f.key}`)" in table(f.scope)
    for name in TABLES:
        assert table(name) in text


def test_docs_need_every_table_once() -> None:
    with pytest.raises(ValueError, match=r"catalogue:cluster:begin.*found 0"):
        render_docs("no markers here")


def test_write_docs_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "metrics.md"
    text = DOCS.read_text(encoding="utf-8")
    stale.write_text(text.replace(table("span"), "| old |"), encoding="utf-8")
    assert main(["--check", str(stale)]) == 1
    assert main(["--write-docs", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == text
    assert main(["--check", str(stale)]) == 0
    assert "written" in capsys.readouterr().out
