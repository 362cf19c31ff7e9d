"""The command line in the test's own process, through click's CliRunner: a new Python
for each command imports dask, SQLAlchemy and plotly again, seconds of CPU each time
(test_cli.py still runs ``daskscope demo`` as a process of its own, as people do)."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

from click.testing import CliRunner

from daskscope.cli.main import cli


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``daskscope ARGS...``: its exit code, standard output and standard error, as a
    process would give them. In a thread of its own: a test driving Chromium has
    Playwright's event loop running in its thread, and some commands run their own."""
    with ThreadPoolExecutor(1) as thread:
        result = thread.submit(CliRunner().invoke, cli, list(args), catch_exceptions=False).result()
    return subprocess.CompletedProcess(
        ["daskscope", *args], result.exit_code, result.stdout, result.stderr
    )
