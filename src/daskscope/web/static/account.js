// Account page: every choice is in the URL (ds.state) — the usage figure, the selected
// member and week, the listing's search, filters, sort and page — so a reload or a
// shared link shows the same view and Back/Forward step through the choices. The range
// of the statistics and the usage heat map's figure are drawn by the server: changing
// either loads the page for it.
"use strict";
(() => {
  const data = ds.data();
  const $ = (id) => document.getElementById(id);
  const table = $("cluster-listing");
  const pageSize = Number(table.dataset.pageSize);
  const heat = $("usage-chart");
  const metricSelect = $("usage-metric");
  const DEFAULT_ORDER = { user: "asc", name: "asc" }; // the rest: largest/newest first

  // The selector shows the range the numbers are for, also when the browser restores
  // the page or its form from history
  const days = $("range-days");
  const showRange = () => { days.value = String(data.range.days); };
  showRange();
  window.addEventListener("pageshow", showRange);
  days.addEventListener("change", () => {
    const params = new URLSearchParams(window.location.search);
    params.set("days", days.value);
    params.delete("since"); params.delete("until");
    window.location.assign(`/?${params}`);
  });

  function read() {
    return {
      metric: ds.state.get("metric", "cluster_hours"),
      user: ds.state.get("user"), week: ds.state.get("week"), q: ds.state.get("q", ""),
      start: ds.state.get("start"), end: ds.state.get("end"),
      errors: ["1", "true"].includes(ds.state.get("errors")),
      running: ["1", "true"].includes(ds.state.get("running")),
      sort: ds.state.get("sort", "started"), order: ds.state.get("order", "desc"),
      offset: Math.max(0, Number(ds.state.get("offset", "0")) || 0),
    };
  }

  // Change the state (a history entry) and show it
  function change(values, options) {
    ds.state.set(values, options);
    apply();
  }
  const listingChange = (values, options) => change({ ...values, offset: null }, options);

  // -- the listing --------------------------------------------------------------------
  const fields = { q: $("filter-q"), user: $("filter-user"), start: $("filter-start"), end: $("filter-end") };
  const checks = { errors: $("filter-errors"), running: $("filter-running") };
  const weekChip = $("filter-week");
  const listingKey = (s) => accountListing.params(s, pageSize).toString();
  let shownKey = listingKey(read()); // the server drew this one
  let latest = 0;
  let total = data.listing.total;

  async function loadListing(s) {
    const key = listingKey(s);
    if (key === shownKey) return;
    shownKey = key;
    const mine = ++latest;
    table.setAttribute("aria-busy", "true");
    const body = await ds.json(`/api/v1/clusters?${key}`);
    if (mine !== latest) return;
    accountListing.render(table, body);
    total = body.total;
    $("page-info").textContent = accountListing.pageText(body);
    showPager(s);
    table.setAttribute("aria-busy", "false");
  }

  function showPager(s) {
    $("page-prev").disabled = s.offset <= 0;
    $("page-next").disabled = s.offset + pageSize >= total;
  }

  function showControls(s) {
    metricSelect && (metricSelect.value = s.metric);
    for (const [key, input] of Object.entries(fields)) {
      const value = s[key] || "";
      if (input !== document.activeElement && input.value !== value) input.value = value;
    }
    for (const [key, box] of Object.entries(checks)) box.checked = s[key];
    weekChip.hidden = !s.week;
    weekChip.textContent = s.week ? `week of ${s.week} ✕` : "";
    weekChip.setAttribute("aria-label", s.week ? `Clear the week of ${s.week}` : "");
    for (const th of table.tHead.rows[0].cells) {
      if (!th.dataset.key) continue;
      const sorted = th.dataset.key === s.sort;
      th.setAttribute("aria-sort", sorted ? (s.order === "asc" ? "ascending" : "descending") : "none");
    }
    $("listing-filter").textContent = accountListing.describe(s);
    showPager(s);
  }

  for (const th of table.tHead.rows[0].cells) {
    const button = th.querySelector("button.sort");
    if (!button) continue;
    button.addEventListener("click", () => {
      const s = read();
      const key = th.dataset.key;
      const order = s.sort === key ? (s.order === "asc" ? "desc" : "asc") : DEFAULT_ORDER[key] || "desc";
      listingChange({ sort: key, order });
    });
  }

  // Typing: one history entry per pause, not per key
  let typing = null;
  const typed = () => {
    clearTimeout(typing);
    typing = null;
    listingChange({ q: fields.q.value.trim(), user: fields.user.value.trim() });
  };
  for (const input of [fields.q, fields.user]) {
    input.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(typed, 400); });
  }
  $("listing-filters").addEventListener("submit", (ev) => { ev.preventDefault(); typed(); });
  for (const key of ["start", "end"]) {
    fields[key].addEventListener("change", () => listingChange({ [key]: fields[key].value }));
  }
  for (const [key, box] of Object.entries(checks)) {
    box.addEventListener("change", () => listingChange({ [key]: box.checked ? "1" : null }));
  }
  weekChip.addEventListener("click", () => listingChange({ week: null }));
  $("filter-clear").addEventListener("click", () => listingChange(
    { q: null, user: null, week: null, start: null, end: null, errors: null, running: null }));
  $("page-prev").addEventListener("click", () => {
    const s = read();
    change({ offset: Math.max(0, s.offset - pageSize) || null });
  });
  $("page-next").addEventListener("click", () => {
    const s = read();
    change({ offset: s.offset + pageSize });
  });

  // -- the usage heat map -------------------------------------------------------------
  if (heat) {
    // a narrow screen scrolls the weeks sideways: start at the newest
    const box = heat.closest(".scroll-x");
    box.scrollLeft = box.scrollWidth;
    accountUsage.attach(heat, data.usage, {
      select: (user, week) => listingChange({ user, week }),
      clear: () => listingChange({ user: null, week: null }),
    });
  }
  if (metricSelect) metricSelect.addEventListener("change", () => change({ metric: metricSelect.value }));

  function apply() {
    const wanted = ds.state.get("days");
    const s = read();
    if ((wanted !== null && wanted !== String(data.range.days)) || s.metric !== data.usage.metric) {
      window.location.reload(); // another range or figure: the server draws it
      return;
    }
    showControls(s);
    if (heat) {
      accountUsage.show(heat, data.usage, { user: s.user, week: s.week });
      heat.dataset.ready = "1";
    }
    loadListing(s).catch((err) => { $("listing-filter").textContent = `could not load: ${err.message}`; });
  }
  ds.state.onChange(apply);
  apply();
})();
