// Task timeline page: one row per worker thread; zoom and pan ask the server for the
// window (every task when it holds few, else each thread's time in bins) and redraw; the
// window and the filters live in the URL, so Back and Forward step through them.
"use strict";
(() => {
  const chart = document.getElementById("timeline");
  if (!chart) return; // nothing recorded: the page says so
  let view = ds.data();
  const clusterId = view.cluster_id;
  const base = `/api/v1/clusters/${encodeURIComponent(clusterId)}`;
  const FILTERS = ["computation", "span", "group"];
  const IDLE = "rgba(120, 128, 145, 0.16)";
  const ERRED = "#d50000";
  // x is seconds after the first task of the cluster (or computation): plotly's own
  // dates stop at milliseconds, tasks do not
  const origin = () => (view.totals.first ?? view.start);
  let shownOrigin = origin();
  let drawing = false;
  let asked = 0; // the newest request: older answers are dropped
  let loads = 0;
  const hidden = new Set(); // legend entries switched off, kept across windows

  // --- text -------------------------------------------------------------------------
  const laneOf = (t) => view.lanes[t.lane];
  function actionLine(a) {
    const from = a.source ? ` from ${ds.text(a.source)}` : "";
    return `${ds.text(a.action)} ${ds.duration(a.stop - a.start)}${from}`;
  }
  function taskText(t, action) {
    const lines = [
      `<b>${ds.text(t.key)}</b>`,
      `group ${ds.text(t.group)}`,
      `${ds.text(laneOf(t).label)} (thread ${laneOf(t).thread})`,
      `start ${ds.utc(t.start, true)} UTC`,
      `duration ${ds.duration(t.stop - t.start)} · compute ${ds.duration(t.compute_s)}`,
      `output ${ds.bytes(t.nbytes)}${t.state === "memory" ? "" : ` · ${ds.text(t.state)}`}`,
    ];
    if (t.actions.length) lines.push(`actions: ${t.actions.map(actionLine).join(", ")}`);
    if (action) lines.push(`<i>this bar: ${actionLine(action)}</i>`);
    return lines.join("<br>");
  }
  function binText(lane, i, group) {
    const bins = lane.bins;
    const busy = Object.entries(bins.busy_s).map(([name, s]) => [name, s[i]]).filter(([, s]) => s > 0).sort((x, y) => y[1] - x[1]);
    return [
      `<b>${ds.text(lane.label)}</b>`,
      `${ds.utc(bins.start[i], true)} UTC + ${ds.duration(bins.stop[i] - bins.start[i])}`,
      `${ds.count(bins.tasks[i])} tasks${group ? ` · mostly ${ds.text(group.name)}` : ""}`,
      ...busy.map(([name, s]) => `${ds.text(name)} ${ds.duration(s)}`),
    ].join("<br>");
  }

  // --- traces -----------------------------------------------------------------------
  const activityColour = () => Object.fromEntries(view.activities.filter((a) => a.colour).map((a) => [a.name, a.colour]));
  const prefixColour = () => Object.fromEntries(view.prefixes.map((p) => [p.prefix, p.colour]));

  function bars(name, colour, extra) {
    return Object.assign({
      type: "bar", orientation: "h", name: ds.text(name), legendgroup: name, y: [], x: [], base: [],
      hovertext: [], hoverinfo: "text", customdata: [], marker: { color: colour, line: { width: [], color: [] } },
      width: 0.8, cliponaxis: true,
    }, extra || {});
  }
  function push(trace, lane, a, b, minimum, text, key, erred) {
    trace.y.push(lane);
    trace.base.push(a - shownOrigin);
    trace.x.push(Math.max(b - a, minimum));
    trace.hovertext.push(text);
    trace.customdata.push(key);
    trace.marker.line.width.push(erred ? 2 : 0);
    trace.marker.line.color.push(erred ? ERRED : "rgba(0,0,0,0)");
  }

  // Every task: compute by prefix colour, the other actions thinner by activity colour
  function rawTraces(minimum) {
    const colours = prefixColour();
    const actColours = activityColour();
    const compute = new Map();
    const other = new Map();
    for (const t of view.tasks) {
      const lane = laneOf(t).label;
      const erred = t.state !== "memory";
      const computing = t.actions.filter((a) => a.action === "compute");
      if (!computing.length && !t.actions.length) computing.push({ action: "compute", start: t.start, stop: t.stop });
      for (const a of computing) {
        if (!compute.has(t.prefix)) compute.set(t.prefix, bars(t.prefix, colours[t.prefix] || "#1f77b4"));
        push(compute.get(t.prefix), lane, a.start, a.stop, minimum, taskText(t, null), t.key, erred);
      }
      for (const a of t.actions.filter((x) => x.action !== "compute")) {
        if (!other.has(a.action)) other.set(a.action, bars(a.action, actColours[a.action] || "#9b59b6", { width: 0.35 }));
        push(other.get(a.action), lane, a.start, a.stop, minimum, taskText(t, a), t.key, false);
      }
    }
    return [...compute.values(), ...other.values()];
  }

  // Bins: coloured by the group that computed most in them, paler when less busy
  function binTraces() {
    const byColour = new Map();
    for (const lane of view.lanes) {
      const bins = lane.bins;
      if (!bins) continue;
      const computing = bins.busy_s.compute || [];
      for (let i = 0; i < bins.start.length; i += 1) {
        const group = bins.top_group[i] >= 0 ? view.bin_groups[bins.top_group[i]] : null;
        const [name, colour] = group ? [group.prefix, group.colour] : ["other activity", "#b0b7c6"];
        if (!byColour.has(name)) byColour.set(name, Object.assign(bars(name, colour), { marker: { color: colour, opacity: [] } }));
        const trace = byColour.get(name);
        const width = bins.stop[i] - bins.start[i];
        trace.y.push(lane.label);
        trace.base.push(bins.start[i] - shownOrigin);
        trace.x.push(width);
        trace.hovertext.push(binText(lane, i, group));
        trace.customdata.push(null);
        trace.marker.opacity.push(0.3 + 0.7 * Math.min(1, (computing[i] || 0) / width));
      }
    }
    return [...byColour.values()];
  }

  function utilisationTrace() {
    const u = view.utilisation;
    return {
      type: "scatter", mode: "lines", name: "threads busy", yaxis: "y2", line: { shape: "hv", width: 1, color: "#2f6fd1" },
      fill: "tozeroy", fillcolor: "rgba(47, 111, 209, 0.2)", hoverinfo: "text",
      x: u.length ? [...u.map((b) => b.start - shownOrigin), u[u.length - 1].stop - shownOrigin] : [],
      y: u.length ? [...u.map((b) => 100 * b.fraction), 100 * u[u.length - 1].fraction] : [],
      hovertext: u.length ? [...u, u[u.length - 1]].map((b) => `${ds.utc(b.start, true)} UTC: ${ds.percent(b.fraction)} of the threads busy`) : [],
    };
  }

  const IDLE_NAME = "no thread computing";
  function idleShapes() {
    return view.idle_gaps.map((g) => ({
      type: "rect", xref: "x", yref: "y domain", x0: g.start - shownOrigin, x1: g.stop - shownOrigin, y0: 0, y1: 1,
      fillcolor: IDLE, line: { width: 0 }, layer: "below", name: IDLE_NAME, visible: !hidden.has(IDLE_NAME),
    }));
  }

  // The legend: HTML below the chart, as many rows as it takes at any width (plotly's
  // own, over the chart, covered the rows of a phone and met the mode bar and the
  // "Busy %" panel); each entry a button that hides or shows what it names
  const legendName = (trace) => trace.legendgroup || trace.name;
  function legend(traces) {
    const box = document.getElementById("timeline-legend");
    const entries = traces.map((tr) => [legendName(tr), tr.marker ? tr.marker.color : tr.line.color]);
    if (view.idle_gaps.length) entries.push([IDLE_NAME, IDLE]);
    box.replaceChildren(...entries.map(([name, colour]) => {
      const swatch = Object.assign(document.createElement("i"), { className: "swatch" });
      swatch.style.background = colour;
      const button = Object.assign(document.createElement("button"), { type: "button", className: "legend-item" });
      button.dataset.name = name;
      button.setAttribute("aria-pressed", String(!hidden.has(name)));
      button.title = `hide or show ${name}`;
      button.append(swatch, name);
      button.addEventListener("click", () => {
        if (hidden.has(name)) hidden.delete(name); else hidden.add(name);
        button.setAttribute("aria-pressed", String(!hidden.has(name)));
        if (name === IDLE_NAME) { Plotly.relayout(chart, { shapes: idleShapes() }); return; }
        const which = chart.data.map((tr, i) => [legendName(tr), i]).filter(([n]) => n === name).map(([, i]) => i);
        Plotly.restyle(chart, { visible: hidden.has(name) ? "legendonly" : true }, which);
      });
      return button;
    }));
  }

  // --- drawing ----------------------------------------------------------------------
  // One draw at a time: a window's answer arriving while plotly still draws the last one
  // (a mode-bar click, then another) made two Plotly.react calls overlap, and plotly
  // threw ("reading 'select'"); each waits for the one before and draws the newest view
  let drawn = Promise.resolve();
  function draw() {
    const next = drawn.then(drawNow);
    drawn = next.catch(() => {});
    return next;
  }
  function drawNow() {
    shownOrigin = origin();
    const narrow = chart.clientWidth < 600;
    const labels = view.lanes.map((l) => l.label);
    const width = chart.clientWidth || 1000;
    const span = view.stop - view.start;
    const traces = [...(view.raw ? rawTraces(span / width) : binTraces()), utilisationTrace()];
    for (const tr of traces) tr.visible = hidden.has(legendName(tr)) ? "legendonly" : true;
    const laneHeight = narrow ? 20 : 24;
    // the legend is HTML below the chart: the chart's height is the rows'
    const height = Math.max(narrow ? 320 : 380, 170 + labels.length * laneHeight);
    const when = ds.utc(shownOrigin, true);
    const layout = ds.layout({
      height,
      barmode: "overlay",
      bargap: 0.15,
      hovermode: "closest",
      dragmode: "zoom",
      // above the "Busy %" panel: room for plotly's mode bar, so it covers nothing
      margin: { l: 10, r: 10, t: 34, b: 10 },
      showlegend: false,
      xaxis: ds.axis(`Time (s after ${narrow ? when.slice(11) : when} UTC)`, {
        range: [view.start - shownOrigin, view.stop - shownOrigin], zeroline: false, anchor: "y",
        showgrid: true, nticks: narrow ? 5 : 12,
      }),
      yaxis: ds.axis("Worker thread", {
        type: "category", categoryorder: "array", categoryarray: labels, range: [labels.length - 0.5, -0.5],
        fixedrange: true, domain: [0, 0.8], tickfont: { size: narrow ? 9 : 11 },
      }),
      yaxis2: ds.axis("Busy %", { domain: [0.86, 1], range: [0, 100], fixedrange: true, tickvals: [0, 50, 100], anchor: "x" }),
      shapes: idleShapes(),
    });
    drawing = true;
    legend(traces);
    // the box as tall as the chart: a redraw on resize left it at its min-height, the
    // chart spilling over the legend below
    chart.style.height = `${height + chart.offsetHeight - chart.clientHeight}px`; // + borders
    const config = { ...ds.config, doubleClick: "autosize" };
    let done;
    try {
      done = Plotly.react(chart, traces, layout, config);
    } catch (err) {
      done = Promise.reject(err);
    }
    // plotly's react can throw when a mode-bar action left its state half-changed
    // ("reading 'select'"): then the chart is drawn anew, its events bound again
    return done.catch(() => { bound = false; return Plotly.newPlot(chart, traces, layout, config).then(bind); })
      .finally(() => { drawing = false; });
  }

  // --- state: window and filters in the URL -----------------------------------------
  const number = (v) => (v === null || v === undefined ? null : Number(v).toFixed(6));
  function wanted() {
    const p = new URLSearchParams();
    for (const key of [...FILTERS, "start", "stop", "max_tasks"]) {
      const v = ds.state.get(key);
      if (v) p.set(key, v);
    }
    // a bin every two pixels: as fine as the eye reads, half the work of one a pixel
    p.set("bins", String(Math.max(50, Math.min(4000, Math.round((chart.clientWidth || 1000) / 2)))));
    return p;
  }

  async function load() {
    const mine = ++asked;
    status("Loading…");
    let body;
    try {
      body = await ds.json(`${base}/timeline?${wanted()}`);
    } catch (err) {
      if (mine === asked) status(`Could not load the window: ${err.message}`);
      return;
    }
    if (mine !== asked) return;
    view = body;
    loads += 1;
    document.body.dataset.loads = String(loads);
    await show();
  }

  function choose(start, stop) {
    ds.state.set({ start: number(start), stop: number(stop) });
    load();
  }

  let bound = false;
  function bind() {
    if (bound) return;
    bound = true;
    chart.on("plotly_relayout", (ev) => {
      if (drawing) return;
      if (ev["xaxis.autorange"]) { choose(null, null); return; }
      let a = ev["xaxis.range[0]"];
      let b = ev["xaxis.range[1]"];
      if (Array.isArray(ev["xaxis.range"])) [a, b] = ev["xaxis.range"];
      if (a === undefined || b === undefined) return;
      const start = shownOrigin + Number(a);
      const stop = shownOrigin + Number(b);
      if (Math.abs(start - view.start) < 1e-6 && Math.abs(stop - view.stop) < 1e-6) return;
      choose(start, stop);
    });
    chart.on("plotly_click", (ev) => {
      const key = ev.points && ev.points[0] && ev.points[0].customdata;
      if (key) showTask(key);
    });
  }

  document.getElementById("reset-zoom").addEventListener("click", () => choose(null, null));
  document.getElementById("zoom-out").addEventListener("click", () => {
    const first = view.totals.first ?? view.start;
    const last = view.totals.last ?? view.stop;
    const half = view.stop - view.start;
    const start = Math.max(first, view.start - half / 2);
    const stop = Math.min(last, view.stop + half / 2);
    if (start <= first && stop >= last) choose(null, null);
    else choose(start, stop);
  });
  for (const button of document.querySelectorAll(".clear-filter")) {
    button.addEventListener("click", () => {
      ds.state.set({ [button.dataset.filter]: null, start: null, stop: null });
      load();
    });
  }
  ds.state.onChange(load);

  // --- the rest of the page ---------------------------------------------------------
  function status(text) {
    document.getElementById("timeline-status").textContent = text;
  }

  function setStat(key, text) {
    document.querySelector(`[data-stat="${key}"]`).textContent = text;
  }

  function fillFilters() {
    let any = false;
    for (const key of FILTERS) {
      const value = view.filters[key];
      const el = document.querySelector(`.filter[data-filter="${key}"]`);
      el.hidden = !value;
      el.querySelector(".filter-value").textContent = value || "";
      any = any || Boolean(value);
    }
    document.getElementById("filters").hidden = !any;
  }

  function row(tbody, cells) {
    const tr = tbody.insertRow();
    tr.append(...cells);
    return tr;
  }
  function keyButton(key) {
    const td = document.createElement("td");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "key-link";
    button.textContent = key;
    button.addEventListener("click", () => showTask(key));
    td.appendChild(button);
    return td;
  }
  const groupUrl = (group) => {
    const p = new URLSearchParams(window.location.search);
    p.set("group", group);
    p.delete("start");
    p.delete("stop");
    return `${window.location.pathname}?${p}`;
  };

  function fillTables() {
    const gaps = document.querySelector("#idle-gaps tbody");
    gaps.replaceChildren();
    for (const g of [...view.idle_gaps.slice(0, 5), ...view.lane_gaps.slice(0, 5)]) {
      row(gaps, [ds.cell(ds.duration(g.duration_s), { cls: "num" }), ds.cell(g.lane === null ? "all threads" : g.lane),
        ds.cell(ds.utc(g.start, true)), ds.cell(ds.utc(g.stop, true))]);
    }
    const note = view.raw ? "Exact: every task of the window is known." : `To within ${ds.duration(view.resolution_s)} (a bin of the window); zoom in for exact gaps.`;
    document.getElementById("gaps-note").textContent = (gaps.rows.length ? "" : "No idle time in this window. ") + note;
    const slowest = document.querySelector("#slowest tbody");
    slowest.replaceChildren();
    for (const t of view.slowest) {
      row(slowest, [ds.cell(ds.duration(t.stop - t.start), { cls: "num" }), ds.cell(ds.duration(t.compute_s), { cls: "num" }),
        keyButton(t.key), ds.cell(t.group, { href: groupUrl(t.group) }), ds.cell(laneOf(t).label),
        ds.cell(ds.utc(t.start, true)), ds.cell(ds.bytes(t.nbytes), { cls: "num" })]);
    }
  }

  async function showTask(key) {
    const div = document.getElementById("task-detail");
    let detail;
    try {
      detail = await ds.json(`${base}/tasks/${encodeURIComponent(key)}`);
    } catch (err) {
      div.replaceChildren(Object.assign(document.createElement("p"), { className: "bad", textContent: err.message }));
      return;
    }
    const title = Object.assign(document.createElement("p"), { className: "task-key" });
    title.append(Object.assign(document.createElement("code"), { textContent: detail.key }),
      ` · ${detail.executions.length === 1 ? "one execution" : `${detail.executions.length} executions (recomputed)`}`);
    const table = document.createElement("table");
    table.className = "listing";
    table.id = "task-executions";
    table.createTHead().innerHTML = "<tr><th>Worker · thread</th><th>Start (UTC)</th><th class='num'>Duration</th><th class='num'>Compute</th><th class='num'>Output</th><th>State</th><th>Actions</th></tr>";
    const tbody = table.createTBody();
    for (const t of detail.executions) {
      row(tbody, [ds.cell(detail.lanes[t.lane].label), ds.cell(ds.utc(t.start, true)), ds.cell(ds.duration(t.stop - t.start), { cls: "num" }),
        ds.cell(ds.duration(t.compute_s), { cls: "num" }), ds.cell(ds.bytes(t.nbytes), { cls: "num" }), ds.cell(t.state, { cls: t.state === "memory" ? "" : "bad" }),
        ds.cell(t.actions.map((a) => `${a.action} ${ds.duration(a.stop - a.start)}${a.source ? ` from ${a.source}` : ""}`).join(", "))]);
    }
    const wrap = Object.assign(document.createElement("div"), { className: "scroll-x" });
    wrap.appendChild(table);
    div.replaceChildren(title, wrap);
    div.dataset.key = detail.key;
  }

  async function show() {
    const t = view.totals;
    setStat("window", ds.duration(view.stop - view.start));
    setStat("tasks", ds.count(t.tasks));
    setStat("threads", `${ds.count(t.workers)} · ${ds.count(t.threads)}`);
    setStat("busy", ds.duration(t.busy_s));
    setStat("utilisation", ds.percent(t.utilisation));
    fillFilters();
    fillTables();
    const bins = view.lanes.reduce((n, l) => Math.max(n, l.bins ? l.bins.start.length : 0), 0);
    status(view.raw
      ? `Every task of the window: ${ds.count(view.tasks.length)}.`
      : `${ds.count(t.tasks)} tasks: each thread's time in bins of ${ds.duration(view.resolution_s)} (up to ${ds.count(bins)} a thread); zoom in to see the tasks.`);
    document.body.dataset.mode = view.raw ? "raw" : "binned";
    await draw();
    bind();
    document.body.dataset.window = `${number(view.start)},${number(view.stop)}`;
  }

  show();
  // Redrawn for a new width only (the rows' labels depend on it); a taller window
  // changes nothing
  let drawnWidth = chart.clientWidth;
  window.addEventListener("resize", () => {
    if (drawing || chart.clientWidth === drawnWidth) return;
    drawnWidth = chart.clientWidth;
    draw();
  });
})();
