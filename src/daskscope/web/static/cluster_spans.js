// Cluster page: the span filter (?span= a span id or a tag). A span stands for its
// subtree, a tag for every span carrying it; the server sums the prefixes of the task
// groups that ran in those spans, names their computations and lays out their chart
// (/clusters/{id}/prefix-chart?span=|tag=: /prefixes with the chart).
"use strict";
window.dsSpans = (() => {
  let data = null;
  let chartUrl = "";

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

  let scopes = new Map(); // query -> the server's answer, until live mode brings a new view
  let applying = 0; // the latest apply(); an earlier one still waiting draws nothing

  // What ran in the selected spans, summed by the server, and its chart
  function scopeOf(selected) {
    const query = selected.spanId ? `span=${encodeURIComponent(selected.spanId)}` : `tag=${encodeURIComponent(selected.tag)}`;
    if (!scopes.has(query)) scopes.set(query, ds.json(`${chartUrl}?${query}`));
    return scopes.get(query);
  }

  // A fresh view (live mode): its spans, and scopes asked again
  function refresh(view) {
    data = view;
    scopes = new Map();
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
    const mine = ++applying;
    const selected = resolve(ds.state.get("span"));
    mark(selected);
    document.body.dataset.span = selected ? ds.state.get("span") : "";
    const chart = document.getElementById("prefix-chart");
    const note = document.getElementById("span-filter-note");
    if (!selected) {
      note.textContent = "";
      document.getElementById("prefix-note").textContent = "";
      window.dsComputations.filter(null);
      await window.dsPrefixes.draw(chart, data.prefix_chart);
      document.getElementById("no-prefixes").hidden = data.task_prefixes.length > 0;
    } else {
      const scope = await scopeOf(selected);
      if (mine !== applying) return selected; // a later filter was asked meanwhile
      note.textContent = "";
      const prefixes = scope.task_prefixes;
      document.getElementById("prefix-note").textContent =
        `Task prefixes of the ${ds.count(scope.group_count)} task groups that ran in span ${selected.name}.`;
      window.dsComputations.filter(new Set(scope.computations), `span ${selected.name}`);
      await window.dsPrefixes.draw(chart, scope.chart);
      document.getElementById("no-prefixes").hidden = prefixes.length > 0;
    }
    if (mine === applying) document.body.dataset.spanApplied = selected ? ds.state.get("span") : "";
    return selected;
  }

  function metricsOptions() {
    const selected = resolve(ds.state.get("span"));
    return { spanId: selected ? selected.spanId : null, tag: selected ? selected.tag : null };
  }

  function init(pageData, choose) {
    data = pageData;
    chartUrl = `/clusters/${encodeURIComponent(data.cluster.id)}/prefix-chart`;
    window.dsPrefixes.init(data.prefix_chart);
    // Delegated: live mode redraws the span table
    document.getElementById("panel-spans").addEventListener("click", (ev) => {
      const b = ev.target.closest("button.span-link");
      if (b) choose(ds.state.get("span") === b.dataset.span ? null : b.dataset.span);
    });
    const tag = document.getElementById("span-tag");
    if (tag) tag.addEventListener("change", () => choose(tag.value || null));
    document.getElementById("span-filter-clear").addEventListener("click", () => choose(null));
  }

  return { init, apply, refresh, metricsOptions, resolve };
})();
