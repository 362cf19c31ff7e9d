// The computation page: the task-group graph with the critical path drawn over it, and
// the what-if chart (estimated wall time against worker threads, the measured point
// marked). Data: the page's JSON (views/critical_path.py).
"use strict";
(() => {
  const d = ds.data();
  const PATH = "#d84315";
  const OTHER = "#9aa3b5";

  const padded = (values, by) => [Math.min(...values) - by, Math.max(...values) + by];

  function drawGraph() {
    const div = document.getElementById("path-graph");
    if (!d.groups.length) { div.hidden = true; return; }
    const pos = Object.fromEntries(d.groups.map((g) => [g.name, g]));
    const onPath = new Set(d.path);
    // consecutive groups of the path: their arrow is drawn thick in the path's colour
    const pathEdges = new Set(d.path.slice(1).map((n, i) => `${d.path[i]}\u0000${n}`));
    const longest = Math.max(...d.groups.map((g) => g.longest_s), 0);
    const size = (g) => 14 + (longest > 0 ? 30 * Math.sqrt(g.longest_s / longest) : 0);
    const annotations = d.edges.length <= 400 ? d.edges.map((e) => {
      const hot = pathEdges.has(`${e.source}\u0000${e.target}`);
      return {
        x: pos[e.target].x, y: pos[e.target].y, ax: pos[e.source].x, ay: pos[e.source].y,
        xref: "x", yref: "y", axref: "x", ayref: "y", showarrow: true, arrowhead: 2, arrowsize: 1,
        arrowwidth: hot ? 3 : 1, arrowcolor: hot ? PATH : OTHER,
        standoff: size(pos[e.target]) / 2 + 2, startstandoff: size(pos[e.source]) / 2, text: "",
      };
    }) : [];
    const trace = (groups, name, colour) => ({
      type: "scatter", mode: groups.length <= 60 ? "markers+text" : "markers", name,
      x: groups.map((g) => g.x), y: groups.map((g) => g.y),
      text: groups.map((g) => ds.text(g.prefix || g.name)), textposition: "bottom center", textfont: { size: 10 },
      marker: { size: groups.map(size), color: colour, line: { color: "#333", width: 1 } },
      hovertext: groups.map((g) => [
        `<b>${ds.text(g.name)}</b>${onPath.has(g.name) ? " (critical path)" : ""}`,
        `tasks: ${ds.count(g.tasks)}`, `longest task: ${ds.duration(g.longest_s)}`,
        `compute, all tasks: ${ds.duration(g.total_s)}`,
        `starts after ${ds.duration(g.earliest_start_s)} with infinite workers`,
      ].join("<br>")),
      hoverinfo: "text",
    });
    const traces = [
      trace(d.groups.filter((g) => !onPath.has(g.name)), "other task groups", OTHER),
      trace(d.groups.filter((g) => onPath.has(g.name)), "on the critical path", PATH),
    ];
    Plotly.newPlot(div, traces, ds.layout({
      showlegend: false, annotations, hovermode: "closest", dragmode: "pan",
      // room around the outer groups for their labels
      xaxis: { visible: false, zeroline: false, range: padded(d.groups.map((g) => g.x), 0.35) },
      yaxis: { visible: false, zeroline: false, range: padded(d.groups.map((g) => g.y), 0.45) },
      margin: { l: 10, r: 10, t: 10, b: 10 },
    }), { ...ds.config, displayModeBar: false }).then(() => {
      div.dataset.onPath = String(traces[1].x.length);
      div.dataset.ready = "1";
    });
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

  drawGraph();
  drawWhatIf();
})();
