// Costs page: per member and per tag, a horizontal bar per row (largest on top) of
// the attributed cost; rows in another currency than the first get their own trace.
// Past SHOWN rows the chart draws the largest and sums the rest into one bar (a chart
// of 100 members was 2,860 px tall); the table beside it lists every row.
"use strict";
(() => {
  const data = ds.data();
  const SHOWN = 20;

  function draw(div) {
    const rows = (div.dataset.by === "member" ? data.members : data.tags).filter((r) => r.cost !== null);
    if (!rows.length) {
      div.textContent = "No price is configured for these spans' accounts.";
      div.dataset.ready = "1";
      return;
    }
    const currencies = [...new Set(rows.map((r) => r.currency))];
    const label = div.dataset.by === "member" ? "member" : "span tag";
    const plural = div.dataset.by === "member" ? "members" : "tags";
    const shown = rows.slice(0, SHOWN);
    const rest = rows.slice(SHOWN);
    const bars = [...shown.map((r) => ({ ...r, label: r.name,
      hover: `${ds.text(r.name)}<br>${r.cost_text}<br>task time ${r.task_text}, ${ds.count(r.spans)} span${r.spans === 1 ? "" : "s"}` }))];
    for (const currency of currencies) { // the rest: one bar a currency, at the bottom
      const mine = rest.filter((r) => r.currency === currency);
      if (!mine.length) continue;
      const cost = mine.reduce((sum, r) => sum + r.cost, 0);
      const name = `${ds.count(mine.length)} other ${plural}${currencies.length > 1 ? ` (${currency})` : ""}`;
      bars.push({ name, label: name, currency, cost, rest: true,
                  hover: `${name}, summed (the table lists each)<br>${ds.money(cost, currency)}` });
    }
    const traces = currencies.map((currency) => {
      const mine = bars.filter((r) => r.currency === currency).reverse(); // largest on top
      return {
        type: "bar", orientation: "h", name: currency,
        x: mine.map((r) => r.cost), y: mine.map((r) => ds.text(r.label)),
        hovertext: mine.map((r) => r.hover), hovertemplate: "%{hovertext}<extra></extra>",
        marker: { color: mine.map((r) => (r.rest ? "#9db6d3" : "#4c78a8")) },
      };
    });
    // the bars' order, largest on top and the rest at the bottom, whatever the currency
    const order = bars.map((r) => ds.text(r.label)).reverse();
    const layout = ds.layout({
      // the axis above the bars: the largest are read first
      margin: { l: 10, r: 10, t: 10, b: 10 },
      height: Math.max(200, 80 + 26 * bars.length),
      showlegend: currencies.length > 1,
      xaxis: ds.axis(`attributed cost (${currencies.join(", ")})`, { rangemode: "tozero", side: "top" }),
      yaxis: ds.axis(label, { automargin: true, type: "category", categoryorder: "array", categoryarray: order }),
    });
    Plotly.newPlot(div, traces, layout, { ...ds.config, displayModeBar: false }).then(() => {
      div.dataset.ready = "1";
      div.dataset.bars = String(bars.length);
    });
    if (rest.length) {
      const note = Object.assign(document.createElement("p"), { className: "muted costs-rest" });
      note.textContent = `The ${ds.count(shown.length)} costliest of ${ds.count(rows.length)} ${plural} drawn, the other ${ds.count(rest.length)} summed in one bar; the table lists each.`;
      div.closest(".costs-grid").before(note);
    }
  }

  document.querySelectorAll(".costs-plot").forEach(draw);
})();
