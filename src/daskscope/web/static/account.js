// Account page: weekly usage bars (click a bin: filter the listing; double-click: clear)
// and the sortable cluster listing.
"use strict";
(() => {
  const data = ds.data();
  // The range form submits on change (no inline handlers: the CSP forbids them).
  const days = document.getElementById("range-days");
  if (days) days.addEventListener("change", () => days.form.submit());
  const table = document.getElementById("cluster-listing");
  const filterLabel = document.getElementById("listing-filter");
  let rows = data.clusters;
  let sort = { key: null, desc: false };

  function renderListing() {
    if (!table) return;
    const tbody = table.tBodies[0];
    tbody.replaceChildren();
    for (const c of rows) {
      const tr = document.createElement("tr");
      const st = c.statistics;
      tr.dataset.id = c.id;
      tr.append(
        ds.cell(c.user), ds.cell(c.name, { href: `/clusters/${encodeURIComponent(c.id)}` }),
        ds.cell(ds.utc(c.started_at)), ds.cell(ds.utc(c.stopped_at)),
        ds.cell(ds.duration(st.duration_s), { cls: "num" }), ds.cell(ds.num(st.workers_peak), { cls: "num" }),
        ds.cell(ds.money(st.cost && st.cost.total, st.cost && st.cost.currency), { cls: "num" }),
        ds.cell(ds.num(st.tasks_executed), { cls: "num" }),
        ds.cell(ds.num(st.tasks_erred), { cls: st.tasks_erred ? "num bad" : "num" }),
        ds.cell(ds.bytes(st.bytes_processed), { cls: "num" }));
      tbody.appendChild(tr);
    }
    if (!rows.length) {
      const tr = document.createElement("tr");
      const td = ds.cell("No clusters in this selection.", { cls: "empty" });
      td.colSpan = 10; tr.appendChild(td); tbody.appendChild(tr);
    }
  }

  // What each column sorts by: a field of the listing's rows or of their statistics.
  const columns = {
    workers: (c) => c.statistics.workers_peak,
    cost: (c) => (c.statistics.cost ? c.statistics.cost.total : null),
  };
  const valueAt = (row, key) => (columns[key] ? columns[key](row) : key in row ? row[key] : row.statistics[key]);

  function applySort() {
    if (!sort.key) return;
    const k = sort.key;
    rows = [...rows].sort((a, b) => {
      const x = valueAt(a, k) ?? null; const y = valueAt(b, k) ?? null;
      const cmp = x === y ? 0 : x === null ? -1 : y === null ? 1 : x < y ? -1 : 1;
      return sort.desc ? -cmp : cmp;
    });
  }

  if (table) {
    for (const th of table.tHead.rows[0].cells) {
      th.addEventListener("click", () => {
        sort = { key: th.dataset.key, desc: sort.key === th.dataset.key ? !sort.desc : false };
        for (const other of table.tHead.rows[0].cells) other.classList.remove("sorted-asc", "sorted-desc");
        th.classList.add(sort.desc ? "sorted-desc" : "sorted-asc");
        applySort(); renderListing();
      });
    }
  }

  // A double-click also fires a click: only the latest request may fill the table.
  let latest = 0;
  async function loadListing(user, weekStart) {
    const params = new URLSearchParams();
    if (user !== null) { params.set("user", user); params.set("week_start", weekStart); }
    const mine = ++latest;
    const body = await ds.json(`/api/v1/clusters?${params}`);
    if (mine !== latest) return;
    rows = body.clusters; applySort(); renderListing();
    if (user !== null) {
      filterLabel.textContent = `${user}, week of ${ds.utc(weekStart).slice(0, 10)} (double-click the chart to clear)`;
      document.body.dataset.filter = `${user}|${weekStart}`;
    } else {
      filterLabel.textContent = "the 100 most recent";
      document.body.dataset.filter = "";
    }
  }

  const chart = document.getElementById("usage-chart");
  const metricSelect = document.getElementById("usage-metric");
  function drawUsage() {
    if (!chart) return;
    const metric = metricSelect.value;
    const weeks = data.usage.weeks.map((w) => new Date(w * 1000).toISOString().slice(0, 10));
    const traces = data.usage.members.map((m) => ({
      type: "bar", name: ds.text(m.user), x: weeks, y: m[metric], meta: m.user,
      customdata: data.usage.weeks.map((w, i) => [w, m.clusters[i], ds.text(m.user)]),
      hovertemplate: `<b>%{customdata[2]}</b><br>week of %{x}<br>%{y:.2f} ${metric.replace("_", " ")}<br>%{customdata[1]} clusters<extra></extra>`,
    }));
    Plotly.react(chart, traces, ds.layout({
      barmode: "stack", xaxis: { type: "category", title: "week (Monday, UTC)" },
      yaxis: { title: metric.replace("_", " ") }, showlegend: true,
    }), ds.config).then(() => { chart.dataset.ready = "1"; });
  }
  if (chart) {
    drawUsage();
    metricSelect.addEventListener("change", drawUsage);
    // Plotly reports a double-click as click, doubleclick, click: wait out the
    // double-click window before filtering, and ignore the click that trails it.
    let pending = null;
    let ignoreUntil = 0;
    chart.on("plotly_click", (ev) => {
      const p = ev.points[0];
      if (!p || !(p.y > 0) || Date.now() < ignoreUntil) return;
      clearTimeout(pending);
      pending = setTimeout(() => loadListing(p.data.meta, p.customdata[0]), 350);
    });
    chart.on("plotly_doubleclick", () => {
      clearTimeout(pending);
      ignoreUntil = Date.now() + 500;
      loadListing(null, null);
    });
  }
})();
