// Cluster page: the task-prefix chart (tasks executed and task time per prefix).
// The most common prefixes are drawn and the rest summed in one bar, and the chart's
// height follows its bars, so it never spills over what comes below it.
"use strict";
window.dsPrefixes = (() => {
  const TOP = 20; // bars drawn before "other"
  const ROW = 24; // px per bar

  // Rows sorted by tasks, then seconds: the TOP first and the rest summed
  function rows(prefixes) {
    const sorted = [...prefixes].sort((a, b) => b.tasks_executed - a.tasks_executed || b.duration_s - a.duration_s);
    const shown = sorted.slice(0, TOP).map((p) => ({ ...p, label: p.name }));
    const rest = sorted.slice(TOP);
    if (rest.length) {
      shown.push({
        label: `${ds.count(rest.length)} other prefixes`,
        tasks_executed: rest.reduce((s, p) => s + p.tasks_executed, 0),
        duration_s: rest.reduce((s, p) => s + p.duration_s, 0),
        other: true,
      });
    }
    return { shown: shown.reverse(), rest: rest.length };
  }

  // Drawn when its tab shows (a hidden chart has no width to lay out)
  function draw(div, prefixes) {
    div.dsPrefixes = prefixes;
    const panel = div.closest("[role=tabpanel]");
    if (panel && panel.hidden) { div.dataset.pending = "1"; return Promise.resolve(); }
    delete div.dataset.pending;
    const { shown, rest } = rows(prefixes);
    div.dataset.bars = String(shown.length);
    div.dataset.other = String(rest);
    if (!shown.length) { Plotly.purge(div); div.hidden = true; return Promise.resolve(); }
    div.hidden = false;
    const narrow = div.clientWidth < 640;
    const labels = shown.map((r) => ds.text(r.label));
    const colour = shown.map((r) => (r.other ? "#b0b7c6" : "#2f6fd1"));
    const hover = (text) => shown.map((r) => `<b>${ds.text(r.label)}</b><br>${text(r)}`);
    const plotRows = narrow ? 2 : 1;
    const height = plotRows * (ROW * shown.length + 30) + 70 + (narrow ? 50 : 0);
    div.style.height = `${height}px`;
    const traces = [
      { type: "bar", orientation: "h", name: div.dataset.tasksTitle, y: labels, x: shown.map((r) => r.tasks_executed),
        marker: { color: colour }, hovertext: hover((r) => `${ds.count(r.tasks_executed)} tasks`), hoverinfo: "text" },
      { type: "bar", orientation: "h", name: div.dataset.timeTitle, y: labels, x: shown.map((r) => r.duration_s),
        xaxis: "x2", yaxis: narrow ? "y2" : "y", marker: { color: colour.map((c) => (c === "#2f6fd1" ? "#7e57c2" : c)) },
        hovertext: hover((r) => ds.duration(r.duration_s)), hoverinfo: "text" },
    ];
    const y = { automargin: true, tickfont: { size: 11 } };
    const layout = narrow
      ? {
          xaxis: ds.axis(div.dataset.tasksTitle, { domain: [0, 1], anchor: "y", rangemode: "tozero" }),
          yaxis: { ...y, domain: [0.56, 1] },
          xaxis2: ds.axis(div.dataset.timeTitle, { domain: [0, 1], anchor: "y2", rangemode: "tozero" }),
          yaxis2: { ...y, domain: [0, 0.44], anchor: "x2" },
        }
      : {
          xaxis: ds.axis(div.dataset.tasksTitle, { domain: [0, 0.47], rangemode: "tozero" }),
          xaxis2: ds.axis(div.dataset.timeTitle, { domain: [0.53, 1], rangemode: "tozero" }),
          yaxis: y,
        };
    return Plotly.react(div, traces, ds.layout({
      ...layout, showlegend: false, height, margin: { l: 10, r: 20, t: 10, b: 50 }, bargap: 0.25,
    }), ds.config).then(() => { div.dataset.ready = "1"; });
  }

  // Its tab was shown: draw what was asked while it was hidden
  function shown(div) {
    return div && div.dataset.pending ? draw(div, div.dsPrefixes) : Promise.resolve();
  }

  return { draw, shown, TOP };
})();
