"""The task log: every task execution Dask reports, kept and read back (issue 13).

One path, in the order the modules take it:

1. **The hook's tuple** (:mod:`~daskscope.tasklog.record`, capture). The scheduler
   plugin's transition hook hands each execution to :class:`~.record.TaskLog`, which
   appends one tuple of what Dask gave it (:data:`~.segments.Execution`: no record, no
   text, no pyarrow on the event loop) and seals a buffer every so many executions;
   :mod:`~daskscope.tasklog.repeats` drops a repeated report of an execution.
2. **A segment** (:mod:`~daskscope.tasklog.segments`, pure). The recorder's writer
   thread encodes a sealed buffer column-wise into a
   :class:`~daskscope.model.TaskSegmentRecord` (two Arrow IPC streams under zstd, built
   from numpy buffers by :mod:`~daskscope.tasklog.arrow`; keys kept as their group's
   name and the rest, with a filter of them, by :mod:`~daskscope.tasklog.keys`), which
   the store keeps as one row of ``task_segments``.
3. **Its summary** (:mod:`~daskscope.tasklog.summaries`, pure). Beside each segment:
   busy seconds per worker thread and activity in a few hundred bins of its time range,
   and each group's slowest executions, so a zoomed-out read need not decode it.
4. **The reads** (store layer: they take the store's
   :class:`~daskscope.store.database.Database`, and are the
   :class:`~daskscope.store.Store`'s methods: ``store.timeline_window(cid)``).
   :mod:`~daskscope.tasklog.reads` finds, decodes and caches (in the store's
   ``kept``) the segments a read needs;
   :mod:`~daskscope.tasklog.window` answers a window of time (every execution, or bins
   per thread summed by :mod:`~daskscope.tasklog.bins`);
   :mod:`~daskscope.tasklog.lookups` a key's executions, the slowest, the transfers and
   the extent; :mod:`~daskscope.tasklog.scan` walks every execution in order for the
   exports. All of them return the one form of :mod:`~daskscope.tasklog.forms`
   (:class:`~.forms.TaskExecution` with its :class:`~.forms.TaskAction` s, a
   :class:`~.forms.TimelineWindow` whose :class:`~.forms.Lane` s hold their bins as
   columns), which the view model (:mod:`daskscope.views.timeline`), the advice and the
   exports read; :mod:`~daskscope.tasklog.timeline` is the busy/idle arithmetic over
   its intervals (pure).

Layers (tests/test_layers.py): ``record`` is capture, the reads are store, the rest is
foundation that any layer may import. This module imports nothing, so that the
scheduler loading ``record`` loads no store.
"""
