// Costs page: per member and per tag, a horizontal bar per row (largest on top) of
// the attributed cost; rows in another currency than the first get their own trace.
"use strict";
(() => {
  const data = ds.data();

  function draw(div) {
    const rows = (div.dataset.by === "member" ? data.members : data.tags).filter((r) => r.cost !== null);
    if (!rows.length) {
      div.textContent = "No price is configured for these spans' accounts.";
      div.dataset.ready = "1";
      return;
    }
    const currencies = [...new Set(rows.map((r) => r.currency))];
    const traces = currencies.map((currency) => {
      const mine = rows.filter((r) => r.currency === currency).reverse(); // largest on top
      return {
        type: "bar", orientation: "h", name: currency,
        x: mine.map((r) => r.cost), y: mine.map((r) => ds.text(r.name)),
        hovertext: mine.map((r) => `${ds.text(r.name)}<br>${r.cost_text}<br>task time ${r.task_text}, ${ds.count(r.spans)} span${r.spans === 1 ? "" : "s"}`),
        hovertemplate: "%{hovertext}<extra></extra>", marker: { color: "#4c78a8" },
      };
    });
    const label = div.dataset.by === "member" ? "member" : "span tag";
    const layout = ds.layout({
      margin: { l: 10, r: 10, t: 10, b: 10 },
      height: Math.max(200, 60 + 28 * rows.length),
      showlegend: currencies.length > 1,
      xaxis: ds.axis(`attributed cost (${currencies.join(", ")})`, { rangemode: "tozero" }),
      yaxis: ds.axis(label, { automargin: true, type: "category" }),
    });
    Plotly.newPlot(div, traces, layout, { ...ds.config, displayModeBar: false }).then(() => {
      div.dataset.ready = "1";
    });
  }

  document.querySelectorAll(".costs-plot").forEach(draw);
})();
