// Member usage as a member × week heat map: every week of the range is a column (a week
// nobody used is a grey column, not a gap), the top members by the chosen figure are
// rows and the rest are one "others" row, so 100 members read like 10. The same values
// are a table of buttons for the keyboard. Selecting a cell is the page's business:
// draw() gets the selection and calls select(user, week) / clear().
"use strict";
const accountUsage = (() => {
  const TOP = 15;
  // grey for 0 (idle), then light to dark blue
  const SCALE = [[0, "#eceef2"], [1e-9, "#d6e4f5"], [0.5, "#5b92d6"], [1, "#0b3d91"]];
  const HIGHLIGHT = "#d62728";
  const weekLabel = (w) => ds.utc(w).slice(0, 10);
  const total = (values) => values.reduce((a, b) => a + b, 0);

  // The rows drawn: top members by the figure, then the others summed per week
  function rows(usage, metric) {
    const ranked = usage.members
      .map((m) => ({ m, total: total(m[metric]) }))
      .sort((a, b) => b.total - a.total || (a.m.user < b.m.user ? -1 : 1));
    const shown = ranked.length > TOP + 1 ? ranked.slice(0, TOP) : ranked;
    const out = shown.map(({ m }) => ({ user: m.user, label: m.user, values: m[metric], clusters: m.clusters }));
    const rest = ranked.slice(shown.length).map(({ m }) => m);
    if (rest.length) {
      const sum = (key) => usage.weeks.map((_, i) => rest.reduce((a, m) => a + m[key][i], 0));
      out.push({
        user: null, others: new Set(rest.map((m) => m.user)),
        label: `others (${rest.length} members)`, values: sum(metric), clusters: sum("clusters"),
      });
    }
    return out;
  }

  // Row and column of the selection (-1: none); a user among the others selects their row
  function position(drawn, weeks, sel) {
    const col = sel.week ? weeks.indexOf(sel.week) : -1;
    let row = -1;
    if (sel.user) {
      row = drawn.findIndex((r) => r.user === sel.user);
      if (row < 0) row = drawn.findIndex((r) => r.others && r.others.has(sel.user));
    }
    return { row, col };
  }

  function shapes(drawn, weeks, at) {
    const box = (x0, x1, y0, y1) => ({
      type: "rect", xref: "x", yref: "y", x0, x1, y0, y1,
      line: { color: HIGHLIGHT, width: 3 }, fillcolor: "rgba(0,0,0,0)",
    });
    const { row, col } = at;
    if (row >= 0 && col >= 0) return [box(col - 0.5, col + 0.5, row - 0.5, row + 0.5)];
    if (col >= 0) return [box(col - 0.5, col + 0.5, -0.5, drawn.length - 0.5)];
    if (row >= 0) return [box(-0.5, weeks.length - 0.5, row - 0.5, row + 0.5)];
    return [];
  }

  function table(el, drawn, weeks, at, fmt, pick) {
    const head = document.createElement("tr");
    for (const text of ["member", ...weeks]) {
      const th = document.createElement("th");
      th.scope = "col"; th.textContent = text; head.appendChild(th);
    }
    const body = drawn.map((r, i) => {
      const tr = document.createElement("tr");
      const th = document.createElement("th");
      th.scope = "row"; th.textContent = r.label; tr.appendChild(th);
      r.values.forEach((v, j) => {
        const td = document.createElement("td");
        const button = document.createElement("button");
        button.type = "button";
        button.className = v > 0 ? "bin" : "bin idle";
        button.textContent = v > 0 ? fmt(v) : "0"; // idle weeks: short, the unit is above
        button.dataset.week = weeks[j];
        button.setAttribute("aria-label", `${r.label}, week of ${weeks[j]}: ${fmt(v)}`);
        button.setAttribute("aria-pressed", String(i === at.row && j === at.col));
        button.addEventListener("click", () => pick(r, weeks[j]));
        td.appendChild(button); tr.appendChild(td);
      });
      return tr;
    });
    const thead = document.createElement("thead");
    thead.appendChild(head);
    const tbody = document.createElement("tbody");
    tbody.append(...body);
    el.replaceChildren(thead, tbody);
  }

  // Draw the heat map and its table; select(user|null, week) and clear() on a click
  function draw({ chart, tableEl, usage, figure, metric, sel, currency, select, clear }) {
    const weeks = usage.weeks.map(weekLabel);
    const drawn = rows(usage, metric);
    // the unit as values are written: "h", "core-hours", "USD"
    const spec = DS_FORMAT.units[figure.unit] || {};
    const unit = spec.kind === "money" ? currency : (spec.suffix || figure.unit).trim();
    const fmt = (v) => ds.value(v, figure.unit, currency);
    const at = position(drawn, weeks, sel);
    const pick = (r, week) => select(r.user, week);
    table(tableEl, drawn, weeks, at, fmt, pick);
    const text = drawn.map((r) => r.values.map((v, i) =>
      `<b>${ds.text(r.label)}</b><br>week of ${weeks[i]}<br>${ds.text(fmt(v))}<br>${ds.count(r.clusters[i])} ${r.clusters[i] === 1 ? "cluster" : "clusters"}`));
    // the scale spans the members' cells: the others' sums (of many members) would
    // make every member's cell pale, so theirs show at most the darkest colour
    const max = Math.max(0, ...drawn.filter((r) => r.user !== null).flatMap((r) => r.values));
    const trace = {
      type: "heatmap", x: weeks, y: drawn.map((r) => ds.text(r.label)), z: drawn.map((r) => r.values),
      text, hovertemplate: "%{text}<extra></extra>", zmin: 0, zmax: max > 0 ? max : 1,
      colorscale: SCALE, xgap: 1, ygap: 1,
      colorbar: { title: { text: ds.text(`${figure.label} (${unit})`), side: "right" }, thickness: 14, len: 1 },
    };
    // every week keeps a column wide enough for its label; past the screen the box
    // scrolls sideways (narrow screens get narrower columns and smaller labels)
    const narrow = window.innerWidth < 640;
    chart.style.minWidth = `${weeks.length * (narrow ? 15 : 26) + 200}px`;
    const height = Math.max(240, drawn.length * 24 + 150);
    chart.style.height = `${height}px`;
    const layout = ds.layout({
      height, margin: { l: 10, r: 10, t: 10, b: 10 },
      xaxis: ds.axis("week (Monday, UTC)", { type: "category", tickmode: "array", tickvals: weeks, ticktext: weeks, tickangle: -60,
        tickfont: { size: narrow ? 9 : 11 } }),
      yaxis: ds.axis("member", { type: "category", autorange: "reversed" }),
      shapes: shapes(drawn, weeks, at),
    });
    chart.dataset.ready = "";
    // no mode bar: it would cover the top row's cells on hover (and zoom adds nothing)
    const config = { ...ds.config, displayModeBar: false };
    return Plotly.react(chart, [trace], layout, config).then(() => {
      chart.dataset.ready = "1";
      chart.dataset.rows = String(drawn.length);
      if (!chart.dataset.listening) listen(chart, () => chart.drawn, clear);
      chart.drawn = { drawn, weeks, pick };
    });
  }

  // Plotly reports a double-click as click, doubleclick, click: wait out the
  // double-click window before selecting, and ignore the click that trails it.
  function listen(chart, current, clear) {
    chart.dataset.listening = "1";
    let pending = null;
    let ignoreUntil = 0;
    chart.on("plotly_click", (ev) => {
      const p = ev.points && ev.points[0];
      if (!p || Date.now() < ignoreUntil) return;
      const { drawn, weeks, pick } = current();
      const [row, col] = Array.isArray(p.pointIndex) ? p.pointIndex : [-1, -1];
      if (!drawn[row] || !weeks[col]) return;
      clearTimeout(pending);
      pending = setTimeout(() => pick(drawn[row], weeks[col]), 350);
    });
    chart.on("plotly_doubleclick", () => {
      clearTimeout(pending);
      ignoreUntil = Date.now() + 500;
      clear();
    });
  }

  return { draw, TOP, weekLabel };
})();
