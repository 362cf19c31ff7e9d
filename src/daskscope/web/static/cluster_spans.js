// Cluster page: the span filter (?span= a span id or a tag). A span stands for its
// subtree, a tag for every span carrying it; the page's prefixes and computations are
// recomputed from the task groups that ran in those spans.
"use strict";
window.dsSpans = (() => {
  const MAX_GROUPS = 50000; // groups read for a filter (pages of 10,000)
  let data = null;
  let base = "";
  let groups = null; // every task group's span, computation and figures, read once
  let groupsCut = false;

  // {ids, name, tag} of a span= value; null when it names nothing on this page
  function resolve(value) {
    if (!value) return null;
    const span = data.spans.find((s) => s.span_id === value);
    if (span) {
      const ids = new Set([value]);
      // page order puts children after their parents
      for (const s of data.spans) if (ids.has(s.parent_span_id)) ids.add(s.span_id);
      return { ids, name: span.name.length ? span.name.join(" › ") : value, spanId: value, tag: null };
    }
    if (data.span_tags.includes(value)) {
      const ids = new Set(data.spans.filter((s) => (s.name || []).includes(value)).map((s) => s.span_id));
      return { ids, name: `tagged “${value}”`, spanId: null, tag: value };
    }
    return null;
  }

  async function allGroups() {
    if (groups) return groups;
    const rows = [];
    let url = `${base}/task-groups?limit=10000`;
    while (url && rows.length < MAX_GROUPS) {
      const page = await ds.json(url);
      rows.push(...page.groups);
      url = page.next;
    }
    groupsCut = Boolean(url);
    groups = rows;
    return groups;
  }

  // A fresh view (live mode): its spans, and groups read again when needed
  function refresh(view) {
    data = view;
    groups = null;
  }

  function mark(selected) {
    for (const b of document.querySelectorAll("button.span-link")) {
      const on = Boolean(selected && selected.ids.has(b.dataset.span));
      b.setAttribute("aria-pressed", String(on));
      b.closest("tr").classList.toggle("selected", on);
    }
    const tag = document.getElementById("span-tag");
    if (tag) tag.value = selected && selected.tag ? selected.tag : "";
    const banner = document.getElementById("span-filter");
    banner.hidden = !selected;
    document.getElementById("span-filter-name").textContent = selected ? selected.name : "";
  }

  // Apply the URL's span filter to prefixes, computations and fine metrics
  async function apply() {
    const selected = resolve(ds.state.get("span"));
    mark(selected);
    document.body.dataset.span = selected ? ds.state.get("span") : "";
    const chart = document.getElementById("prefix-chart");
    const note = document.getElementById("span-filter-note");
    if (!selected) {
      note.textContent = "";
      document.getElementById("prefix-note").textContent = "";
      window.dsComputations.filter(null);
      await window.dsPrefixes.draw(chart, data.task_prefixes);
      document.getElementById("no-prefixes").hidden = data.task_prefixes.length > 0;
    } else {
      const rows = (await allGroups()).filter((g) => selected.ids.has(g.span_id));
      note.textContent = groupsCut ? `(from the first ${ds.count(MAX_GROUPS)} task groups)` : "";
      const prefixes = window.dsPrefixes.fromGroups(rows);
      document.getElementById("prefix-note").textContent =
        `Task prefixes of the ${ds.count(rows.length)} task groups that ran in span ${selected.name}.`;
      window.dsComputations.filter(new Set(rows.map((g) => g.computation_id)), `span ${selected.name}`);
      await window.dsPrefixes.draw(chart, prefixes);
      document.getElementById("no-prefixes").hidden = prefixes.length > 0;
    }
    document.body.dataset.spanApplied = selected ? ds.state.get("span") : "";
    return selected;
  }

  function metricsOptions() {
    const selected = resolve(ds.state.get("span"));
    return { spanId: selected ? selected.spanId : null, tag: selected ? selected.tag : null };
  }

  function init(pageData, apiBase, choose) {
    data = pageData;
    base = apiBase;
    for (const b of document.querySelectorAll("button.span-link")) {
      b.addEventListener("click", () => choose(ds.state.get("span") === b.dataset.span ? null : b.dataset.span));
    }
    const tag = document.getElementById("span-tag");
    if (tag) tag.addEventListener("change", () => choose(tag.value || null));
    document.getElementById("span-filter-clear").addEventListener("click", () => choose(null));
  }

  return { init, apply, refresh, metricsOptions, resolve };
})();
