"""NanoAOD-like ROOT files for the dask-awkward tests (imported by conftest and tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: file -> entries written; each file is cut into these entry ranges (coffea "steps")
ENTRIES = {"a.root": 1300, "b.root": 700}
STEPS = {"a.root": [[0, 500], [500, 1000], [1000, 1300]], "b.root": [[0, 400], [400, 700]]}


def write_nanoaod(path: Path, n: int, seed: int) -> None:
    """``n`` events with run/luminosityBlock/event and a jagged Jet collection, written
    in several baskets, with NanoAOD branch naming."""
    import awkward as ak
    import numpy as np
    import uproot

    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 5, n)
    total = int(counts.sum())
    values = {
        "pt": rng.exponential(30, total).astype("f4"),
        "eta": rng.normal(0, 2, total).astype("f4"),
        "phi": rng.uniform(-3, 3, total).astype("f4"),
        "mass": rng.uniform(0, 10, total).astype("f4"),
    }
    offsets = np.concatenate([[0], np.cumsum(counts)])

    def jets(start: int, stop: int) -> Any:
        lo, hi = int(offsets[start]), int(offsets[stop])
        return ak.zip({k: ak.unflatten(v[lo:hi], counts[start:stop]) for k, v in values.items()})

    with uproot.recreate(path) as f:
        f.mktree(
            "Events",
            {"run": "u4", "luminosityBlock": "u4", "event": "u8", "Jet": jets(0, 1).type},
            field_name=lambda o, i: i if o == "" else f"{o}_{i}",
            counter_name=lambda c: "n" + c,
        )
        for start in range(0, n, 250):
            stop = min(n, start + 250)
            f["Events"].extend(
                {
                    "run": np.ones(stop - start, "u4"),
                    "luminosityBlock": np.ones(stop - start, "u4"),
                    "event": np.arange(start, stop, dtype="u8"),
                    "Jet": jets(start, stop),
                }
            )
