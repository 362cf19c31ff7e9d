"""Exports: a recorded cluster in other tools' file formats, one module per format.

- :mod:`~daskscope.export.speedscope`: stored profiles as speedscope JSON;
- :mod:`~daskscope.export.otlp`: the cluster, its computations and Dask spans as
  OpenTelemetry traces (OTLP protobuf or JSON);
- :mod:`~daskscope.export.perfetto`: the task timeline as Chrome trace-event JSON, which
  ui.perfetto.dev opens;
- :mod:`~daskscope.export.perfetto_proto`: the same as Perfetto's protobuf trace.

They read the store, never Dask.
"""
