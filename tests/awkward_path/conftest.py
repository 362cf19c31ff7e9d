"""Fixtures of the dask-awkward path: NanoAOD-like ROOT files written here and one small
process cluster for the whole folder.

These tests run in .venv-awkward (``./dev test`` builds it: coffea[dask-awkward] pins an
older dask than the main environment); the main suite does not collect this folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nanoaod_files import ENTRIES, STEPS, write_nanoaod


@pytest.fixture(scope="session")
def root_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("dask_awkward", reason="run in .venv-awkward: ./dev test tests/awkward")
    folder = tmp_path_factory.mktemp("nanoaod")
    paths = {}
    for seed, (name, n) in enumerate(ENTRIES.items()):
        write_nanoaod(folder / name, n, seed)
        paths[name] = folder / name
    return paths


@pytest.fixture(scope="session")
def fileset(root_files: dict[str, Path]) -> dict[str, Any]:
    """coffea's fileset with explicit entry ranges (what coffea's preprocess makes)."""
    return {
        "ttbar": {
            "files": {
                str(root_files["a.root"]): {"object_path": "Events", "steps": STEPS["a.root"]}
            }
        },
        "wjets": {
            "files": {
                str(root_files["b.root"]): {"object_path": "Events", "steps": STEPS["b.root"]}
            }
        },
    }


@pytest.fixture(scope="session")
def client() -> Iterator[Any]:
    # One process cluster for the folder: a new one costs 5-9 s on two cores
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client
