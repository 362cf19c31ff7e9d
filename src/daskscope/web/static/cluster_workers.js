// Cluster page, workers tab: per worker Dask's memory split (managed, unmanaged,
// spilled) against its limit, CPU, executing tasks, network and disk I/O, GPU figures
// when recorded (each worker's GPU named, its total memory a dashed line), and
// departures by reason (only "lost" is drawn as a loss, in red).
// Each worker keeps one colour in every panel and in the legend.
// dsWorkers.render(element, clusterId, pageData) draws into element; it reads
// /api/v1/clusters/{id}/workers (views/workers.py).
"use strict";
window.dsWorkers = (() => {
  const SMALL_MULTIPLES = 8; // past this, a worker selector instead of one chart each
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                   "#bcbd22", "#7f7f7f", "#393b79"]; // no red: red is a lost worker
  const PARTS = [["managed", "managed_bytes", "#1976d2"], ["unmanaged", "unmanaged_bytes", "#b0bec5"],
                 ["spilled", "spilled_bytes", "#ffb300"]];
  const LIMIT = { color: "#212121", dash: "dash", width: 1.5 };
  const LOST = "#c62828";
  const LEFT = "#757575";


  const colourOf = (i) => (i < PALETTE.length ? PALETTE[i] : `hsl(${(i * 137.5) % 360}, 55%, 42%)`);
  const short = (w) => w.replace(/^[a-z]+:\/\//, "");
  const times = (ts) => ts.map((t) => ds.utc(t, true)); // UTC text: plotly draws it as is
  const maxOf = (...lists) => Math.max(0, ...lists.flat().filter((v) => v !== null && Number.isFinite(v)));
  const el = (tag, props, ...children) => {
    const node = Object.assign(document.createElement(tag), props || {});
    node.append(...children);
    return node;
  };
  const xaxis = (extra) => ds.axis("time (UTC)", { type: "date", ...extra });
  // A bytes axis from 0 in binary units, e.g. "512 MiB" (suffix "/s" for rates)
  const bytesAxis = (title, max, suffix, extra) => {
    const t = ds.bytesTicks(max);
    return ds.axis(title, { tickvals: t.tickvals, ticktext: t.ticktext.map((x) => x + (suffix || "")),
                            range: t.range, rangemode: "tozero", ...extra });
  };
  const hover = (values, format) => values.map((v) => format(v));
  // One time range for every chart, so that panels and workers line up
  const span = (body) => {
    const ts = [...Object.values(body.workers).flatMap((s) => s.t), ...body.departures.map((d) => d.at)];
    return [ds.utc(Math.min(...ts), true), ds.utc(Math.max(...ts), true)];
  };

  // Stacked memory split and the limit line of one worker (or of the cluster's sum)
  function memoryTraces(t, parts, limit, showlegend) {
    const x = times(t);
    const traces = PARTS.map(([label, key, colour]) => ({
      type: "scatter", mode: "lines", x, y: parts[key], name: label, stackgroup: "memory", legendgroup: label,
      showlegend, line: { width: 0.5, color: colour }, fillcolor: colour,
      customdata: hover(parts[key], ds.bytes), hovertemplate: `%{customdata}<extra>${label}</extra>`,
    }));
    traces.push({ type: "scatter", mode: "lines", x, y: limit, name: "memory limit", legendgroup: "limit",
                  showlegend, line: LIMIT, customdata: hover(limit, ds.bytes),
                  hovertemplate: "%{customdata}<extra>memory limit</extra>" });
    return traces;
  }

  // Vertical lines where workers left: red when lost, grey dotted when closed,
  // retired or restarted
  function departureShapes(departures) {
    return departures.map((d) => ({
      type: "line", xref: "x", yref: "paper", x0: ds.utc(d.at, true), x1: ds.utc(d.at, true), y0: 0, y1: 1,
      name: `${d.reason} ${d.worker}`, line: { color: d.lost ? LOST : LEFT, dash: d.lost ? "solid" : "dot", width: d.lost ? 2 : 1 },
    }));
  }
  // Departures as markers where the workers left, with a legend entry each kind.
  // Departures closer than 1/60 of the time axis share one marker ("×3"), whose hover
  // lists them all: a cluster closing takes every worker at once, and their labels
  // would stack on each other.
  function departureGroups(departures, range) {
    const sorted = [...departures].sort((a, b) => a.at - b.at);
    const near = (range[1] - range[0]) / 60;
    const groups = [];
    for (const d of sorted) {
      const last = groups[groups.length - 1];
      if (last && last.lost === d.lost && d.at - last.list[0].at <= near) last.list.push(d);
      else groups.push({ lost: d.lost, list: [d] });
    }
    return groups;
  }
  function departureTraces(departures, yaxis, range) {
    const kinds = [["worker lost", true, LOST, "x"],
                   ["worker left (closed, retired, restarted)", false, LEFT, "circle-open"]];
    const groups = departureGroups(departures, range);
    return kinds.map(([name, lost, colour, symbol]) => [name, groups.filter((g) => g.lost === lost), colour, symbol])
      .filter(([, list]) => list.length).map(([name, list, colour, symbol]) => ({
        type: "scatter", mode: "markers+text", name, yaxis, x: list.map((g) => ds.utc(g.list[0].at, true)), y: list.map(() => 0),
        // left of the marker: a cluster's close is at the right edge, where the text would be cut
        text: list.map((g) => (g.list.length > 1 ? `×${g.list.length}` : "")), textposition: "top left",
        textfont: { color: colour, size: 11 },
        marker: { color: colour, symbol, size: 11, line: { width: 2, color: colour } }, cliponaxis: false,
        customdata: list.map((g) => g.list.map((d) => `${ds.text(short(d.worker))} ${d.reason} at ${ds.utc(d.at, true)}`).join("<br>")),
        hovertemplate: "%{customdata}<extra></extra>", legendgroup: name,
      }));
  }
  // The time range drawn, in epoch seconds
  const spanSeconds = (body) => {
    const ts = [...Object.values(body.workers).flatMap((s) => s.t), ...body.departures.map((d) => d.at)];
    return [Math.min(...ts), Math.max(...ts)];
  };

  async function plot(div, traces, layout) {
    await ds.plotly();
    await Plotly.newPlot(div, traces, ds.layout(layout), ds.config);
  }

  // Memory charts are scaled to the memory used, the limit included only when it is
  // within LIMIT_IN_VIEW times the peak (250 MiB used on a 23 GiB axis is a flat line);
  // a limit above the scale is written at the top of the chart instead.
  const LIMIT_IN_VIEW = 2.5;
  const memoryTop = (used, limit) =>
    (limit > 0 && (used === 0 || limit <= LIMIT_IN_VIEW * used) ? Math.max(used, limit) : used);
  function limitAbove(limit, axis) {
    if (!(limit > axis.range[1])) return [];
    return [{ xref: "paper", yref: "paper", x: 1, y: 1, xanchor: "right", yanchor: "top", showarrow: false,
              text: `memory limit ${ds.bytes(limit)} ↑ above the scale`, font: { size: 11, color: LIMIT.color },
              bgcolor: "rgba(255,255,255,0.85)", name: "memory limit above" }];
  }
  const stackedOf = (s) => s.managed.map((m, i) => (m || 0) + (s.unmanaged[i] || 0) + (s.spilled[i] || 0));
  function memoryMax(body) {
    const per = Object.values(body.workers).map((s) => memoryTop(maxOf(stackedOf(s)), maxOf(s.memory_limit)));
    return Math.max(0, ...per);
  }

  async function drawTotal(div, body) {
    const m = body.memory;
    const stacked = m.managed_bytes.map((v, i) => (v || 0) + (m.unmanaged_bytes[i] || 0) + (m.spilled_bytes[i] || 0));
    const traces = [...memoryTraces(m.t, m, m.memory_limit, true), ...departureTraces(body.departures, "y", spanSeconds(body))];
    const yaxis = bytesAxis("memory (bytes)", memoryTop(maxOf(stacked), maxOf(m.memory_limit)));
    await plot(div, traces, {
      height: 280, xaxis: xaxis({ range: span(body) }), yaxis, annotations: limitAbove(maxOf(m.memory_limit), yaxis),
      shapes: departureShapes(body.departures), legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
      margin: { l: 70, r: 20, t: 30, b: 40 },
    });
  }

  async function drawWorker(div, body, worker, max) {
    const s = body.workers[worker];
    const parts = { managed_bytes: s.managed, unmanaged_bytes: s.unmanaged, spilled_bytes: s.spilled };
    const yaxis = bytesAxis("memory (bytes)", max);
    await plot(div, memoryTraces(s.t, parts, s.memory_limit, false), {
      height: 200, xaxis: xaxis({ title: { text: "" }, range: span(body) }), yaxis, annotations: limitAbove(maxOf(s.memory_limit), yaxis),
      shapes: departureShapes(body.departures.filter((d) => d.worker === worker)),
      margin: { l: 70, r: 10, t: 6, b: 30 },
    });
  }

  function workerCard(worker, colour) {
    const chart = el("div", { className: "dsw-chart dsw-small" });
    chart.dataset.worker = worker;
    const swatch = el("i", { className: "dsw-swatch" });
    swatch.style.background = colour;
    return el("figure", { className: "dsw-worker" }, el("figcaption", {}, swatch, short(worker)), chart);
  }

  // CPU, executing tasks, network and disk I/O over time, one line per worker
  async function drawTimeline(div, body, colours) {
    const f = body.figures;
    const names = Object.keys(colours);
    const traces = [];
    const bps = (v) => ds.value(v, "bytes/s");
    names.forEach((w) => {
      const s = body.workers[w];
      const x = times(s.t);
      const name = ds.text(short(w));
      const line = (y, axis, format, label, extra) => ({
        type: "scatter", mode: "lines", x, y, yaxis: axis, name, legendgroup: w, showlegend: axis === "y",
        line: { color: colours[w], width: 1.5, ...(extra || {}) }, customdata: hover(y, format),
        hovertemplate: `%{customdata}<extra>${name} ${label}</extra>`,
      });
      traces.push(line(s.cpu_percent, "y", (v) => ds.value(v, "percent"), f.cpu_percent.label));
      traces.push(line(s.executing, "y2", ds.count, f.executing.label, { shape: "hv" }));
      traces.push(line(s.net_read_bps, "y3", bps, f.net_read_bps.label));
      traces.push(line(s.net_write_bps, "y3", bps, f.net_write_bps.label, { dash: "dot" }));
      traces.push(line(s.disk_read_bps, "y4", bps, f.disk_read_bps.label));
      traces.push(line(s.disk_write_bps, "y4", bps, f.disk_write_bps.label, { dash: "dot" }));
    });
    // What solid and dotted mean in the I/O panels
    for (const [label, dash] of [["read", "solid"], ["write", "dot"]]) {
      traces.push({ type: "scatter", mode: "lines", x: [null], y: [null], yaxis: "y3", name: label,
                    line: { color: "#555", dash, width: 1.5 }, hoverinfo: "skip" });
    }
    traces.push(...departureTraces(body.departures, "y", spanSeconds(body)));
    const all = (key) => names.map((w) => body.workers[w][key]);
    const busiest = maxOf(...all("executing"));
    const net = maxOf(...all("net_read_bps"), ...all("net_write_bps"));
    const disk = maxOf(...all("disk_read_bps"), ...all("disk_write_bps"));
    // A panel whose samples hold no value says so, rather than a flat line at 0
    const blank = (keys, yref) => (keys.flatMap(all).flat().every((v) => v === null)
      ? [{ text: "not recorded", xref: "paper", x: 0.5, yref: `${yref} domain`, y: 0.5, showarrow: false,
           font: { color: "#6b7385" } }] : []);
    const annotations = [...blank(["net_read_bps", "net_write_bps"], "y3"), ...blank(["disk_read_bps", "disk_write_bps"], "y4")];
    await plot(div, traces, {
      height: 760, xaxis: xaxis({ anchor: "y4", range: span(body) }),
      yaxis: ds.axis(`${f.cpu_percent.label} (% of a core)`, { domain: [0.79, 1], rangemode: "tozero", ticksuffix: " %" }),
      yaxis2: ds.axis(`${f.executing.label} (tasks)`, { domain: [0.53, 0.74], rangemode: "tozero", tick0: 0,
                                                        dtick: Math.max(1, Math.ceil(busiest / 4)) }),
      yaxis3: bytesAxis("network (bytes/s)", net, "/s", { domain: [0.27, 0.48] }),
      yaxis4: bytesAxis("disk (bytes/s)", disk, "/s", { domain: [0, 0.22] }),
      // on a phone the time ticks turn and take more room: the legend goes lower
      shapes: departureShapes(body.departures), annotations, legend: { orientation: "h", y: div.clientWidth < 640 ? -0.15 : -0.1 },
      margin: { l: 80, r: 20, t: 10, b: 40 },
    });
  }

  // A worker's name in the GPU chart: its address and its GPU's name when told
  const gpuName = (body, w) => {
    const gpu = body.gpus[w];
    return ds.text(gpu && gpu.name ? `${short(w)} · ${gpu.name}` : short(w));
  };

  async function drawGpu(div, body, colours) {
    const names = Object.keys(colours).filter((w) => body.workers[w].gpu_utilization || body.workers[w].gpu_memory_used);
    const f = body.figures;
    const traces = [];
    let totalShown = false;
    names.forEach((w) => {
      const s = body.workers[w];
      const x = times(s.t);
      const name = gpuName(body, w);
      const common = { type: "scatter", mode: "lines", x, name, legendgroup: w, line: { color: colours[w], width: 1.5 } };
      if (s.gpu_utilization) {
        traces.push({ ...common, y: s.gpu_utilization, yaxis: "y", customdata: hover(s.gpu_utilization, (v) => ds.value(v, "percent")),
                      hovertemplate: `%{customdata}<extra>${name} GPU</extra>` });
      }
      if (s.gpu_memory_used) {
        traces.push({ ...common, y: s.gpu_memory_used, yaxis: "y2", showlegend: !s.gpu_utilization,
                      customdata: hover(s.gpu_memory_used, ds.bytes), hovertemplate: `%{customdata}<extra>${name} GPU memory</extra>` });
        const total = (body.gpus[w] || {}).memory_total;
        if (total) { // the GPU's memory, dashed like a worker's memory limit
          const y = s.t.map(() => total);
          traces.push({ type: "scatter", mode: "lines", x, y, yaxis: "y2", name: f.gpu_memory_total.label,
                        legendgroup: "gpu-total", showlegend: !totalShown, line: { ...LIMIT, color: colours[w] },
                        customdata: hover(y, ds.bytes), hovertemplate: `%{customdata}<extra>${name} ${f.gpu_memory_total.label}</extra>` });
          totalShown = true;
        }
      }
    });
    const used = maxOf(...names.map((w) => body.workers[w].gpu_memory_used || []));
    const total = maxOf(...names.map((w) => [(body.gpus[w] || {}).memory_total]));
    const yaxis2 = bytesAxis(`${f.gpu_memory_used.label} (bytes)`, memoryTop(used, total), "", { domain: [0, 0.44] });
    // a total far above the memory used is written at the top of its panel instead
    const above = total > yaxis2.range[1]
      ? [{ xref: "paper", yref: "y2 domain", x: 1, y: 1, xanchor: "right", yanchor: "top", showarrow: false,
           text: `${f.gpu_memory_total.label} ${ds.bytes(total)} ↑ above the scale`, font: { size: 11, color: LIMIT.color },
           bgcolor: "rgba(255,255,255,0.85)", name: "gpu memory total above" }] : [];
    await plot(div, traces, {
      height: 400, xaxis: xaxis({ anchor: "y2", range: span(body) }),
      yaxis: ds.axis(`${f.gpu_utilization.label} (%)`, { domain: [0.56, 1], rangemode: "tozero", ticksuffix: " %" }),
      yaxis2, annotations: above,
      shapes: departureShapes(body.departures), margin: { l: 80, r: 20, t: 10, b: 40 },
      legend: { orientation: "h", y: -0.28 }, // below the time axis' title
    });
  }

  // Each worker's GPU: its name and total memory, as the worker told them
  function gpuDevices(body) {
    const items = Object.keys(body.gpus).sort((a, b) => a.localeCompare(b, "en", { numeric: true })).map((w) => {
      const gpu = body.gpus[w];
      const li = el("li", {}, `${short(w)}: ${gpu.name || "name not told"}, ${gpu.memory_total ? ds.bytes(gpu.memory_total) : "total memory not told"}`);
      li.dataset.worker = w;
      return li;
    });
    return el("ul", { className: "muted", id: "gpu-devices" }, ...items);
  }

  function departuresNote(body) {
    if (!body.departures.length) return el("p", { className: "muted" }, "No worker left while recorded.");
    const items = body.departures.map((d) => {
      const li = el("li", {}, `${short(d.worker)} ${d.reason} at ${ds.utc(d.at)} UTC`);
      if (d.lost) li.className = "bad";
      li.dataset.reason = d.reason;
      return li;
    });
    return el("details", { className: "dsw-departures" }, el("summary", {}, `Worker departures (${body.departures.length}): red lines are losses; grey dotted lines a normal close, retirement or restart`), el("ul", {}, ...items));
  }

  // body: the /workers answer when the caller has it (live mode)
  async function render(element, clusterId, _pageData, fresh) {
    element.dataset.ready = "";
    const body = fresh || await ds.json(`/api/v1/clusters/${encodeURIComponent(clusterId)}/workers`);
    // 10.0.0.2 before 10.0.0.10
    const names = Object.keys(body.workers).sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
    if (!names.length) {
      element.replaceChildren(el("p", { className: "empty" }, "No worker samples recorded."));
      element.dataset.ready = "1";
      return;
    }
    const colours = Object.fromEntries(names.map((w, i) => [w, colourOf(i)]));
    const total = el("div", { className: "dsw-chart" });
    total.dataset.chart = "memory-total";
    const grid = el("div", { className: "dsw-grid" });
    const timeline = el("div", { className: "dsw-chart" });
    timeline.dataset.chart = "timeline";
    const gpu = el("div", { className: "dsw-chart" });
    gpu.dataset.chart = "gpu";
    const memoryNote = el("p", { className: "muted dsw-note" },
      `Dask's memory split: ${body.figures.managed_bytes.label} (keys held in RAM) and ${body.figures.unmanaged_bytes.label} (the rest of the process) stack to the process memory; ${body.figures.spilled_bytes.label} is on disk. The dashed line is the ${body.figures.memory_limit.label}; the axis is scaled to the memory used, and a limit more than ${LIMIT_IN_VIEW} times above it is written at the top of the chart instead. Vertical lines: workers leaving (red: lost).`);
    const parts = [el("h3", {}, "Memory"), memoryNote, el("p", { className: "dsw-caption" }, "All workers"), total];
    let selector = null;
    if (names.length > SMALL_MULTIPLES) {
      selector = el("select", { id: "worker-select" }, ...names.map((w) => el("option", { value: w }, short(w))));
      parts.push(el("label", { className: "dsw-select" }, `One worker of ${names.length}: `, selector));
    }
    parts.push(grid, el("h3", {}, "CPU, tasks and I/O"), timeline, el("h3", {}, "GPU"));
    if (body.gpu_recorded) {
      if (Object.keys(body.gpus).length) parts.push(gpuDevices(body));
      parts.push(gpu);
    } else parts.push(el("p", { className: "empty", id: "no-gpu" }, "No GPU metrics recorded."));
    parts.push(departuresNote(body));
    element.replaceChildren(...parts);

    const max = memoryMax(body);
    const draws = [drawTotal(total, body), drawTimeline(timeline, body, colours)];
    if (body.gpu_recorded) draws.push(drawGpu(gpu, body, colours));
    if (selector) {
      const showOne = async () => {
        const chosen = body.workers[ds.state.get("worker")] ? ds.state.get("worker") : names[0];
        selector.value = chosen;
        const card = workerCard(chosen, colours[chosen]);
        grid.replaceChildren(card);
        await drawWorker(card.querySelector(".dsw-chart"), body, chosen, max);
      };
      selector.addEventListener("change", () => { ds.state.set({ worker: selector.value }); showOne(); });
      ds.state.onChange(() => { if (element.isConnected) showOne(); });
      draws.push(showOne());
    } else {
      for (const w of names) {
        const card = workerCard(w, colours[w]);
        grid.appendChild(card);
        draws.push(drawWorker(card.querySelector(".dsw-chart"), body, w, max));
      }
    }
    await Promise.all(draws);
    element.dataset.ready = "1";
  }

  return { render };
})();
