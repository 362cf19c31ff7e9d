// Cluster page: workers over time, prefixes, computations (code and task-group graph),
// fine metrics by span tag, and the flame graph.
"use strict";
(() => {
  const data = ds.data();
  const clusterId = data.cluster.id;
  const base = `/api/v1/clusters/${encodeURIComponent(clusterId)}`;
  const TOP_PREFIXES = 25; // prefixes drawn: those with the most tasks

  async function drawWorkers() {
    const div = document.getElementById("workers-chart");
    const body = await ds.json(`${base}/workers`);
    const traces = [];
    // Memory: Dask's split summed over workers, stacked, against the summed limit
    const m = body.memory;
    const mt = m.t.map((x) => new Date(x * 1000));
    const parts = [["managed_bytes", "managed", "#1976d2"], ["unmanaged_bytes", "unmanaged", "#90a4ae"], ["spilled_bytes", "spilled (on disk)", "#ffb300"]];
    for (const [key, label, colour] of parts) {
      traces.push({ type: "scatter", mode: "lines", x: mt, y: m[key], name: label, yaxis: "y", stackgroup: "memory",
                    line: { width: 0.5, color: colour }, hovertemplate: "%{y:.3s}B<extra>" + label + "</extra>" });
    }
    traces.push({ type: "scatter", mode: "lines", x: mt, y: m.memory_limit, name: "memory limit", yaxis: "y",
                  line: { width: 1.5, dash: "dash", color: "#c62828" }, hovertemplate: "%{y:.3s}B<extra>limit</extra>" });
    const names = Object.keys(body.workers).sort();
    names.forEach((w, i) => {
      const s = body.workers[w];
      const t = s.t.map((x) => new Date(x * 1000));
      const short = ds.text(w.replace(/^[a-z]+:\/\//, ""));
      const common = { type: "scatter", mode: "lines", x: t, legendgroup: w, line: { width: 1.5 } };
      traces.push({ ...common, name: short, y: s.cpu_percent, yaxis: "y2" });
      traces.push({ ...common, name: short, y: s.tasks, yaxis: "y3", showlegend: false, line: { shape: "hv", width: 1.5 } });
      void i;
    });
    const shapes = []; const annotations = [];
    for (const e of body.events) {
      if (e.kind !== "worker-removed") continue;
      const lost = (e.detail || {}).reason === "lost";
      const at = new Date(e.at * 1000);
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: at, x1: at, y0: 0, y1: 1,
                    line: { color: lost ? "#c62828" : "#999", dash: "dash", width: 1 } });
      annotations.push({ x: at, y: 1, xref: "x", yref: "paper", text: lost ? "worker lost" : "worker left",
                         showarrow: false, font: { size: 10, color: lost ? "#c62828" : "#777" }, yanchor: "bottom" });
    }
    await Plotly.newPlot(div, traces, ds.layout({
      xaxis: { type: "date", anchor: "y3" },
      yaxis: { domain: [0.7, 1], title: "memory (all workers)", tickformat: ".2s", ticksuffix: "B" },
      yaxis2: { domain: [0.37, 0.65], title: "CPU %" },
      yaxis3: { domain: [0, 0.32], title: "tasks" },
      shapes, annotations, margin: { l: 70, r: 20, t: 20, b: 40 },
    }), ds.config);
    div.dataset.ready = "1";
  }

  function drawPrefixes() {
    const div = document.getElementById("prefix-chart");
    if (!div) return;
    const p = data.task_prefixes.slice(0, TOP_PREFIXES).reverse();
    Plotly.newPlot(div, [
      { type: "bar", orientation: "h", name: "tasks", y: p.map((r) => ds.text(r.name)), x: p.map((r) => r.tasks_executed), xaxis: "x" },
      { type: "bar", orientation: "h", name: "seconds", y: p.map((r) => ds.text(r.name)), x: p.map((r) => r.duration_s), xaxis: "x2" },
    ], ds.layout({
      xaxis: { domain: [0, 0.47], title: "tasks executed" }, xaxis2: { domain: [0.53, 1], title: "task seconds" },
      yaxis: { automargin: true }, showlegend: false, height: Math.max(240, 22 * p.length + 80),
    }), ds.config);
  }

  async function drawGraph(computationId) {
    const div = document.getElementById(`graph-${computationId}`);
    const g = await ds.json(`${base}/computations/${encodeURIComponent(computationId)}/graph`);
    if (g.groups_not_drawn > 0) {
      // Say what is missing: only the longest groups are drawn.
      const note = document.getElementById(`graph-note-${computationId}`);
      note.replaceChildren(
        `${ds.num(g.groups_not_drawn)} more groups not drawn: the ${ds.num(g.groups_drawn)} longest of ${ds.num(g.groups_total)} are shown (arrows only between them). All groups: `,
        Object.assign(document.createElement("a"), { href: g.all_groups_url, textContent: "the task-groups list" }), ".");
      note.hidden = false;
    }
    const pos = Object.fromEntries(g.nodes.map((n) => [n.name, n]));
    const showLabels = g.nodes.length <= 60;
    const arrows = g.edges.length <= 400;
    const annotations = arrows ? g.edges.map((e) => ({
      x: pos[e.target].x, y: pos[e.target].y, ax: pos[e.source].x, ay: pos[e.source].y,
      xref: "x", yref: "y", axref: "x", ayref: "y", showarrow: true, arrowhead: 2, arrowsize: 1,
      arrowwidth: 1, arrowcolor: "#9aa3b5", standoff: pos[e.target].size / 2 + 2, startstandoff: pos[e.source].size / 2,
      text: "",
    })) : [];
    const lines = { x: [], y: [] };
    if (!arrows) {
      for (const e of g.edges) {
        lines.x.push(pos[e.source].x, pos[e.target].x, null);
        lines.y.push(pos[e.source].y, pos[e.target].y, null);
      }
    }
    const nodes = {
      type: "scatter", mode: showLabels ? "markers+text" : "markers", name: "task groups",
      x: g.nodes.map((n) => n.x), y: g.nodes.map((n) => n.y),
      text: g.nodes.map((n) => ds.text(n.prefix)), textposition: "bottom center", textfont: { size: 10 },
      marker: {
        size: g.nodes.map((n) => n.size), color: g.nodes.map((n) => n.colour), opacity: 1,
        line: { color: g.nodes.map((n) => (n.failed ? "#d50000" : "#444")), width: g.nodes.map((n) => (n.failed ? 4 : 1)) },
      },
      hovertext: g.nodes.map((n) => [
        `<b>${ds.text(n.name)}</b>`, `tasks: ${ds.num(n.tasks_executed)} of ${ds.num(n.tasks_total)} done, ${ds.num(n.tasks_erred)} failed`,
        `memory: ${ds.bytes(n.nbytes_total)}`, `time: ${ds.duration(n.duration_s)}`,
        ...Object.entries(n.durations).map(([k, v]) => `  ${ds.text(k)}: ${ds.duration(v)}`),
      ].join("<br>")),
      hoverinfo: "text",
    };
    const traces = arrows ? [nodes] : [{ type: "scatter", mode: "lines", x: lines.x, y: lines.y, hoverinfo: "skip", line: { color: "#c0c6d2", width: 1 }, showlegend: false }, nodes];
    await Plotly.newPlot(div, traces, ds.layout({
      showlegend: false, dragmode: "pan", annotations, hovermode: "closest",
      xaxis: { visible: false, zeroline: false }, yaxis: { visible: false, zeroline: false },
      margin: { l: 20, r: 20, t: 20, b: 20 },
    }), { ...ds.config, scrollZoom: true });
    div.dataset.nodes = String(g.nodes.length);
    div.dataset.notDrawn = String(g.groups_not_drawn);
    div.dataset.failed = String(g.nodes.filter((n) => n.failed).length);
    div.dataset.ready = "1";
  }

  for (const button of document.querySelectorAll("button.expand")) {
    button.addEventListener("click", () => {
      const id = button.dataset.id;
      const detail = document.querySelector(`tr.computation-detail[data-id="${CSS.escape(id)}"]`);
      const open = detail.hidden;
      detail.hidden = !open;
      button.textContent = open ? "▾" : "▸";
      button.setAttribute("aria-expanded", String(open));
      const div = document.getElementById(`graph-${id}`);
      if (open && !div.dataset.ready) drawGraph(id);
    });
  }

  const tagSelect = document.getElementById("span-tag");
  if (tagSelect) {
    tagSelect.addEventListener("change", async () => {
      const params = tagSelect.value ? `?tag=${encodeURIComponent(tagSelect.value)}` : "";
      const body = await ds.json(`${base}/metrics${params}`);
      const tbody = document.querySelector("#fine-metrics tbody");
      tbody.replaceChildren(...body.metrics.map((m) => {
        const tr = document.createElement("tr");
        tr.append(ds.cell(m.activity), ds.cell(m.prefix), ds.cell(ds.num(m.value), { cls: "num" }), ds.cell(m.unit));
        return tr;
      }));
      tbody.dataset.tag = tagSelect.value;
    });
  }

  const flame = document.getElementById("flamegraph");
  async function drawFlame() {
    const scope = document.getElementById("profile-scope").value;
    const body = await ds.json(`${base}/profile${scope ? `?computation=${encodeURIComponent(scope)}` : ""}`);
    document.getElementById("profile-summary").textContent =
      `${ds.num(body.samples)} samples · ${ds.duration(body.seconds)} over ${ds.num(body.windows)} profile windows`;
    const trace = {
      type: "icicle", ids: body.ids, labels: body.labels.map(ds.text), parents: body.parents, values: body.values,
      branchvalues: "total", level: "", maxdepth: -1, sort: false,
      tiling: { orientation: "v", flip: "y" }, pathbar: { visible: true },
      customdata: body.ids.map((_, i) => [body.self_s[i], body.total_s[i], ds.text(body.where[i])]),
      hovertemplate: "<b>%{label}</b><br>total %{customdata[1]:.3f} s<br>self %{customdata[0]:.3f} s<br>%{customdata[2]}<extra></extra>",
    };
    await Plotly.newPlot(flame, [trace], ds.layout({ margin: { l: 5, r: 5, t: 30, b: 5 } }), ds.config);
    flame.dataset.zoom = "";
    flame.dataset.ready = "1";
    flame.on("plotly_icicleclick", (ev) => { flame.dataset.zoom = ev.nextLevel || ""; });
  }
  if (flame) {
    drawFlame();
    document.getElementById("profile-scope").addEventListener("change", drawFlame);
    document.getElementById("reset-zoom").addEventListener("click", () => {
      Plotly.restyle(flame, { level: [""] });
      flame.dataset.zoom = "";
    });
  }

  drawWorkers();
  drawPrefixes();
})();
