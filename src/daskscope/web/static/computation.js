// The computation page: the task-group graph with the critical path drawn over it, and
// the what-if chart (estimated wall time against worker threads, the measured point
// marked). Data: the page's JSON (the figures of views/critical_path.py the script draws)
// and the graph's route.
"use strict";
(() => {
  const d = ds.data();
  const PATH = "#d84315";

  // The group graph with the path over it, folded past 100 groups (static/group_graph.js):
  // nodes holding groups of the path in its colour, its steps as thick arrows
  function drawGraph() {
    const div = document.getElementById("path-graph");
    window.dsGroupGraph.draw(div, {
      url: d.graph_url, path: true,
      tools: document.getElementById("path-graph-tools"),
      note: document.getElementById("path-graph-note"),
    }).then((g) => { if (!g.nodes.length) div.closest(".graph-frame").hidden = true; });
  }

  // Ticks for seconds at 1, 2 or 5 times a power of ten, labelled by format.py's rules
  function secondTicks(top) {
    const t = Math.max(top, 1e-6);
    const pow = 10 ** Math.floor(Math.log10(t / 4));
    const step = [1, 2, 5, 10].map((m) => m * pow).find((m) => t / m <= 5);
    const vals = [];
    for (let v = 0; v <= t * 1.1; v += step) vals.push(Number(v.toPrecision(6)));
    return { tickmode: "array", tickvals: vals, ticktext: vals.map(ds.duration), range: [0, t * 1.12] };
  }

  function drawWhatIf() {
    const div = document.getElementById("whatif");
    if (!d.estimates.length) { div.hidden = true; return; }
    const xs = d.estimates.map((e) => e.threads);
    const ys = d.estimates.map((e) => e.wall_s);
    const top = Math.max(...ys, d.measured_wall_s || 0);
    const last = Math.max(...xs, d.measured_threads || 1, 2);
    const traces = [
      { type: "scatter", mode: "lines+markers", name: "estimated wall time", x: xs, y: ys,
        line: { color: "#3b7dd8" }, marker: { size: 8 },
        hovertemplate: "%{text}<extra></extra>",
        text: d.estimates.map((e) => `${ds.count(e.threads)} threads: ${ds.duration(e.wall_s)} estimated`) },
      { type: "scatter", mode: "lines", name: "infinite workers (critical path)",
        x: [1, last * 2], y: [d.critical_path_s, d.critical_path_s],
        line: { color: PATH, dash: "dash" }, hovertemplate: `∞ workers: ${ds.duration(d.critical_path_s)}<extra></extra>` },
    ];
    if (d.measured_threads && d.measured_wall_s !== null) {
      traces.push({ type: "scatter", mode: "markers", name: `measured (${ds.count(d.measured_threads)} threads)`,
        x: [d.measured_threads], y: [d.measured_wall_s], marker: { color: "#2e7d32", size: 14, symbol: "diamond" },
        hovertemplate: `measured on ${ds.count(d.measured_threads)} threads: ${ds.duration(d.measured_wall_s)}<extra></extra>` });
    }
    if (d.requested) {
      traces.push({ type: "scatter", mode: "markers", name: `asked for (${ds.count(d.requested.threads)} threads)`,
        x: [d.requested.threads], y: [d.requested.wall_s], marker: { color: "#6a1b9a", size: 12, symbol: "square" },
        hovertemplate: `${ds.count(d.requested.threads)} threads: ${ds.duration(d.requested.wall_s)} estimated<extra></extra>` });
    }
    const powers = [];
    for (let p = 1; p <= last * 2; p *= 2) powers.push(p);
    Plotly.newPlot(div, traces, ds.layout({
      showlegend: true, hovermode: "closest",
      legend: { orientation: "h", x: 0, y: -0.3, yanchor: "top" },
      margin: { l: 10, r: 10, t: 10, b: 10 },
      xaxis: ds.axis("worker threads (log scale)", { type: "log", tickmode: "array", tickvals: powers, ticktext: powers.map(ds.count) }),
      yaxis: ds.axis("wall time", secondTicks(top)),
    }), { ...ds.config, displayModeBar: false }).then(() => { div.dataset.ready = "1"; });
  }

  // The groups' links and search keep the graph's state as it is now (?fold=, ?open=
  // change after the page was drawn)
  const GRAPH_KEYS = ["fold", "open"];
  document.addEventListener("click", (ev) => {
    const a = ev.target.closest("#path-groups a.sort, #group-pager a, #group-search-clear");
    if (!a) return;
    const url = new URL(a.href);
    for (const key of GRAPH_KEYS) {
      const value = ds.state.get(key);
      if (value) url.searchParams.set(key, value); else url.searchParams.delete(key);
    }
    a.href = url.toString();
  });
  document.getElementById("group-search").addEventListener("submit", (ev) => {
    for (const key of GRAPH_KEYS) {
      const value = ds.state.get(key);
      let input = ev.target.querySelector(`input[type=hidden][name=${key}]`);
      if (!value) { if (input) input.remove(); continue; }
      if (!input) input = ev.target.appendChild(Object.assign(document.createElement("input"), { type: "hidden", name: key }));
      input.value = value;
    }
  });

  drawGraph();
  drawWhatIf();
})();
