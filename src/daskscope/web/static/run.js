// Workflow run page: per-chunk wall time and events.
"use strict";
(() => {
  const data = ds.data();
  const div = document.getElementById("chunk-chart");
  if (!div || !data.chunks.length) return;
  const x = data.chunks.map((c) => c.chunk_index);
  Plotly.newPlot(div, [
    { type: "bar", name: "wall seconds", x, y: data.chunks.map((c) => c.wall_s) },
    { type: "scatter", mode: "markers", name: "events", x, y: data.chunks.map((c) => c.events), yaxis: "y2" },
  ], ds.layout({
    xaxis: { title: "chunk" }, yaxis: { title: "wall seconds" },
    yaxis2: { title: "events", overlaying: "y", side: "right" },
  }), ds.config).then(() => { div.dataset.ready = "1"; });
})();
