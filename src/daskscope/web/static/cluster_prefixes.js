// Cluster page: the task-prefix chart (tasks executed and task time per prefix). What it
// draws (bars, colours, hover texts, axis titles, ranges and ticks, height) comes from
// the server (web/prefix_chart.py), which also draws it into the page for the first
// paint (templates/cluster_prefix_chart.html); this hands the same to plotly once
// plotly.js has loaded, and plotly's chart takes the place of the server's.
"use strict";
window.dsPrefixes = (() => {
  let serverChart = null; // the chart the server drew into the page

  const axis = (ax, extra) =>
    ds.axis(ax.title, { range: [0, ax.top], tickvals: ax.ticks, ticktext: ax.tick_texts, ...extra });

  // Drawn when its tab shows (a hidden chart has no width to lay out)
  async function draw(div, chart) {
    div.dsChart = chart;
    const drawn = div.querySelector(".sb-box");
    // The server's drawing is of the first chart only: a filtered one waits for plotly
    if (drawn && chart !== serverChart) drawn.remove();
    const panel = div.closest("[role=tabpanel]");
    if (panel && panel.hidden) { div.dataset.pending = "1"; return; }
    delete div.dataset.pending;
    const rows = chart.labels.length;
    div.dataset.bars = String(rows);
    div.dataset.other = String(chart.other);
    if (!rows) {
      if (window.Plotly) Plotly.purge(div);
      div.hidden = true;
      return;
    }
    div.hidden = false;
    await ds.plotly();
    if (div.dsChart !== chart || div.dataset.pending) return; // another draw since
    const narrow = div.clientWidth < chart.narrow_below;
    const height = narrow ? chart.narrow_height : chart.height;
    // plotly puts the first category at the bottom: the labels from the bottom up
    const labels = chart.labels.map(ds.text).reverse();
    const [tasks, time] = chart.panels;
    const trace = (p, extra) => ({
      type: "bar", orientation: "h", name: p.axis.title, y: labels,
      x: p.bars.map((b) => b.value).reverse(),
      marker: { color: p.bars.map((b) => b.colour).reverse() },
      hovertext: p.bars.map((b, i) => `<b>${ds.text(chart.labels[i])}</b><br>${ds.text(b.hover)}`).reverse(),
      hoverinfo: "text", ...extra,
    });
    const y = { automargin: true, tickfont: { size: 11 } };
    // narrow: each plot chart.plot_height high, its ticks and title below it
    const share = chart.plot_height / (height - chart.margin_top - chart.margin_bottom);
    const layout = narrow
      ? {
          xaxis: axis(tasks.axis, { domain: [0, 1], anchor: "y" }),
          yaxis: { ...y, domain: [1 - share, 1] },
          xaxis2: axis(time.axis, { domain: [0, 1], anchor: "y2" }),
          yaxis2: { ...y, domain: [0, share], anchor: "x2" },
        }
      : {
          xaxis: axis(tasks.axis, { domain: [0, 0.47] }),
          xaxis2: axis(time.axis, { domain: [0.53, 1] }),
          yaxis: y,
        };
    div.style.height = `${height}px`;
    div.querySelectorAll(".sb-box").forEach((e) => e.remove()); // plotly's drawing in its place
    await Plotly.react(div, [trace(tasks), trace(time, { xaxis: "x2", yaxis: narrow ? "y2" : "y" })], ds.layout({
      ...layout, showlegend: false, height, bargap: 0.25,
      margin: { l: 10, r: 20, t: chart.margin_top, b: chart.margin_bottom },
    }), ds.config);
    div.dataset.ready = "1";
  }

  // Its tab was shown: draw what was asked while it was hidden
  function shown(div) {
    return div && div.dataset.pending ? draw(div, div.dsChart) : Promise.resolve();
  }

  // The chart the server drew (the page's data): kept in the page until plotly draws it
  function init(chart) {
    serverChart = chart;
  }

  return { draw, shown, init };
})();
