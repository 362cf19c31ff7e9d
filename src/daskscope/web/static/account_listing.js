// The cluster listing: one page fetched from /api/v1/clusters (the database filters,
// sorts and pages), its rows, the pager and the words saying what is shown.
"use strict";
const accountListing = (() => {
  // Midnight UTC of an ISO day, epoch seconds
  const day = (iso) => (iso ? Date.parse(`${iso}T00:00:00Z`) / 1000 : null);

  // The API's parameters for the page's state
  function params(s, limit) {
    const p = new URLSearchParams();
    const put = (key, value) => { if (value !== null && value !== "" && value !== false) p.set(key, String(value)); };
    put("q", s.q); put("user", s.user);
    put("week_start", day(s.week)); put("since", day(s.start));
    put("until", s.end ? day(s.end) + 86400 : null);
    put("errors", s.errors); put("running", s.running);
    put("sort", s.sort); put("order", s.order); put("offset", s.offset); put("limit", limit);
    return p;
  }

  function row(c) {
    const tr = document.createElement("tr");
    const st = c.statistics;
    tr.dataset.id = c.id;
    const name = ds.cell(c.name, { href: `/clusters/${encodeURIComponent(c.id)}` });
    if (c.running) {
      const badge = document.createElement("span");
      badge.className = "badge running"; badge.textContent = "running";
      name.append(" ", badge);
    }
    tr.append(
      ds.cell(c.user), name,
      ds.cell(ds.utc(c.started_at)), ds.cell(ds.utc(c.stopped_at)),
      ds.cell(ds.duration(st.duration_s), { cls: "num" }), ds.cell(ds.num(st.workers_peak), { cls: "num" }),
      ds.cell(ds.money(st.cost && st.cost.total, st.cost && st.cost.currency), { cls: "num" }),
      ds.cell(ds.num(st.tasks_executed), { cls: "num" }),
      ds.cell(ds.num(st.tasks_erred), { cls: st.tasks_erred ? "num bad" : "num" }),
      ds.cell(ds.bytes(st.bytes_processed), { cls: "num" }));
    return tr;
  }

  function render(table, body) {
    const tbody = table.tBodies[0];
    const rows = body.clusters.map(row);
    if (!rows.length) {
      const tr = document.createElement("tr");
      const td = ds.cell("No clusters in this selection.", { cls: "empty" });
      td.colSpan = 10; tr.appendChild(td); rows.push(tr);
    }
    tbody.replaceChildren(...rows);
  }

  // "41–60 of 10,000"
  function pageText(body) {
    const first = body.query.offset + 1;
    return body.total ? `${ds.count(first)}–${ds.count(body.query.offset + body.clusters.length)} of ${ds.count(body.total)}` : "0 clusters";
  }

  // What the filter keeps, in words
  function describe(s) {
    const parts = [];
    if (s.user) parts.push(s.user);
    if (s.week) parts.push(`week of ${s.week}`);
    if (s.q) parts.push(`matching “${s.q}”`);
    if (s.start || s.end) parts.push(`started ${s.start || "…"} to ${s.end || "…"}`);
    if (s.errors) parts.push("with errors");
    if (s.running) parts.push("running");
    return parts.length ? parts.join(" · ") : "all";
  }

  return { params, render, pageText, describe };
})();
