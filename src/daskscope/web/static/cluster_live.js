// Cluster page, live mode: what the server drew into the page (task-group summary,
// spans, errors, the workers' table and charts) drawn again from a fresh view of a
// running cluster. Each JSON route answers with an ETag; a poll whose answer did not
// change (same ETag) redraws nothing.
"use strict";
window.dsLive = (() => {
  const etags = new Map(); // url -> ETag of the answer last drawn

  const el = (tag, props, ...children) => {
    const node = Object.assign(document.createElement(tag), props || {});
    node.append(...children);
    return node;
  };
  const timeline = (clusterId) => `/clusters/${encodeURIComponent(clusterId)}/timeline`;
  const num = (text, bad) => el("td", { className: `num${bad ? " bad" : ""}`, textContent: text });

  // The body of url, or null when its ETag is the one already drawn. The browser
  // revalidates its cached copy (If-None-Match): an unchanged answer is an empty 304.
  async function changed(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-cache" });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
    const etag = response.headers.get("ETag");
    if (etag && etags.get(url) === etag) return null;
    etags.set(url, etag);
    return body;
  }

  function groups(summary, clusterId) {
    const div = document.getElementById("task-groups");
    const parts = [el("h2", {}, "Task groups")];
    if (!summary.count) {
      parts.push(el("p", { className: "empty" }, "No task groups recorded."));
      div.replaceChildren(...parts);
      return;
    }
    const totals = el("p", { className: "task-group-totals" },
      `${ds.num(summary.count)} task groups · ${ds.num(summary.tasks_executed)} of ${ds.num(summary.tasks_total)} tasks executed`);
    if (summary.tasks_erred) totals.append(" · ", el("span", { className: "bad" }, `${ds.num(summary.tasks_erred)} failed`));
    totals.append(` · ${ds.bytes(summary.nbytes_total)} · ${ds.duration(summary.duration_s)} of task time`);
    const table = el("table", { className: "listing", id: "top-task-groups" });
    table.createTHead().innerHTML = "<tr><th>Group</th><th class='num'>Tasks</th><th class='num'>Failed</th><th class='num'>Output</th><th class='num'>Task time</th><th>Start (UTC)</th></tr>";
    const tbody = table.createTBody();
    for (const g of summary.top) {
      const tr = tbody.insertRow();
      tr.dataset.group = g.name;
      const link = el("a", { className: "timeline-link", title: "this group's tasks on the timeline",
                             href: `${timeline(clusterId)}?group=${encodeURIComponent(g.name)}` }, el("code", { textContent: g.name }));
      link.dataset.group = g.name;
      tr.append(el("td", {}, link), num(`${ds.num(g.tasks_executed)} / ${ds.num(g.tasks_total)}`),
                num(ds.num(g.tasks_erred), g.tasks_erred > 0), num(ds.bytes(g.nbytes_total)), num(ds.duration(g.duration_s)),
                el("td", { textContent: ds.utc(g.started_at) }));
    }
    const note = el("p", { className: "muted", id: "task-groups-note" });
    if (summary.omitted) {
      const url = `/api/v1/clusters/${encodeURIComponent(clusterId)}/task-groups`;
      note.append(`The ${ds.num(summary.shown)} longest of ${ds.num(summary.count)} groups are listed; ${ds.num(summary.omitted)} more are not: all of them, a page at a time, at `,
                  el("a", { href: url, textContent: url }), ".");
    } else {
      note.textContent = `All ${ds.num(summary.count)} groups, longest first.`;
    }
    parts.push(totals, el("div", { className: "scroll-x" }, table), note);
    div.replaceChildren(...parts);
  }

  function spans(view) {
    document.getElementById("spans-block").hidden = !view.spans.length;
    document.getElementById("no-spans").hidden = view.spans.length > 0;
    const tbody = document.querySelector("#spans tbody");
    tbody.replaceChildren(...view.spans.map((sp) => {
      const tr = el("tr");
      tr.dataset.span = sp.span_id;
      const button = el("button", { type: "button", className: "span-link", textContent: sp.name.length ? sp.name[sp.name.length - 1] : sp.span_id });
      button.dataset.span = sp.span_id;
      button.setAttribute("aria-pressed", "false");
      const link = el("a", { className: "timeline-link small-note", title: "this span's tasks on the timeline", textContent: "timeline",
                             href: `${timeline(view.cluster.id)}?span=${encodeURIComponent(sp.span_id)}` });
      const name = el("td", {}, button, " ", link);
      name.style.paddingLeft = `${0.4 + sp.depth * 1.4}em`;
      tr.append(name, num(ds.duration(sp.duration_s)), num(ds.bytes(sp.nbytes_total)), num(ds.num(sp.tasks)),
                num(ds.num(sp.group_count)), num(ds.duration(sp.active_cpu_seconds)));
      return tr;
    }));
    const select = document.getElementById("span-tag");
    const chosen = select.value;
    select.replaceChildren(el("option", { value: "", textContent: "(all spans)" }),
      ...view.span_tags.map((t) => el("option", { value: t, textContent: t })));
    select.value = view.span_tags.includes(chosen) ? chosen : "";
  }

  function errors(view) {
    const count = document.getElementById("error-count");
    count.hidden = !view.errors.length;
    count.textContent = String(view.errors.length);
    document.getElementById("errors").hidden = !view.errors.length;
    document.getElementById("no-errors").hidden = view.errors.length > 0;
    document.querySelector("#errors tbody").replaceChildren(...view.errors.map((e) => {
      const cell = (label, ...children) => { const td = el("td", {}, ...children); td.dataset.label = label; return td; };
      const details = el("details", {}, el("summary", { textContent: e.exception || "(no message)" }), el("pre", { textContent: e.traceback }));
      return el("tr", {}, cell("Task", el("code", { textContent: e.key })), cell("Worker", e.worker || ds.MISSING),
                cell("At (UTC)", ds.utc(e.at)), cell("Exception", details));
    }));
  }

  function workersTable(view) {
    document.getElementById("workers").hidden = !view.workers.length;
    document.getElementById("no-workers").hidden = view.workers.length > 0;
    document.querySelector("#workers tbody").replaceChildren(...view.workers.map((w) => {
      const tr = el("tr", {}, el("td", { textContent: w.worker }), num(ds.num(w.nthreads)), num(ds.bytes(w.memory_limit)),
                    num(ds.bytes(w.managed_bytes)), num(ds.bytes(w.unmanaged_bytes)), num(ds.bytes(w.spilled_bytes)),
                    num(ds.bytes(w.peak_memory)));
      tr.dataset.worker = w.worker;
      const metrics = w.extra_metrics;
      let other;
      if (metrics === null) other = el("span", { className: "muted", textContent: "not recorded" });
      else if (!Object.keys(metrics).length) other = el("span", { className: "muted", textContent: "none" });
      else {
        const dl = el("dl");
        for (const [name, value] of Object.entries(metrics)) {
          const dd = el("dd", { textContent: ds.num(value) });
          dd.dataset.metric = name;
          dl.append(el("dt", { textContent: name }), dd);
        }
        other = el("details", { className: "worker-metrics" }, el("summary", { textContent: `${Object.keys(metrics).length} metrics` }), dl);
      }
      tr.append(el("td", {}, other));
      return tr;
    }));
  }

  // Redraw the server-drawn parts from a fresh view
  function update(view) {
    groups(view.task_group_summary, view.cluster.id);
    spans(view);
    errors(view);
    workersTable(view);
  }

  return { changed, update };
})();
