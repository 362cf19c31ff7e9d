// Cluster page, spans tab: where the time went, interval by interval. Each bar is one of
// the recorder's flush intervals, as wide as the interval, stacked by activity with
// what each activity's fine metrics gained in it (seconds), over the whole cluster.
// Colours and meanings come with the JSON (views/fine_metrics.py, from the catalogue).
// dsMetricIntervals.render(element, clusterId) draws into element; it reads
// /api/v1/clusters/{id}/metrics/intervals.
"use strict";
window.dsMetricIntervals = (() => {
  const TOOLBAR = 34; // px above the bars for plotly's mode bar

  async function render(element, clusterId) {
    element.dataset.ready = "";
    const body = await ds.json(`/api/v1/clusters/${encodeURIComponent(clusterId)}/metrics/intervals`);
    if (!body.starts.length) {
      const empty = Object.assign(document.createElement("p"), {
        className: "empty", textContent: "No fine metrics recorded interval by interval here (clusters recorded before daskscope kept them have totals only).",
      });
      element.replaceChildren(empty);
      element.dataset.ready = "1";
      return;
    }
    const chart = document.createElement("div");
    chart.dataset.chart = "fine-metric-intervals";
    element.replaceChildren(chart);
    // a bar from the interval's start to its stop: its middle, its width in ms
    const x = body.starts.map((s, i) => ds.utc((s + body.stops[i]) / 2, true));
    const width = body.starts.map((s, i) => Math.max(1, (body.stops[i] - s) * 1000));
    const spans = body.starts.map((s, i) => `${ds.utc(s)} – ${ds.utc(body.stops[i])} UTC`);
    const traces = body.activities.map((a) => {
      const y = body.values[a.name];
      return {
        type: "bar", name: ds.text(a.name), x, y, width, marker: { color: a.colour },
        customdata: y.map((v, i) => [spans[i], ds.value(v, body.unit)]),
        hovertemplate: `%{customdata[0]}<br>${ds.text(a.name)}: %{customdata[1]}<extra></extra>`,
      };
    });
    const bottom = 90 + 22 * Math.ceil(body.activities.length / 4);
    await ds.plotly();
    await Plotly.newPlot(chart, traces, ds.layout({
      barmode: "stack", bargap: 0, height: 320 + TOOLBAR + bottom,
      xaxis: ds.axis("time (UTC)", { type: "date" }),
      yaxis: ds.axis("task time per interval (seconds)", { rangemode: "tozero", ticksuffix: " s" }),
      legend: { orientation: "h", xref: "container", x: 0, yref: "container", y: 0, yanchor: "bottom", traceorder: "normal" },
      margin: { l: 70, r: 20, t: TOOLBAR, b: bottom },
    }), ds.config);
    element.dataset.ready = "1";
  }

  return { render };
})();
