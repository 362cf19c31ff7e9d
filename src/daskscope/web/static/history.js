// History page: one line chart per figure, one point per run (oldest first), the
// points of a regression marked in red and named in the legend, the threshold dashed.
"use strict";
(() => {
  const data = ds.data();
  const x = data.points.map((p) => new Date(p.at * 1000));
  const unitTitle = { seconds: "s", bytes: "bytes", count: "count", fraction: "%", currency: "money" };

  function draw(div) {
    const s = data.series[Number(div.dataset.series)];
    const fmt = (v) => ds.value(v, s.unit);
    const hover = data.points.map((p, i) => `${ds.text(p.label)}<br>${ds.utc(p.at)} UTC<br>${ds.text(s.label)}: ${fmt(s.values[i])}`);
    const traces = [{
      type: "scatter", mode: "lines+markers", name: s.label, x, y: s.values,
      line: { color: "#4c78a8" }, marker: { size: 6 },
      text: hover, hovertemplate: "%{text}<extra></extra>",
    }];
    const check = s.check;
    if (check && check.threshold !== null) {
      traces.push({
        type: "scatter", mode: "lines", name: `threshold ${fmt(check.threshold)}`,
        x: [x[0], x[x.length - 1]], y: [check.threshold, check.threshold],
        line: { color: "#888", dash: "dash", width: 1 }, hoverinfo: "skip",
      });
    }
    if (s.flagged.length) {
      traces.push({
        type: "scatter", mode: "markers", name: "regression",
        x: s.flagged.map((i) => x[i]), y: s.flagged.map((i) => s.values[i]),
        marker: { color: "#c62828", size: 12, symbol: "x" },
        text: s.flagged.map((i) => `regression: ${hover[i]}`), hovertemplate: "%{text}<extra></extra>",
      });
    }
    const measured = s.values.filter((v) => v !== null);
    const top = Math.max(...measured, check && check.threshold !== null ? check.threshold : 0, 0);
    const vals = niceTicks(top, s.unit === "count" ? 1 : 0);
    const layout = ds.layout({
      margin: { l: 10, r: 10, t: 10, b: 10 },
      showlegend: true,
      legend: { orientation: "h", x: 0, y: -0.35, yanchor: "top" },
      hovermode: "closest",
      xaxis: ds.axis("run start (UTC)", { type: "date" }),
      yaxis: ds.axis(`${s.label} (${unitTitle[s.unit] || s.unit})`, {
        tickmode: "array", tickvals: vals, ticktext: vals.map(fmt), range: [0, top * 1.15 || 1],
      }),
    });
    const config = { ...ds.config, displayModeBar: false };
    Plotly.newPlot(div, traces, layout, config).then(() => { div.dataset.ready = "1"; });
  }

  // ticks from 0 at 1, 2 or 5 times a power of ten, at most five of them, and no finer
  // than minStep (a count has no fractions)
  function niceTicks(max, minStep) {
    const top = Math.max(max, 1e-9);
    const pow = 10 ** Math.floor(Math.log10(top / 4));
    const step = Math.max(minStep, [1, 2, 5, 10].map((m) => m * pow).find((m) => top / m <= 5));
    const out = [];
    for (let v = 0; v <= top * 1.15; v += step) out.push(Number(v.toPrecision(6)));
    return out;
  }

  document.querySelectorAll(".history-plot").forEach(draw);
})();
