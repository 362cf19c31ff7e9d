"""Exports: a recorded cluster in other tools' file formats, renderers of one view.

Each format is an :class:`~daskscope.export.exporter.Exporter` (name, media type, file
extension, binary or not, ``render(view)``) of an
:class:`~daskscope.views.export.ExportView`, listed in
:mod:`~daskscope.export.registry`, over which ``daskscope export`` and the
``/api/v1/clusters/ID/export/NAME`` routes loop:

- :mod:`~daskscope.export.perfetto`: the task timeline as Chrome trace-event JSON, which
  ui.perfetto.dev opens;
- :mod:`~daskscope.export.perfetto_proto`: the same as Perfetto's protobuf trace;
- :mod:`~daskscope.export.speedscope`: stored profiles as speedscope JSON;
- :mod:`~daskscope.export.otlp`: the cluster, its computations and Dask spans as
  OpenTelemetry traces (OTLP protobuf or JSON; protobuf also sent to a collector).

They read what the view reads, never the store or Dask themselves.
"""
