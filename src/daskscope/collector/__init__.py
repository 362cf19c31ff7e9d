"""The scheduler side of daskscope: the recorder (a SchedulerPlugin) and what it writes to.

``plugin`` takes Dask's hooks and the RPC handlers and forwards them to the parts:
``tracking`` (task groups and computations), ``spans``, ``accounting`` (capacity, peaks,
totals), ``events``, ``roster`` (workers coming, going, sampled), ``lifecycle`` (why a
worker left), ``profiles``, ``flushing`` (buffer, writer thread, retries) and the sinks
(the ``sink.Sink`` protocol; ``store_sink``, ``http_sink``, ``memory_sink``), one made
by ``destination.sink_for``. ``dask_adapter`` is the one module that knows Dask's private
names; ``snapshot`` and ``workers`` turn Dask's objects into records.
"""
