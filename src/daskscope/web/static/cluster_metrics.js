// Cluster page, spans tab: fine performance metrics drawn as Dask's "Fine Performance
// Metrics" view draws them — per task prefix a horizontal bar stacked by activity, in
// seconds, bytes or counts (the switch is metrics_unit= in the URL), of the whole
// cluster or of one span's subtree. What the figures mean comes with the JSON
// (views/fine_metrics.py, from daskscope.catalogue), not from this file.
// dsMetrics.render(element, clusterId, pageData, {spanId, tag}) draws into element.
"use strict";
window.dsMetrics = (() => {
  const TOP = 12; // prefixes drawn; the rest are summed into one bar
  const TOOLBAR = 34; // px above the bars for plotly's mode bar
  const TITLES = { seconds: "task time by activity (seconds)", bytes: "data by activity (bytes)",
                   count: "keys by activity (count)" };
  let current = null; // the last render's arguments, to draw again on Back/Forward
  let drawing = 0; // a newer render makes an older answer stale

  const el = (tag, props, ...children) => {
    const node = Object.assign(document.createElement(tag), props || {});
    node.append(...children);
    return node;
  };


  // Per prefix and activity the values of one unit; prefixes by total, largest first
  function pivot(body, unit) {
    const byPrefix = new Map();
    for (const m of body.metrics) {
      if (m.unit !== unit) continue;
      const row = byPrefix.get(m.prefix) || { prefix: m.prefix, total: 0, values: {} };
      row.values[m.activity] = (row.values[m.activity] || 0) + m.value;
      row.total += m.value;
      byPrefix.set(m.prefix, row);
    }
    const rows = [...byPrefix.values()].sort((a, b) => b.total - a.total || a.prefix.localeCompare(b.prefix));
    const activities = body.activities.filter((a) => rows.some((r) => a.name in r.values));
    return { rows, activities };
  }

  // The TOP largest prefixes and one bar for the rest
  function topRows(rows) {
    if (rows.length <= TOP + 1) return rows;
    const rest = { prefix: `${rows.length - TOP} other prefixes`, total: 0, values: {}, rest: true };
    for (const r of rows.slice(TOP)) {
      rest.total += r.total;
      for (const [a, v] of Object.entries(r.values)) rest.values[a] = (rest.values[a] || 0) + v;
    }
    return [...rows.slice(0, TOP), rest];
  }

  async function drawChart(div, body, unit) {
    const { rows, activities } = pivot(body, unit);
    const shown = topRows(rows);
    const labels = shown.map((r) => ds.text(r.prefix));
    const traces = activities.map((a) => {
      const x = shown.map((r) => r.values[a.name] || 0);
      return {
        type: "bar", orientation: "h", name: ds.text(a.name), y: labels, x, marker: { color: a.colour },
        customdata: x.map((v) => ds.value(v, unit)),
        hovertemplate: `%{y}<br>${ds.text(a.name)}: %{customdata}<extra></extra>`,
      };
    });
    const max = Math.max(0, ...shown.map((r) => r.total));
    const xaxis = unit === "bytes"
      ? ds.axis(TITLES.bytes, (({ tickvals, ticktext, range }) => ({ tickvals, ticktext, range }))(ds.bytesTicks(max)))
      : ds.axis(TITLES[unit] || `by activity (${unit})`, { rangemode: "tozero", ticksuffix: unit === "seconds" ? " s" : "" });
    // Narrow screens: long prefixes cut (whole in the tooltip), so the bars keep room
    const width = div.clientWidth || 800;
    const longest = width < 640 ? 16 : 40;
    const cut = (p) => (p.length > longest ? `${p.slice(0, longest - 1)}…` : p);
    const left = 7 * Math.max(...shown.map((r) => cut(r.prefix).length)) + 40;
    // The legend below the axis title, across the whole width: as many rows as it takes
    let legendRows = 1;
    let used = 0;
    for (const a of activities) {
      const w = 40 + 7 * a.name.length;
      if (used + w > width - 20 && used > 0) { legendRows += 1; used = 0; }
      used += w;
    }
    if (width < 640) legendRows = activities.length; // plotly stacks a narrow legend
    const bottom = 70 + 22 * legendRows;
    await ds.plotly();
    await Plotly.newPlot(div, traces, ds.layout({
      barmode: "stack", height: 26 * shown.length + 30 + TOOLBAR + bottom, xaxis,
      yaxis: ds.axis("task prefix", { autorange: "reversed", type: "category", automargin: false,
                                      tickvals: labels, ticktext: shown.map((r) => ds.text(cut(r.prefix))) }),
      legend: { orientation: "h", xref: "container", x: 0, yref: "container", y: 0, yanchor: "bottom", traceorder: "normal" },
      // room for the longest prefix and the axis title (plotly's automargin overlaps
      // them), and above the bars for plotly's mode bar, which covered the top one
      margin: { l: left, r: 20, t: TOOLBAR, b: bottom },
    }), ds.config);
  }

  // Every prefix of the unit, formatted: activities as columns
  function table(body, unit) {
    const { rows, activities } = pivot(body, unit);
    const head = el("tr", {}, el("th", {}, "Prefix"), ...activities.map((a) => el("th", { className: "num" }, a.name)), el("th", { className: "num" }, "Total"));
    const lines = rows.map((r) => el("tr", {}, ds.cell(r.prefix),
      ...activities.map((a) => ds.cell(a.name in r.values ? ds.value(r.values[a.name], unit) : "", { cls: "num" })),
      ds.cell(ds.value(r.total, unit), { cls: "num" })));
    return el("table", { className: "listing compact", id: "fine-metrics-table" }, el("thead", {}, head), el("tbody", {}, ...lines));
  }

  function explanation(body) {
    const items = body.activities.map((a) => {
      const swatch = el("i", { className: "dsw-swatch" });
      swatch.style.background = a.colour;
      return el("li", {}, swatch, el("b", {}, a.name), a.meaning ? `: ${a.meaning}` : ": not documented by Dask (a custom activity)");
    });
    return el("details", { className: "dsm-activities" }, el("summary", {}, "What the activities mean"), el("ul", {}, ...items));
  }

  function switcher(units, unit, asTable, redraw) {
    const buttons = units.map((u) => {
      const b = el("button", { type: "button", textContent: u, className: "dsm-unit" });
      b.dataset.unit = u;
      b.setAttribute("aria-pressed", String(u === unit));
      b.addEventListener("click", () => { ds.state.set({ metrics_unit: u === "seconds" ? null : u }); redraw(); });
      return b;
    });
    const box = el("input", { type: "checkbox", id: "fine-metrics-as-table", checked: asTable });
    box.addEventListener("change", () => { ds.state.set({ metrics_table: box.checked ? "1" : null }); redraw(); });
    return el("div", { className: "controls dsm-controls" }, el("span", { className: "dsm-group", role: "group" }, "Show ", ...buttons),
      el("label", {}, box, " show as table"));
  }

  function scopeText(body, pageData) {
    if (body.span_id) {
      const name = body.span_name && body.span_name.length ? body.span_name.join(" › ") : body.span_id;
      return `span ${name} and the spans below it`;
    }
    if (body.tag) return `spans tagged ${body.tag}`;
    return `the whole cluster${pageData && pageData.cluster ? ` (${pageData.cluster.name})` : ""}`;
  }

  async function render(element, clusterId, pageData, options) {
    const { spanId, tag } = options || {};
    current = { element, clusterId, pageData, options };
    const mine = ++drawing;
    element.dataset.ready = "";
    const params = new URLSearchParams();
    if (spanId) params.set("span", spanId);
    if (tag) params.set("tag", tag);
    const query = params.toString();
    const body = await ds.json(`/api/v1/clusters/${encodeURIComponent(clusterId)}/metrics${query ? `?${query}` : ""}`);
    if (mine !== drawing) return; // a newer filter was asked for meanwhile
    draw(element, body, pageData);
  }

  function draw(element, body, pageData) {
    const redraw = () => draw(element, body, pageData);
    const wanted = ds.state.get("metrics_unit", "seconds");
    const unit = body.units.includes(wanted) ? wanted : body.units[0];
    const asTable = ds.state.get("metrics_table") === "1";
    const caption = el("p", { className: "dsm-scope" }, `Fine performance metrics of ${scopeText(body, pageData)}`);
    const note = el("p", { className: "muted dsm-note" }, `Summed over tasks per task prefix, stacked by activity. In the span tree, ${body.note}.`);
    if (!unit) {
      element.replaceChildren(caption, el("p", { className: "empty" }, "No fine metrics recorded here."));
      Object.assign(element.dataset, { ready: "1", unit: "", span: body.span_id || "" });
      return;
    }
    const chart = el("div", { className: "dsm-chart" });
    chart.dataset.chart = "fine-metrics";
    const parts = [caption, switcher(body.units, unit, asTable, redraw), note, asTable ? table(body, unit) : chart, explanation(body)];
    element.replaceChildren(...parts);
    Object.assign(element.dataset, { unit, span: body.span_id || "" });
    const done = () => { element.dataset.ready = "1"; };
    if (asTable) done();
    else drawChart(chart, body, unit).then(done);
  }

  // Back/Forward: draw the unit and table state of the URL
  ds.state.onChange(() => {
    if (current && current.element.isConnected) {
      const { element, clusterId, pageData, options } = current;
      render(element, clusterId, pageData, options);
    }
  });

  return { render };
})();
