// Cluster page: the computations table — a row opens its code and task-group graph
// (one at a time, kept in the URL as ?computation=), rows for computations that appear
// while the page is live, and how a computation is named in selectors.
"use strict";
window.dsComputations = (() => {
  let base = "";
  let onToggle = () => {};

  // "2026-11-23 13:45:01.123 · 1,200 tasks · sum-aggregate": computations told apart
  function describe(comp) {
    const first = comp.task_groups.length ? ` · ${comp.task_groups[0]}` : "";
    return `${ds.utc(comp.started_at, true)} · ${ds.count(comp.tasks_executed)} tasks${first}`;
  }

  // Its task-group graph (static/group_graph.js): folded past 100 groups, the fold and
  // the opened folds in the URL (?fold=, ?open=)
  function drawGraph(computationId) {
    const div = document.getElementById(`graph-${computationId}`);
    return window.dsGroupGraph.draw(div, {
      url: `${base}/computations/${encodeURIComponent(computationId)}/graph`,
      tools: document.getElementById(`graph-tools-${computationId}`),
      note: document.getElementById(`graph-note-${computationId}`),
    });
  }

  const rowOf = (id) => document.querySelector(`tr.computation[data-id="${CSS.escape(id)}"]`);
  const detailOf = (id) => document.querySelector(`tr.computation-detail[data-id="${CSS.escape(id)}"]`);

  // Open the computation with this id (null: none), closing any other
  function show(id) {
    for (const row of document.querySelectorAll("tr.computation")) {
      const open = row.dataset.id === id;
      const detail = detailOf(row.dataset.id);
      const button = row.querySelector("button.expand");
      if (detail.hidden === !open) continue;
      detail.hidden = !open;
      row.classList.toggle("open", open);
      button.textContent = open ? "▾" : "▸";
      button.setAttribute("aria-expanded", String(open));
      if (open) addAdvice(detail, row.dataset.id);
      const div = document.getElementById(`graph-${row.dataset.id}`);
      if (open && !div.dataset.ready && !div.dataset.drawing) {
        div.dataset.drawing = "1";
        drawGraph(row.dataset.id);
      } else if (open && div.dataset.ready) {
        window.dsGroupGraph.sync(div); // drawn before, for another fold
      }
    }
  }

  // The computation's advice (static/advice_box.js), fetched the first time it opens
  function addAdvice(detail, id) {
    if (!window.dsAdvice || detail.querySelector(".advice-box")) return;
    const cluster = ds.data().cluster.id; // not from the address: a report file has its own
    const box = document.createElement("div");
    box.className = "advice-box";
    box.dataset.adviceUrl = `/api/v1/clusters/${encodeURIComponent(cluster)}/advice?computation=${encodeURIComponent(id)}`;
    const heading = Object.assign(document.createElement("h3"), { className: "advice-heading", textContent: "Advice for this computation" });
    const summary = Object.assign(document.createElement("p"), { className: "advice-summary muted", textContent: "Checking the advice rules…" });
    const list = Object.assign(document.createElement("ul"), { className: "advice-list" });
    box.append(heading, summary, list);
    detail.querySelector("td").prepend(box);
    window.dsAdvice.fill(box);
  }

  function wire(row) {
    // The whole row opens and closes (its button for the keyboard)
    row.addEventListener("click", (ev) => {
      if (ev.target.closest("a")) return;
      onToggle(row.classList.contains("open") ? null : row.dataset.id);
    });
  }

  // Rows of a computation first seen while the page is live (code as plain text)
  function build(comp, colours) {
    const row = document.createElement("tr");
    row.className = "computation";
    row.dataset.id = comp.id;
    const button = Object.assign(document.createElement("button"), { type: "button", className: "expand", textContent: "▸" });
    button.dataset.id = comp.id;
    button.setAttribute("aria-expanded", "false");
    const first = comp.code_frames[0];
    const code = ds.cell("", { cls: "code-summary" });
    if (first && first.call_text) code.append(Object.assign(document.createElement("code"), { textContent: first.call_text }));
    else code.append(Object.assign(document.createElement("span"), { className: "muted", textContent: comp.code.length ? "code without its calling line" : "code not captured" }));
    const td = document.createElement("td");
    td.append(button);
    row.append(td, ds.cell(ds.utc(comp.started_at, true), { cls: "start" }),
      ...["Duration", "Tasks", "Errors", "Groups", "Cost"].map((label) => {
        const td = ds.cell("", { cls: "num" });
        td.dataset.label = label;
        return td;
      }), code);
    const detail = document.createElement("tr");
    detail.className = "computation-detail";
    detail.dataset.id = comp.id;
    detail.hidden = true;
    const cell = document.createElement("td");
    cell.colSpan = 8;
    for (const f of comp.code_frames) {
      const lines = comp.code[f.snippet].split("\n");
      const pre = document.createElement("pre");
      pre.className = "code plain";
      lines.forEach((line, i) => {
        const span = Object.assign(document.createElement("span"), { textContent: `${line}\n` });
        if (i + 1 === f.call_line) span.className = "hll";
        pre.append(span);
      });
      cell.append(pre);
    }
    if (!comp.code_frames.length) cell.append(Object.assign(document.createElement("p"), { className: "muted code-note", textContent: comp.code_note }));
    const links = Object.assign(document.createElement("p"), { className: "muted" });
    links.append(Object.assign(document.createElement("a"), { className: "computation-link", href: `${base.replace(/^\/api\/v1/, "")}/computations/${encodeURIComponent(comp.id)}`, textContent: "Its page: critical path and what-if" }));
    cell.append(links);
    const legend = document.createElement("div");
    legend.className = "legend";
    for (const [activity, colour] of Object.entries(colours)) {
      const i = document.createElement("i");
      i.style.background = colour;
      const s = document.createElement("span");
      s.append(i, activity);
      legend.append(s);
    }
    const tools = Object.assign(document.createElement("div"), { className: "graph-tools", id: `graph-tools-${comp.id}` });
    const note = Object.assign(document.createElement("p"), { className: "muted graph-note", id: `graph-note-${comp.id}`, hidden: true });
    const graph = Object.assign(document.createElement("div"), { className: "chart graph", id: `graph-${comp.id}` });
    cell.append(legend, tools, note, graph);
    detail.append(cell);
    wire(row);
    return [row, detail];
  }

  // The figures of a row that change while a computation runs
  function fill(row, comp) {
    const cells = row.children;
    cells[2].textContent = ds.duration(comp.duration_s);
    cells[3].textContent = ds.num(comp.tasks_executed);
    cells[4].textContent = ds.num(comp.tasks_erred);
    cells[4].classList.toggle("bad", comp.tasks_erred > 0);
    cells[5].textContent = ds.num(comp.group_count);
    cells[6].textContent = comp.cost_text;
  }

  // Add or update rows from a fresh view (live mode)
  function update(computations, colours) {
    const tbody = document.querySelector("#computations tbody");
    for (const comp of computations) {
      let row = rowOf(comp.id);
      if (!row) {
        const built = build(comp, colours);
        tbody.append(...built);
        row = built[0];
      }
      fill(row, comp);
    }
    document.getElementById("computations").hidden = computations.length === 0;
    document.getElementById("no-computations").hidden = computations.length > 0;
  }

  // Show only these computations (null: all); says how many are shown
  function filter(ids, what) {
    const rows = [...document.querySelectorAll("tr.computation")];
    let shown = 0;
    for (const row of rows) {
      const keep = ids === null || ids.has(row.dataset.id);
      row.hidden = !keep;
      if (!keep) detailOf(row.dataset.id).hidden = true;
      else if (row.classList.contains("open")) detailOf(row.dataset.id).hidden = false;
      if (keep) shown += 1;
    }
    const note = document.getElementById("computations-note");
    note.textContent = ids === null ? "" : `${ds.count(shown)} of ${ds.count(rows.length)} computations ran tasks in ${what}.`;
  }

  function init(apiBase, toggle) {
    base = apiBase;
    onToggle = toggle;
    for (const row of document.querySelectorAll("tr.computation")) wire(row);
  }

  return { init, show, update, filter, describe };
})();
