"""daskscope in a notebook: recorded clusters, workflow runs and comparisons shown as
HTML and text (``daskscope.cluster``, ``.run``, ``.compare``), a collector that shows
itself while it runs, and a stored thing loaded as plain data and frames
(``daskscope.load``). Presentation: it renders the views, as the CLI and the pages do
(docs/notebook.md)."""

from __future__ import annotations

from daskscope.notebook.loading import Measurement, NotRecorded, Table, load
from daskscope.notebook.objects import Cluster, Comparison, Run, cluster, compare, run

__all__ = [
    "Cluster",
    "Comparison",
    "Measurement",
    "NotRecorded",
    "Run",
    "Table",
    "cluster",
    "compare",
    "load",
    "run",
]
