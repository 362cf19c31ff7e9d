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
    const vals = niceTicks(top, s.unit === "count" ? 1 : 0, fmt, s.unit);
    const layout = ds.layout({
      margin: { l: 10, r: 10, t: 10, b: 10 },
      showlegend: true,
      legend: { orientation: "h", x: 0, y: -0.35, yanchor: "top" },
      hovermode: "closest",
      xaxis: ds.axis("run start (UTC)", { type: "date", range: timeRange() }),
      yaxis: ds.axis(`${s.label} (${unitTitle[s.unit] || s.unit})`, {
        tickmode: "array", tickvals: vals, ticktext: vals.map(fmt),
        range: [0, Math.max(top * 1.15, vals[vals.length - 1]) || 1],
      }),
    });
    const config = { ...ds.config, displayModeBar: false };
    Plotly.newPlot(div, traces, layout, config).then(() => { div.dataset.ready = "1"; });
  }

  // The time axis: the runs' span, at least MIN_SPAN wide around them (one run alone,
  // or runs a moment apart, got plotly's sub-millisecond ticks)
  const MIN_SPAN_MS = 2 * 3600 * 1000;
  function timeRange() {
    const times = x.map((d) => d.getTime());
    const first = Math.min(...times);
    const last = Math.max(...times);
    const pad = Math.max((MIN_SPAN_MS - (last - first)) / 2, (last - first) * 0.04);
    return [new Date(first - pad), new Date(last + pad)];
  }

  // ticks from 0 at 1, 2 or 5 times a power of ten, at most five of them, no finer than
  // minStep (a count has no fractions) and each reading differently once formatted (at
  // 0.00012 USD, steps of 0.00005 all read "0.0001 USD"), none but 0 reading as zero
  // ("0.0000 USD"): the step grows until they do. An all-zero series: 0 to 1. Past a
  // minute, seconds step by minutes and hours (15 min, not 16 min 40 s).
  const TIME_STEPS = [60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
    172800, 432000, 864000, 1728000, 4320000, 8640000];
  function niceTicks(max, minStep, format, unit) {
    const top = max > 0 ? max : 1;
    const low = Math.floor(Math.log10(top / 4));
    const decimal = [1, 2, 5].flatMap((m) => Array.from({ length: 12 }, (_, e) => m * 10 ** (low + e)));
    if (minStep > 0) decimal.push(minStep);
    const fits = (steps) => steps.filter((m) => m >= minStep && top / m <= 5).sort((a, b) => a - b);
    // time steps first when they fit, else (years of seconds) decimal ones
    const usable = [...(unit === "seconds" && top >= 300 ? fits(TIME_STEPS) : []), ...fits(decimal)];
    let out = [0];
    for (const step of usable) {
      out = [];
      for (let v = 0; v <= Math.max(top * 1.15, step); v += step) out.push(Number(v.toPrecision(6)));
      const texts = out.map(format);
      if (new Set(texts).size === texts.length && texts.slice(1).every((s) => /[1-9]/.test(s))) return out;
    }
    return out;
  }

  document.querySelectorAll(".history-plot").forEach(draw);
})();
