// Cluster page: tabs, the view state in the URL (tab, span, computation, profile and
// flame zoom) and Back/Forward, the reports of this cluster, and the live mode of a
// running cluster. Each part of the page is drawn by its own file (cluster_*.js).
"use strict";
(() => {
  let data = ds.data();
  const clusterId = data.cluster.id;
  const base = `/api/v1/clusters/${encodeURIComponent(clusterId)}`;
  const pageData = `/clusters/${encodeURIComponent(clusterId)}/data`; // the view and its prefix chart
  const TABS = [...document.querySelectorAll("#tabs [role=tab]")].map((t) => t.dataset.tab);
  const shown = new Set(); // tabs drawn at least once
  let metricsKey = null; // the span filter the fine metrics were drawn for
  let workersStale = false; // live mode has newer samples than the charts drawn

  // --- tabs -------------------------------------------------------------------------
  const tabOf = () => {
    const tab = ds.state.get("tab", "overview");
    return TABS.includes(tab) ? tab : "overview";
  };

  function showTab(tab) {
    for (const button of document.querySelectorAll("#tabs [role=tab]")) {
      const on = button.dataset.tab === tab;
      button.setAttribute("aria-selected", String(on));
      button.tabIndex = on ? 0 : -1;
      document.getElementById(button.getAttribute("aria-controls")).hidden = !on;
    }
    document.body.dataset.tab = tab;
    const first = !shown.has(tab);
    shown.add(tab);
    if (tab === "overview") window.dsPrefixes.shown(document.getElementById("prefix-chart"));
    if (tab === "workers" && (first || workersStale) && window.dsWorkers) {
      workersStale = false;
      window.dsWorkers.render(document.getElementById("workers-charts"), clusterId, data);
    }
    if (tab === "spans") drawMetrics();
    if (tab === "spans" && first && window.dsMetricIntervals) {
      window.dsMetricIntervals.render(document.getElementById("fine-metric-intervals"), clusterId);
    }
    if (tab === "profile") window.dsProfile.show();
    if (tab === "reports" && first) drawReports();
  }

  function drawMetrics(force) {
    const options = window.dsSpans.metricsOptions();
    const key = JSON.stringify(options);
    if (!shown.has("spans") || (key === metricsKey && !force) || !window.dsMetrics) return;
    metricsKey = key;
    window.dsMetrics.render(document.getElementById("fine-metrics"), clusterId, data, options);
  }

  const tablist = document.getElementById("tabs");
  tablist.addEventListener("click", (ev) => {
    const button = ev.target.closest("[role=tab]");
    if (!button) return;
    ds.state.set({ tab: button.dataset.tab === "overview" ? null : button.dataset.tab });
    showTab(button.dataset.tab);
  });
  // Arrow keys (and Home/End) move along the tabs; Enter or Space opens one
  tablist.addEventListener("keydown", (ev) => {
    const buttons = [...tablist.querySelectorAll("[role=tab]")];
    const at = buttons.indexOf(document.activeElement);
    if (at < 0) return;
    const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: buttons.length - 1 }[ev.key];
    if (to === undefined) return;
    ev.preventDefault();
    buttons[(to + buttons.length) % buttons.length].focus();
  });

  // --- state ------------------------------------------------------------------------
  function chooseSpan(value) {
    ds.state.set({ span: value });
    applySpan();
  }

  async function applySpan() {
    await window.dsSpans.apply();
    drawMetrics();
  }

  function toggleComputation(id) {
    ds.state.set({ computation: id, fold: null, open: null }); // the graph's state was the other's
    window.dsComputations.show(id);
  }

  // Everything from the URL: first load, Back and Forward
  function restore() {
    showTab(tabOf());
    window.dsComputations.show(ds.state.get("computation"));
    applySpan();
    if (tabOf() !== "profile" && shown.has("profile")) window.dsProfile.sync();
  }

  // --- reports ----------------------------------------------------------------------
  async function drawReports() {
    const div = document.getElementById("cluster-reports");
    const body = await ds.json("/api/v1/reports");
    const mine = body.reports.filter((r) => r.cluster_id === clusterId);
    if (!mine.length) {
      div.replaceChildren(Object.assign(document.createElement("p"), { className: "empty", textContent: "No performance report uploaded for this cluster." }));
      return;
    }
    const table = document.createElement("table");
    table.className = "listing";
    table.id = "report-listing";
    table.createTHead().innerHTML = "<tr><th>Name</th><th>Uploaded (UTC)</th><th class='num'>Size</th></tr>";
    const tbody = table.createTBody();
    for (const r of mine) {
      const tr = tbody.insertRow();
      tr.append(ds.cell(r.name, { href: `/reports/${encodeURIComponent(r.id)}` }), ds.cell(ds.utc(r.uploaded_at)), ds.cell(ds.bytes(r.size), { cls: "num" }));
    }
    div.replaceChildren(table);
  }

  // --- live mode --------------------------------------------------------------------
  const LIVE_SECONDS = window.daskscopeLiveSeconds || 5;

  function setStat(key, text, bad) {
    const el = document.querySelector(`[data-stat="${key}"]`);
    el.textContent = text;
    if (bad !== undefined) el.classList.toggle("bad", bad);
  }

  // Workers' charts: drawn again now when in sight, else when their tab is next shown
  async function refreshWorkers() {
    if (!shown.has("workers")) return;
    if (tabOf() !== "workers") { workersStale = true; return; }
    const body = await window.dsLive.changed(`${base}/workers`);
    if (body) await window.dsWorkers.render(document.getElementById("workers-charts"), clusterId, data, body);
  }

  async function refreshFrom(view) {
    const st = view.statistics;
    setStat("duration", ds.duration(st.duration_s));
    setStat("workers", `${ds.num(st.workers_peak)} · ${ds.num(st.threads_peak)} threads`);
    setStat("tasks_executed", ds.num(st.tasks_executed));
    setStat("tasks_erred", ds.num(st.tasks_erred), st.tasks_erred > 0);
    setStat("bytes_processed", ds.bytes(st.bytes_processed));
    setStat("compute", ds.duration(view.cluster.compute_seconds));
    setStat("cost", st.cost ? ds.money(st.cost.total, st.cost.currency) : ds.MISSING);
    data = { ...data, ...view };
    window.dsComputations.update(view.computations, view.activity_colours);
    window.dsProfile.fillScopes(view.computations);
    window.dsLive.update(view);
    window.dsSpans.refresh(data);
    await window.dsSpans.apply();
    drawMetrics(true); // new spans' metrics (only when its tab has been shown)
    await refreshWorkers();
    if (!view.running) {
      document.getElementById("running-badge").hidden = true;
      document.getElementById("stopped-at").textContent = ds.utc(view.cluster.stopped_at);
      document.getElementById("live-note").textContent = " · stopped: live updates ended";
    }
  }

  async function poll() {
    let view = null;
    let running = true;
    try {
      view = await window.dsLive.changed(pageData); // null: unchanged since the last poll
      if (view) {
        running = view.running;
        await refreshFrom(view);
      }
      document.getElementById("live-note").textContent = running ? " · live" : " · stopped: live updates ended";
      document.getElementById("live-checked").textContent = running ? `, checked ${ds.utc(Date.now() / 1000)} UTC` : "";
      document.body.dataset.livePolls = String(Number(document.body.dataset.livePolls || 0) + 1);
    } catch (err) {
      document.getElementById("live-note").textContent = ` · live update failed (${err.message}); retrying`;
    }
    if (running) window.setTimeout(poll, LIVE_SECONDS * 1000);
    else document.body.dataset.live = "stopped";
  }

  // --- start ------------------------------------------------------------------------
  window.dsComputations.init(base, toggleComputation);
  window.dsSpans.init(data, chooseSpan);
  window.dsProfile.init(base, data.computations);
  ds.state.onChange(restore);
  restore();
  if (data.running && !ds.report) { // a report file is a snapshot
    document.body.dataset.live = "on";
    window.setTimeout(poll, LIVE_SECONDS * 1000);
  }
})();
