// A computation's task-group graph, readable at any size (the cluster page's opened
// computation and the computation page): the server folds a large graph into one node
// per task prefix or span and lays it out in layers that fill the width
// (analysis/graph_layout.py); this draws it so that no two nodes overlap (each node in
// its own cell, sized to fit), says what is folded, opens a fold on a click (a group of an
// opened fold closes it), zooms with the wheel and pans with a drag. The fold and the
// opened folds are in the URL (?fold=, ?open=). Data: .../computations/{c}/graph.
"use strict";
window.dsGroupGraph = (() => {
  const PATH = "#d84315";
  const OTHER = "#9aa3b5";
  const FOLDS = { prefix: "by task prefix", span: "by span", none: "none: each group" };
  const drawn = new Map(); // div -> its options and the state it was drawn for

  const stateOf = () => ({ fold: ds.state.get("fold", "auto"), open: ds.state.get("open", "") });
  const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));

  // A node's label; short: without its count of groups
  function label(n, short) {
    if (n.kind === "group" || n.kind === "more" || short) return ds.text(n.label);
    return `${ds.text(n.label)} ×${ds.count(n.groups)}`;
  }
  const CHAR_PX = 6; // about a character of the labels' 10 px font

  function hover(n, g, path) {
    const lines = [];
    if (n.kind === "group") {
      lines.push(`<b>${ds.text(n.name)}</b>${path && n.highlighted ? " (critical path)" : ""}`);
    } else if (n.kind === "fold") {
      lines.push(`<b>${ds.text(n.label)}</b>: ${ds.count(n.groups)} groups folded (${g.fold})`,
        `e.g. ${n.examples.map(ds.text).join(", ")}${n.groups > n.examples.length ? ", …" : ""}`);
    } else if (n.kind === "more") {
      lines.push(`<b>${ds.text(n.label)}</b> groups, folded: the longest are drawn beside`);
    } else {
      lines.push(`<b>${ds.text(n.label)}</b>: ${ds.count(n.groups)} groups, the smallest folds together`);
    }
    lines.push(`tasks: ${ds.count(n.tasks_executed)} of ${ds.count(n.tasks_total)} done, ${ds.count(n.tasks_erred)} failed`,
      `memory: ${ds.bytes(n.nbytes_total)}`, `time: ${ds.duration(n.duration_s)}`,
      ...Object.entries(n.durations).map(([k, v]) => `  ${ds.text(k)}: ${ds.duration(v)}`));
    if (path && n.kind !== "group" && n.highlighted) lines.push(`${ds.count(n.highlighted)} of its groups on the critical path`);
    if (path && n.kind === "group") lines.push(`longest task: ${ds.duration(n.size_value)}`);
    if (n.kind === "fold") lines.push("click to open it");
    else if (n.fold && g.opened.includes(n.fold)) lines.push("click to fold it again");
    return lines.join("<br>");
  }

  // The graph's notes: how many groups, how many folded, what is open
  function describe(g, note) {
    const parts = [];
    if (g.fold) {
      const what = g.fold === "prefix" ? "task prefix" : "span";
      parts.push(`${ds.count(g.groups_total)} task groups: ${ds.count(g.groups_folded)} folded into ${ds.count(g.fold_nodes)} nodes, one per ${what}${g.groups_drawn ? `, ${ds.count(g.groups_drawn)} drawn each as its own node` : ""}. Click a node to open it.`);
      if (g.opened.length) parts.push(`Open: ${g.opened.map((f) => f.replace(/^[a-z]+:/, "") || "(none)").join(", ")}.`);
    }
    if (g.groups_not_drawn > 0) {
      parts.push(`${ds.count(g.groups_not_drawn)} more groups not drawn: the ${ds.count(g.groups_drawn)} longest of ${ds.count(g.groups_total)} are shown (arrows only between them). All groups: `);
    }
    if (!parts.length) { note.hidden = true; return; }
    note.replaceChildren(parts.join(" "));
    if (g.groups_not_drawn > 0) {
      note.append(Object.assign(document.createElement("a"), { href: g.all_groups_url, textContent: "the task-groups list" }), ".");
    }
    note.hidden = false;
  }

  function tools(box, g, redraw) {
    if (!box) return;
    const select = document.createElement("select");
    select.className = "graph-fold";
    select.setAttribute("aria-label", "fold the graph");
    for (const [value, text] of Object.entries(FOLDS)) {
      select.append(Object.assign(document.createElement("option"), { value, textContent: text }));
    }
    select.value = g.fold || "none";
    select.addEventListener("change", () => { ds.state.set({ fold: select.value, open: null }); redraw(); });
    const fold = Object.assign(document.createElement("label"), { textContent: "Fold " });
    fold.append(select);
    box.replaceChildren(fold);
    if (g.opened.length) {
      const close = Object.assign(document.createElement("button"), { type: "button", className: "graph-close", textContent: "Fold all again" });
      close.addEventListener("click", () => { ds.state.set({ open: null }); redraw(); });
      box.append(" ", close);
    }
  }

  // A curve from a to b (px) bending by `bend` px to the left of its direction
  function curve(a, b, bend) {
    const dx = b[0] - a[0];
    const dy = b[1] - a[1];
    const len = Math.hypot(dx, dy) || 1;
    return [(a[0] + b[0]) / 2 - (dy / len) * bend, (a[1] + b[1]) / 2 + (dx / len) * bend];
  }

  async function draw(div, options) {
    const state = stateOf();
    const query = new URLSearchParams();
    if (state.fold !== "auto") query.set("fold", state.fold);
    if (state.open) query.set("open", state.open);
    const sep = options.url.includes("?") ? "&" : "?";
    const g = await ds.json(`${options.url}${query.toString() ? sep + query : ""}`);
    drawn.set(div, { options, state, graph: g });
    describe(g, options.note);
    tools(options.tools, g, () => draw(div, options));
    await render(div, g, options);
    return g;
  }

  async function render(div, g, options) {
    const path = Boolean(options.path);
    const cols = Math.max(g.columns, 1);
    const rows = Math.max(g.rows, 1);
    const width = Math.max(div.clientWidth, 280);
    const height = clamp(rows * 56 + 60, 300, 720);
    const margin = 18;
    const plotW = width - 2 * margin;
    const plotH = height - 2 * margin;
    const pxY = plotH / (rows + 0.4);
    // labels where they fit their column (else without the counts, else only tooltips)
    const labelPx = (short) => Math.max(0, ...g.nodes.map((n) => label(n, short).length)) * CHAR_PX;
    const fits = (short) => g.nodes.length <= 60 && pxY >= 40 && labelPx(short) <= plotW / (cols + 1) - 4;
    const short = !fits(false);
    const labels = fits(short);
    // room at either end for the outer nodes' labels
    const pad = labels ? Math.min(0.5, labelPx(short) / 2 / (plotW / cols)) : 0;
    const pxX = plotW / (cols + 2 * pad);
    // every node in its own cell, no wider than the cell (a label takes room below)
    const cell = Math.min(pxX, labels ? pxY - 16 : pxY);
    const biggest = clamp(cell * 0.8 - 4, 4, 48);
    const smallest = Math.min(10, biggest);
    const sizeOf = (n) => smallest + (biggest - smallest) * n.weight;
    const xRange = [-0.5 - pad, cols - 0.5 + pad];
    const yTop = (rows - 1) / 2 + 0.5;
    const yRange = [yTop + (labels ? 0.2 : 0), -yTop - 0.2]; // reversed: the first row on top
    const toPx = (x, y) => [((x - xRange[0]) / (xRange[1] - xRange[0])) * plotW, ((yRange[0] - y) / (yRange[0] - yRange[1])) * plotH];
    const fromPx = (p) => [xRange[0] + (p[0] / plotW) * (xRange[1] - xRange[0]), yRange[0] - (p[1] / plotH) * (yRange[0] - yRange[1])];
    const pos = Object.fromEntries(g.nodes.map((n) => [n.id, n]));

    // edges: curves bending around what lies between for long ones, arrows at the end
    const shapes = [];
    const annotations = [];
    const lines = { x: [], y: [] };
    const few = g.edges.length <= 400;
    const widest = Math.max(1, ...g.edges.map((e) => e.groups));
    // many edges are drawn fainter, so that the nodes stay in sight
    const faint = `rgba(120,130,150,${clamp(40 / Math.max(g.edges.length, 1), 0.25, 0.9).toFixed(2)})`;
    for (const e of g.edges) {
      const s = pos[e.source];
      const t = pos[e.target];
      const hot = path && e.path_steps > 0;
      if (!few) {
        lines.x.push(s.x, t.x, null);
        lines.y.push(s.y, t.y, null);
        continue;
      }
      const a = toPx(s.x, s.y);
      const b = toPx(t.x, t.y);
      // an edge past a whole layer bends around the nodes between; a layer's own
      // columns (a tall layer dealt over several) are crossed straight
      const skips = Math.abs(t.layer - s.layer) > 1 || (t.layer === s.layer && t.x === s.x);
      const len = Math.hypot(b[0] - a[0], b[1] - a[1]);
      const bend = skips ? Math.min(0.2 * len, plotH * 0.4) * (e.reversed ? -1 : 1) : 0;
      const c = curve(a, b, bend);
      const [cx, cy] = fromPx(c);
      const colour = hot ? PATH : faint;
      const w = hot ? 3 : 1 + Math.min(2, Math.log10(e.groups) / Math.max(1, Math.log10(widest)) * 2);
      shapes.push({ type: "path", layer: "below", path: `M ${s.x} ${s.y} Q ${cx} ${cy} ${t.x} ${t.y}`, line: { color: colour, width: w, dash: e.reversed ? "dot" : "solid" } });
      // the arrow's last stretch, along the curve's end
      const tail = fromPx([b[0] + (c[0] - b[0]) * 0.25, b[1] + (c[1] - b[1]) * 0.25]);
      annotations.push({
        x: t.x, y: t.y, ax: tail[0], ay: tail[1], xref: "x", yref: "y", axref: "x", ayref: "y",
        showarrow: true, arrowhead: 2, arrowsize: 1, arrowwidth: hot ? 3 : 1, arrowcolor: colour,
        standoff: sizeOf(t) / 2 + 1, text: "",
      });
    }
    // the layers, every other one shaded: a layer of many groups takes several columns
    if (g.bands.length > 1) {
      g.bands.forEach(([first, last], i) => {
        if (i % 2) shapes.push({ type: "rect", layer: "below", xref: "x", yref: "paper", x0: first - 0.5, x1: last + 0.5, y0: 0, y1: 1, fillcolor: "rgba(120,130,150,0.07)", line: { width: 0 } });
      });
    }
    const trace = (nodes, name, colour) => ({
      type: "scatter", mode: labels ? "markers+text" : "markers", name,
      x: nodes.map((n) => n.x), y: nodes.map((n) => n.y),
      customdata: nodes.map((n) => n.id),
      text: nodes.map((n) => label(n, short)), textposition: "bottom center", textfont: { size: 10 },
      marker: {
        size: nodes.map(sizeOf), opacity: 1,
        symbol: nodes.map((n) => (n.kind === "group" ? "circle" : "square")),
        color: colour || nodes.map((n) => n.colour),
        line: { color: nodes.map((n) => (n.failed ? "#d50000" : "#333")), width: nodes.map((n) => (n.failed ? 3 : 1)) },
      },
      hovertext: nodes.map((n) => hover(n, g, path)), hoverinfo: "text",
    });
    const traces = [];
    if (!few && lines.x.length) traces.push({ type: "scatter", mode: "lines", x: lines.x, y: lines.y, hoverinfo: "skip", line: { color: "#c0c6d2", width: 1 }, showlegend: false });
    if (path) {
      traces.push(trace(g.nodes.filter((n) => !n.highlighted), "other task groups", OTHER));
      traces.push(trace(g.nodes.filter((n) => n.highlighted), "on the critical path", PATH));
    } else {
      traces.push(trace(g.nodes, "task groups"));
    }
    div.style.height = `${height}px`;
    await ds.plotly(); // the cluster page loads plotly.js after its first paint
    await Plotly.react(div, traces, ds.layout({
      showlegend: false, dragmode: "pan", hovermode: "closest", shapes, annotations,
      width, height, margin: { l: margin, r: margin, t: margin, b: margin },
      xaxis: { visible: false, zeroline: false, range: xRange },
      yaxis: { visible: false, zeroline: false, range: yRange },
    }), { ...ds.config, responsive: false, scrollZoom: true, displayModeBar: "hover", modeBarButtonsToRemove: ["select2d", "lasso2d"] });
    if (!div.dataset.clicks) {
      div.dataset.clicks = "1";
      div.on("plotly_click", (ev) => {
        const id = ev.points[0] && ev.points[0].customdata;
        const entry = drawn.get(div);
        const node = entry && entry.graph.nodes.find((n) => n.id === id);
        if (!node) return;
        const open = entry.graph.opened.slice();
        if (node.kind === "fold") open.push(node.id);
        else if (node.fold && open.includes(node.fold)) open.splice(open.indexOf(node.fold), 1);
        else return;
        ds.state.set({ open: open.join(",") || null, fold: entry.graph.fold });
        draw(div, entry.options);
      });
    }
    drawn.get(div).width = width;
    Object.assign(div.dataset, {
      nodes: String(g.nodes.length), folded: String(g.groups_folded), foldNodes: String(g.fold_nodes),
      fold: g.fold || "none", opened: g.opened.join(","), notDrawn: String(g.groups_not_drawn),
      failed: String(g.nodes.filter((n) => n.failed).length),
      onPath: String(g.nodes.filter((n) => n.highlighted).length), ready: "1",
    });
  }

  // A graph drawn for another fold or other opened folds than the URL's, drawn again
  function sync(div) {
    const entry = drawn.get(div);
    const now = stateOf();
    if (entry && (entry.state.fold !== now.fold || entry.state.open !== now.open)) draw(div, entry.options);
  }
  // Back and Forward
  window.addEventListener("popstate", () => {
    for (const div of drawn.keys()) if (div.isConnected && div.offsetParent !== null) sync(div);
  });

  // A new width lays the cells out again (node sizes follow the cells)
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => {
      for (const [div, entry] of drawn) {
        if (div.isConnected && div.offsetParent !== null && entry.width !== Math.max(div.clientWidth, 280)) render(div, entry.graph, entry.options);
      }
    }, 200);
  });

  return { draw, sync };
})();
