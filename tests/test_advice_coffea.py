"""The Coffea advice rules (issue 14) on real coffea runs over NanoAOD-like ROOT files
written here: small chunks over a file of one large basket (each chunk reads the whole
basket again) trigger both; chunks aligned with small baskets, each busy for over a
second, are the control. Checked against the files' sizes and uproot's byte counts; the
advice shown by the API's run route."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("coffea")
uproot = pytest.importorskip("uproot")
ak = pytest.importorskip("awkward")
np = pytest.importorskip("numpy")

from daskscope import MetricsCollector, track_metrics  # noqa: E402
from daskscope.analysis.advice import Advice, AdviceFacts, advise  # noqa: E402
from daskscope.analysis.advice import resources as r  # noqa: E402
from daskscope.store import open_store  # noqa: E402
from daskscope.store.runs import run_detail  # noqa: E402
from daskscope.views.advice_resources import resource_extra  # noqa: E402
from webutil import call  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Missing cross-reference:RuntimeWarning")

ENTRIES = 4000
COFFEA_RULES = {"read-amplification", "chunks-too-small"}


def write_nanoaod(path: Path, *, basket: int) -> None:
    """``ENTRIES`` events of jets, written ``basket`` entries at a time (one basket per
    branch per write)."""
    rng = np.random.default_rng(7)
    counts = rng.integers(0, 6, ENTRIES)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    values = {
        k: rng.normal(30, 10, int(offsets[-1])).astype("f4") for k in ("pt", "eta", "phi", "mass")
    }

    def jets(lo: int, hi: int) -> Any:
        sl = slice(int(offsets[lo]), int(offsets[hi]))
        return ak.zip({k: ak.unflatten(v[sl], counts[lo:hi]) for k, v in values.items()})

    with uproot.recreate(path) as f:
        f.mktree(
            "Events",
            {"run": "u4", "luminosityBlock": "u4", "event": "u8", "Jet": jets(0, 1).type},
            field_name=lambda o, i: i if o == "" else f"{o}_{i}",
            counter_name=lambda c: "n" + c,
        )
        for lo in range(0, ENTRIES, basket):
            hi = min(ENTRIES, lo + basket)
            f["Events"].extend(
                {
                    "run": np.ones(hi - lo, "u4"),
                    "luminosityBlock": np.ones(hi - lo, "u4"),
                    "event": np.arange(lo, hi, dtype="u8"),
                    "Jet": jets(lo, hi),
                }
            )


def make_processor(busy_s: float) -> Any:
    from coffea import processor

    class JetPt(processor.ProcessorABC):
        @track_metrics
        def process(self, events: Any) -> dict[str, Any]:
            # pure-Python work on the CPU (not a sleep) for busy_s of wall time
            end, n = time.perf_counter() + busy_s, 0
            while time.perf_counter() < end:
                n += 1
            return {"events": len(events), "jets": int(ak.sum(events.Jet.pt > 30)) + 0 * n}

        def postprocess(self, accumulator: Any) -> Any:
            return accumulator

    return JetPt()


def run_coffea(path: Path, url: str, *, chunksize: int, busy_s: float) -> tuple[str, dict]:
    from coffea import processor
    from coffea.nanoevents import NanoAODSchema

    proc = make_processor(busy_s)
    runner = processor.Runner(
        executor=processor.IterativeExecutor(),
        schema=NanoAODSchema,
        chunksize=chunksize,
        savemetrics=True,
    )
    with MetricsCollector(processor_instance=proc, database=url) as collector:
        out, report = runner({"sample": [str(path)]}, proc, treename="Events")
        collector.set_coffea_report(report)
    assert out["events"] == ENTRIES
    return collector.wait_stored(), report


def run_facts(url: str, run_id: str) -> AdviceFacts:
    with open_store(url) as store:
        return AdviceFacts(
            scope="run",
            detail={},
            run=run_detail(store, run_id),
            extra=resource_extra(store, None, None, run_id),
        )


def ours(found: list[Advice]) -> dict[str, Advice]:
    out = {a.rule: a for a in found if a.rule in COFFEA_RULES}
    assert len(out) == sum(a.rule in COFFEA_RULES for a in found)  # one each at most
    return out


def evidence(advice: Advice, label: str) -> Any:
    (value,) = [e.value for e in advice.evidence if e.label == label]
    return value


def test_small_chunks_over_a_large_basket_trigger_both(tmp_path: Path) -> None:
    path = tmp_path / "one_basket.root"
    write_nanoaod(path, basket=ENTRIES)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    run_id, report = run_coffea(path, url, chunksize=250, busy_s=0.0)
    facts = run_facts(url, run_id)
    assert facts.extra["file_sizes"] == {str(path): os.path.getsize(path)}
    found = ours(advise(facts))
    assert set(found) == COFFEA_RULES

    reads = found["read-amplification"]
    assert reads.subject == str(path)
    # ground truth: uproot's own count of requested bytes, and the file on disk
    assert evidence(reads, "bytes read from it") == report["bytesread"]
    assert evidence(reads, "file size") == os.path.getsize(path)
    ratio = report["bytesread"] / os.path.getsize(path)
    assert evidence(reads, "bytes read ÷ file size") == pytest.approx(ratio)
    assert ratio > r.READ_AMPLIFICATION
    assert evidence(reads, "chunks that read it") == report["chunks"] == ENTRIES // 250

    small = found["chunks-too-small"]
    walls = [c["wall_s"] for c in facts.run["chunks"]]  # type: ignore[index]
    assert evidence(small, "chunks") == len(walls) == ENTRIES // 250
    assert evidence(small, "median chunk wall time") == pytest.approx(float(np.median(walls)))
    assert evidence(small, "median chunk wall time") < r.CHUNK_MIN_SECONDS
    assert evidence(small, "median events per chunk") == 250

    # the same advice through the API's run route
    from daskscope.web import create_app

    with open_store(url) as store:
        response = call(create_app(store), "GET", f"/api/v1/runs/{run_id}/advice")
    assert response.status_code == 200, response.text
    shown = {a["rule"]: a for a in response.json()["advice"]}
    assert set(shown) >= COFFEA_RULES
    texts = {e["label"]: e["value_text"] for e in shown["chunks-too-small"]["evidence"]}
    assert texts["chunks"] == str(ENTRIES // 250)


def test_chunks_aligned_with_baskets_and_long_enough_get_no_coffea_advice(
    tmp_path: Path,
) -> None:
    path = tmp_path / "small_baskets.root"
    write_nanoaod(path, basket=250)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    run_id, report = run_coffea(path, url, chunksize=1000, busy_s=1.1)
    facts = run_facts(url, run_id)
    assert report["chunks"] == 4 >= r.CHUNK_MIN_COUNT  # enough chunks to be judged
    assert report["bytesread"] <= os.path.getsize(path)  # each basket read once
    assert min(c["wall_s"] for c in facts.run["chunks"]) >= r.CHUNK_MIN_SECONDS  # type: ignore[index]
    assert ours(advise(facts)) == {}
    with open_store(url) as store:
        from daskscope.web import create_app

        response = call(create_app(store), "GET", f"/api/v1/runs/{run_id}/advice")
    assert response.status_code == 200, response.text
    assert not COFFEA_RULES & {a["rule"] for a in response.json()["advice"]}
