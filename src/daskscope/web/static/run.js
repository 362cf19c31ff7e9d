// Workflow run page: the per-chunk chart (wall time as bars, events as points) and the
// chunk table's order, which lives in the URL (?chunks_by=wall_s&chunks_order=desc).
"use strict";
(() => {
  const data = ds.data();
  const chunks = data.chunks;

  function chart() {
    const div = document.getElementById("chunk-chart");
    if (!div || !chunks.length) return;
    const x = chunks.map((c) => c.chunk_index);
    const failed = chunks.map((c) => c.status !== "ok");
    const hover = chunks.map((c) => [
      `chunk ${c.chunk_index}${c.attempt && c.attempt > 1 ? ` (attempt ${c.attempt})` : ""} · ${ds.text(c.status)}`,
      `wall ${ds.duration(c.wall_s)} · CPU ${ds.duration(c.cpu_s)}`,
      `events ${ds.count(c.events)} · read ${ds.bytes(c.bytes_read)}`,
      c.worker ? `worker ${ds.text(c.worker)}` : null,
    ].filter(Boolean).join("<br>"));
    const events = chunks.some((c) => c.events !== null);
    const traces = [{
      type: "bar", name: "wall time", x, y: chunks.map((c) => c.wall_s),
      marker: { color: failed.map((f) => (f ? "#c62828" : "#4c78a8")) },
      text: hover, hovertemplate: "%{text}<extra></extra>", textposition: "none",
    }];
    if (events) {
      traces.push({
        type: "scatter", mode: "markers", name: "events", x, y: chunks.map((c) => c.events),
        yaxis: "y2", marker: { color: "#f58518", size: 8, symbol: "diamond" },
        text: hover, hovertemplate: "%{text}<extra></extra>",
      });
    }
    const maxWall = Math.max(...chunks.map((c) => c.wall_s || 0));
    const layout = ds.layout({
      margin: { l: 10, r: 10, t: 30, b: 10 },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
      hovermode: "closest",
      xaxis: ds.axis("chunk (#)", { type: chunks.length > 60 ? "linear" : "category", tickangle: 0 }),
      yaxis: ds.axis("wall time", ticks(maxWall, ds.duration)),
      showlegend: true,
    });
    if (events) {
      const maxEvents = Math.max(...chunks.map((c) => c.events || 0));
      layout.yaxis2 = ds.axis("events", {
        overlaying: "y", side: "right", showgrid: false, zeroline: false, ...ticks(maxEvents, ds.count),
      });
    }
    // a short tool bar, so that it leaves the legend readable on a phone
    const config = { ...ds.config, modeBarButtonsToRemove: ["toImage", "select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d", "toggleSpikelines", "hoverClosestCartesian", "hoverCompareCartesian"] };
    Plotly.newPlot(div, traces, layout, config).then(() => { div.dataset.ready = "1"; });
  }

  // Ticks from 0 to max at 1, 2 or 5 times a power of ten (a "2.5 ms" step would read
  // "3 ms" once rounded), each written by fmt; the range leaves room above the top
  function ticks(max, fmt) {
    const top = Math.max(max, 1e-6);
    const pow = 10 ** Math.floor(Math.log10(top / 4));
    const step = [1, 2, 5, 10].map((m) => m * pow).find((m) => top / m <= 5);
    const tickvals = [];
    for (let v = 0; v <= top + step * 0.01; v += step) tickvals.push(Number(v.toPrecision(6)));
    return { tickmode: "array", tickvals, ticktext: tickvals.map(fmt), range: [0, top * 1.1] };
  }

  // -- the chunk table: sort by a column (buttons: Enter and Space), order in the URL
  const table = document.getElementById("run-chunks");
  const TEXT = new Set(["status", "dataset", "filename", "worker"]);
  function sortTable() {
    if (!table) return;
    const key = ds.state.get("chunks_by", "chunk_index");
    const order = ds.state.get("chunks_order", "asc");
    const byIndex = new Map(chunks.map((c) => [String(c.chunk_index), c]));
    const rows = [...table.tBodies[0].rows];
    const value = (row) => byIndex.get(row.dataset.index)[key];
    rows.sort((a, b) => {
      const [va, vb] = [value(a), value(b)];
      if (va === vb) return Number(a.dataset.index) - Number(b.dataset.index);
      if (va === null || va === undefined) return 1; // not measured: last either way
      if (vb === null || vb === undefined) return -1;
      const cmp = TEXT.has(key) ? String(va).localeCompare(String(vb)) : va - vb;
      return order === "desc" ? -cmp : cmp;
    });
    table.tBodies[0].append(...rows);
    for (const th of table.tHead.rows[0].cells) {
      if (th.dataset.key === key) th.setAttribute("aria-sort", order === "desc" ? "descending" : "ascending");
      else th.removeAttribute("aria-sort");
    }
  }
  if (table) {
    table.tHead.addEventListener("click", (event) => {
      const th = event.target.closest("th[data-key]");
      if (!th) return;
      const key = th.dataset.key;
      const current = ds.state.get("chunks_by", "chunk_index");
      const order = current === key
        ? (ds.state.get("chunks_order", "asc") === "asc" ? "desc" : "asc")
        : (TEXT.has(key) || key === "chunk_index" ? "asc" : "desc");
      const first = key === "chunk_index" && order === "asc";
      ds.state.set({ chunks_by: first ? null : key, chunks_order: first ? null : order });
      sortTable();
    });
    ds.state.onChange(sortTable);
    sortTable();
  }
  chart();
})();
