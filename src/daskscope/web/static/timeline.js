// Task timeline page: one row per worker thread; zoom and pan ask the server for the
// window (every task when it holds few, else each thread's time in bins) and redraw; the
// window, the filters and the selected task live in the URL, so a reload or a shared
// link shows the same and Back and Forward step through them.
//
// plotly draws the axes, the "Busy %" panel and the idle bands, and handles zoom and pan;
// the lanes themselves (thousands of bars) are painted on a canvas laid over plotly's
// plot area, never one SVG shape a bar: a window of 5,000 tasks or 700 bins a thread
// paints in milliseconds. Hover and click are hit-tested here, against the lanes' bars
// sorted by start; hovering a task draws, on a second canvas, the arrows of the triggers
// the task log recorded (which dependency's end made it start, and that one's, back
// through the window; and the tasks it made start).
"use strict";
(() => {
  const chart = document.getElementById("timeline");
  if (!chart) return; // nothing recorded: the page says so
  let view = ds.data("timeline-data"); // its own in a report file, else the page's
  const clusterId = view.cluster_id;
  const base = `/api/v1/clusters/${encodeURIComponent(clusterId)}`;
  const FILTERS = ["computation", "span", "group"];
  const IDLE = "rgba(120, 128, 145, 0.16)";
  const ERRED = "#d50000";
  const SELECTED = "#111111";
  const ARROW_IN = "#202124"; // what made it start
  const ARROW_OUT = "#e8710a"; // what it made start
  const OTHER = "#b0b7c6";
  const CHAIN = 50; // trigger arrows followed back at most
  // x is seconds after the first task of the cluster (or computation): plotly's own
  // dates stop at milliseconds, tasks do not
  const origin = () => (view.totals.first ?? view.start);
  let shownOrigin = origin();
  let drawing = false;
  let asked = 0; // the newest request: older answers are dropped
  let loads = 0;
  const hidden = new Set(); // legend entries switched off, kept across windows
  let model = null; // what the lanes draw, built once per window
  let hovered = null; // the hit under the pointer
  let selected = null; // {key, executions: [{lane, start, stop}]} of the task in the URL

  // --- text -------------------------------------------------------------------------
  const laneOf = (t) => view.lanes[t.lane];
  function actionLine(a) {
    const from = a.source ? ` from ${ds.text(a.source)}` : "";
    return `${ds.text(a.action)} ${ds.duration(a.stop - a.start)}${from}`;
  }
  function taskText(t, action) {
    const lines = [
      `<b>${ds.text(t.key)}</b>`,
      `group ${ds.text(t.group)}`,
      `${ds.text(laneOf(t).label)} (thread ${laneOf(t).thread})`,
      `start ${ds.utc(t.start, true)} UTC`,
      `duration ${ds.duration(t.stop - t.start)} · compute ${ds.duration(t.compute_s)}`,
      `output ${ds.bytes(t.nbytes)}${t.state === "memory" ? "" : ` · ${ds.text(t.state)}`}`,
    ];
    if (t.trigger) lines.push(`started when <code>${ds.text(t.trigger)}</code> ended`);
    if (t.actions.length) lines.push(`actions: ${t.actions.map(actionLine).join(", ")}`);
    if (action) lines.push(`<i>this bar: ${actionLine(action)}</i>`);
    return lines.join("<br>");
  }
  function binText(lane, i) {
    const bins = lane.bins;
    const group = bins.top_group[i] >= 0 ? view.bin_groups[bins.top_group[i]] : null;
    const busy = Object.entries(bins.busy_s).map(([name, s]) => [name, s[i]]).filter(([, s]) => s > 0).sort((x, y) => y[1] - x[1]);
    return [
      `<b>${ds.text(lane.label)}</b>`,
      `${ds.utc(bins.start[i], true)} UTC + ${ds.duration(bins.stop[i] - bins.start[i])}`,
      `${ds.count(bins.tasks[i])} tasks${group ? ` · mostly ${ds.text(group.name)}` : ""}`,
      ...busy.map(([name, s]) => `${ds.text(name)} ${ds.duration(s)}`),
    ].join("<br>");
  }

  // --- the model: every bar of the window, column-wise ---------------------------------
  // A series is what one legend entry names (a prefix's compute, an action, the bins of
  // a prefix): its bars as typed arrays, seconds after shownOrigin. Each bar also goes
  // into its lane's hit list, sorted by start, for hover and click.
  function series(name, colour, height) {
    return { name, colour, height, x0: [], x1: [], lane: [], item: [], action: [], alpha: null, outline: [] };
  }
  function buildModel() {
    const bySeries = new Map();
    const order = [];
    const get = (key, make) => {
      if (!bySeries.has(key)) { bySeries.set(key, make()); order.push(key); }
      return bySeries.get(key);
    };
    const o = shownOrigin;
    if (view.raw) {
      const colours = Object.fromEntries(view.prefixes.map((p) => [p.prefix, p.colour]));
      const actColours = Object.fromEntries(view.activities.filter((a) => a.colour).map((a) => [a.name, a.colour]));
      const others = [];
      view.tasks.forEach((t, i) => {
        const erred = t.state !== "memory";
        const computing = t.actions.filter((a) => a.action === "compute");
        if (!computing.length && !t.actions.length) computing.push({ action: "compute", start: t.start, stop: t.stop });
        const s = get(`c:${t.prefix}`, () => series(t.prefix, colours[t.prefix] || "#1f77b4", 0.8));
        for (const a of computing) {
          s.x0.push(a.start - o); s.x1.push(a.stop - o); s.lane.push(t.lane); s.item.push(i); s.action.push(-1); s.outline.push(erred ? 1 : 0);
        }
        t.actions.forEach((a, j) => { if (a.action !== "compute") others.push([t, i, a, j]); });
      });
      // the other actions thinner, over the compute bars, by activity colour
      for (const [t, i, a, j] of others) {
        const s = get(`a:${a.action}`, () => series(a.action, actColours[a.action] || "#9b59b6", 0.35));
        s.x0.push(a.start - o); s.x1.push(a.stop - o); s.lane.push(t.lane); s.item.push(i); s.action.push(j); s.outline.push(0);
      }
    } else {
      // bins: coloured by the group that computed most in them, paler when less busy
      view.lanes.forEach((lane, l) => {
        const bins = lane.bins;
        if (!bins) return;
        const computing = bins.busy_s.compute || [];
        for (let i = 0; i < bins.start.length; i += 1) {
          const group = bins.top_group[i] >= 0 ? view.bin_groups[bins.top_group[i]] : null;
          const [name, colour] = group ? [group.prefix, group.colour] : ["other activity", OTHER];
          const s = get(`b:${name}`, () => Object.assign(series(name, colour, 0.8), { alpha: [] }));
          const width = bins.stop[i] - bins.start[i];
          s.x0.push(bins.start[i] - o); s.x1.push(bins.stop[i] - o); s.lane.push(l); s.item.push(i); s.action.push(-1); s.outline.push(0);
          s.alpha.push(0.3 + 0.7 * Math.min(1, (computing[i] || 0) / width));
        }
      });
    }
    const list = order.map((k) => bySeries.get(k));
    for (const s of list) {
      for (const f of ["x0", "x1"]) s[f] = Float64Array.from(s[f]);
      for (const f of ["lane", "item", "action"]) s[f] = Int32Array.from(s[f]);
      s.outline = Uint8Array.from(s.outline);
      if (s.alpha) s.alpha = Float32Array.from(s.alpha);
    }
    // hit lists: per lane, every bar sorted by start, with the longest bar's length so a
    // search knows how far back a bar may still cover a moment
    const lanes = view.lanes.map(() => []);
    list.forEach((s, si) => { for (let i = 0; i < s.x0.length; i += 1) lanes[s.lane[i]].push([s.x0[i], s.x1[i], si, i]); });
    const hits = lanes.map((bars) => {
      bars.sort((a, b) => a[0] - b[0]);
      return {
        x0: Float64Array.from(bars, (b) => b[0]), x1: Float64Array.from(bars, (b) => b[1]),
        series: Int32Array.from(bars, (b) => b[2]), at: Int32Array.from(bars, (b) => b[3]),
        longest: bars.reduce((m, b) => Math.max(m, b[1] - b[0]), 0),
      };
    });
    // triggers: each key's executions in the window, and who waited for whom
    const byKey = new Map();
    const triggered = new Map();
    if (view.raw) {
      view.tasks.forEach((t, i) => {
        if (!byKey.has(t.key)) byKey.set(t.key, []);
        byKey.get(t.key).push(i);
        if (t.trigger) {
          if (!triggered.has(t.trigger)) triggered.set(t.trigger, []);
          triggered.get(t.trigger).push(i);
        }
      });
    }
    return { series: list, hits, byKey, triggered };
  }

  // --- painting -----------------------------------------------------------------------
  const layers = {};
  function canvas(name) {
    let c = layers[name];
    if (!c) {
      c = layers[name] = document.createElement("canvas");
      c.className = `timeline-${name}`;
      c.setAttribute("aria-hidden", "true");
      c.style.position = "absolute";
      c.style.pointerEvents = "none"; // plotly's drag layer below takes the mouse
    }
    // between plotly's two SVG layers: over the grid and the idle bands, under the
    // hover labels and the zoom box
    const svgs = chart.querySelectorAll(".svg-container > .main-svg");
    if (svgs.length && c.previousElementSibling !== svgs[0]) svgs[0].after(c);
    return c;
  }
  // The lanes' plot area in CSS pixels and the x range drawn, from the axes as plotly
  // laid them out (its _fullLayout: each axis's offset and length in pixels)
  function frame() {
    const full = chart._fullLayout;
    if (!full || !full.xaxis || !full.yaxis) return null;
    const xa = full.xaxis;
    const ya = full.yaxis;
    return { left: xa._offset, top: ya._offset, width: xa._length, height: ya._length, r0: xa.range[0], r1: xa.range[1] };
  }
  function sized(c, f) {
    const ratio = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(f.width * ratio));
    const h = Math.max(1, Math.round(f.height * ratio));
    if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
    Object.assign(c.style, { left: `${f.left}px`, top: `${f.top}px`, width: `${f.width}px`, height: `${f.height}px` });
    const ctx = c.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, f.width, f.height);
    return ctx;
  }
  const rows = () => Math.max(1, view.lanes.length);
  function geometry(f) {
    const k = f.width / (f.r1 - f.r0);
    const row = f.height / rows();
    return { k, row, x: (s) => (s - f.r0) * k, y: (lane) => (lane + 0.5) * row };
  }

  let paints = 0;
  function paint() {
    const f = frame();
    if (!f || !model) return;
    const started = performance.now();
    const ctx = sized(canvas("lanes"), f);
    const g = geometry(f);
    const ratio = window.devicePixelRatio || 1;
    const least = 1 / ratio; // a bar at least a device pixel wide
    // edges on device pixels (a bar's start down, its end up): crisp bars in their own
    // colour, none blended into its neighbours
    const down = (v) => Math.floor(v * ratio) / ratio;
    const up = (v) => Math.ceil(v * ratio) / ratio;
    // a faint line between the rows
    ctx.fillStyle = "rgba(0, 0, 0, 0.06)";
    for (let l = 1; l < rows(); l += 1) ctx.fillRect(0, Math.round(l * g.row), f.width, least);
    for (const s of model.series) {
      if (hidden.has(s.name)) continue;
      const h = Math.max(least, up(s.height * g.row));
      ctx.fillStyle = s.colour;
      const erred = [];
      for (let i = 0; i < s.x0.length; i += 1) {
        const a = down((s.x0[i] - f.r0) * g.k);
        const b = up((s.x1[i] - f.r0) * g.k);
        if (b < 0 || a > f.width) continue;
        const top = down((s.lane[i] + 0.5) * g.row - h / 2);
        const w = Math.max(b - a, least);
        if (s.alpha) ctx.globalAlpha = s.alpha[i];
        ctx.fillRect(a, top, w, h);
        if (s.outline[i]) erred.push([a, top, w, h]);
      }
      ctx.globalAlpha = 1;
      if (erred.length) {
        ctx.strokeStyle = ERRED;
        ctx.lineWidth = 2;
        for (const [a, top, w, hh] of erred) ctx.strokeRect(a, top, w, hh);
      }
    }
    paints += 1;
    chart.dataset.paints = String(paints);
    chart.dataset.paintMs = (performance.now() - started).toFixed(1);
    paintMarks();
  }

  // The hovered and the selected task: outlined, with their trigger arrows
  let drawnArrows = [];
  function executionsOf(key) {
    return (model.byKey.get(key) || []).map((i) => view.tasks[i]);
  }
  // The execution of `key` that ended last before `t` started (Dask reports each
  // worker's clock corrected to the scheduler's: a trigger may end a hair after)
  function triggerRun(t) {
    const runs = executionsOf(t.trigger);
    if (!runs.length) return null;
    const before = runs.filter((r) => r.stop <= t.start + 0.01);
    const pool = before.length ? before : runs;
    return pool.reduce((m, r) => (r.stop > m.stop ? r : m));
  }
  function arrowsFor(i) {
    const out = [];
    let t = view.tasks[i];
    const seen = new Set([t.key]);
    // back through the window: what made it start, and what made that one start, ...
    for (let n = 0; n < CHAIN && t.trigger && !seen.has(t.trigger); n += 1) {
      const run = triggerRun(t);
      if (!run) break;
      out.push({ from: run, to: t, kind: "trigger" });
      seen.add(run.key);
      t = run;
    }
    // forward one step: the tasks it made start
    const me = view.tasks[i];
    for (const j of model.triggered.get(me.key) || []) out.push({ from: me, to: view.tasks[j], kind: "triggered" });
    return out;
  }
  function arrow(ctx, g, f, a) {
    const x0 = (a.from.stop - shownOrigin - f.r0) * g.k;
    let y0 = g.y(a.from.lane);
    const x1 = (a.to.start - shownOrigin - f.r0) * g.k;
    let y1 = g.y(a.to.lane);
    // a curve leaving the trigger's end to the right and entering the task from the
    // left; on one row, an arc over the bars from the one's top to the other's
    const bend = Math.max(12, Math.min(60, Math.abs(x1 - x0) / 2));
    let c1 = [x0 + bend, y0];
    let c2 = [x1 - bend, y1];
    if (a.from.lane === a.to.lane) {
      y0 -= 0.4 * g.row;
      y1 -= 0.4 * g.row;
      const lift = 0.5 * g.row;
      c1 = [x0 + bend / 2, y0 - lift];
      c2 = [x1 - bend / 2, y1 - lift];
    }
    const curve = () => {
      ctx.beginPath();
      ctx.moveTo(x0, y0);
      ctx.bezierCurveTo(c1[0], c1[1], c2[0], c2[1], x1, y1);
      ctx.stroke();
    };
    // on a white halo, so it reads over the bars
    ctx.strokeStyle = "rgba(255, 255, 255, 0.9)";
    ctx.lineWidth = 4;
    curve();
    ctx.strokeStyle = ctx.fillStyle = a.kind === "trigger" ? ARROW_IN : ARROW_OUT;
    ctx.lineWidth = 2;
    curve();
    // the head along the curve's end
    const angle = Math.atan2(y1 - c2[1], x1 - c2[0]);
    const head = 8;
    ctx.beginPath();
    ctx.moveTo(x1, y1);
    ctx.lineTo(x1 - head * Math.cos(angle - 0.45), y1 - head * Math.sin(angle - 0.45));
    ctx.lineTo(x1 - head * Math.cos(angle + 0.45), y1 - head * Math.sin(angle + 0.45));
    ctx.closePath();
    ctx.fill();
    ctx.beginPath();
    ctx.arc(x0, y0, 2.5, 0, 2 * Math.PI);
    ctx.fill();
    const inside = [x1 - 4 * Math.cos(angle), y1 - 4 * Math.sin(angle)]; // a point of the head
    return { from: a.from.key, to: a.to.key, kind: a.kind, x0, y0, x1, y1, head: inside };
  }
  function outline(ctx, g, f, lane, start, stop, colour) {
    const a = (start - shownOrigin - f.r0) * g.k;
    const b = (stop - shownOrigin - f.r0) * g.k;
    const h = 0.8 * g.row + 4;
    ctx.strokeStyle = colour;
    ctx.lineWidth = 2;
    ctx.strokeRect(a - 2, g.y(lane) - h / 2, Math.max(b - a, 1) + 4, h);
  }
  function paintMarks() {
    const f = frame();
    if (!f || !model) return;
    const ctx = sized(canvas("marks"), f);
    const g = geometry(f);
    drawnArrows = [];
    // the selected task: each of its executions outlined, in any mode
    if (selected) {
      for (const e of selected.executions) if (e.lane >= 0) outline(ctx, g, f, e.lane, e.start, e.stop, SELECTED);
    }
    // the arrows of the hovered task, else of the selected one where the window has it
    let i = hovered && hovered.task !== undefined ? hovered.task : null;
    if (i === null && selected && view.raw) {
      const runs = model.byKey.get(selected.key) || [];
      i = runs.length ? runs[runs.length - 1] : null;
    }
    if (i !== null) {
      const t = view.tasks[i];
      if (hovered && hovered.task === i) outline(ctx, g, f, t.lane, t.start, t.stop, "#5f6368");
      drawnArrows = arrowsFor(i).map((a) => arrow(ctx, g, f, a));
    }
    chart.dsArrows = drawnArrows;
    chart.dataset.arrows = String(drawnArrows.length);
  }

  // --- hover and click --------------------------------------------------------------
  const tip = document.getElementById("timeline-tip");
  // The bar under (px, py), CSS pixels in the chart; null when none
  function hitAt(px, py) {
    const f = frame();
    if (!f || !model) return null;
    const x = px - f.left;
    const y = py - f.top;
    if (x < 0 || y < 0 || x > f.width || y > f.height) return null;
    const g = geometry(f);
    const lane = Math.floor(y / g.row);
    const hits = model.hits[lane];
    if (!hits || !hits.x0.length) return null;
    const at = f.r0 + x / g.k;
    const slack = 3 / g.k; // a few pixels either side: thin bars can be hovered
    // the last bar starting before the moment, then back as far as the longest bar reaches
    let lo = 0;
    let hi = hits.x0.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (hits.x0[mid] <= at + slack) lo = mid + 1; else hi = mid; }
    let best = null;
    for (let j = lo - 1; j >= 0 && hits.x0[j] >= at - hits.longest - slack; j -= 1) {
      const s = model.series[hits.series[j]];
      if (hidden.has(s.name) || hits.x1[j] < at - slack) continue;
      const within = hits.x0[j] <= at && at <= hits.x1[j];
      const length = hits.x1[j] - hits.x0[j];
      // the bar the moment falls in, the shortest first (an action inside a task),
      // else the nearest within the slack
      const score = within ? length : 1e12 + Math.min(Math.abs(hits.x0[j] - at), Math.abs(hits.x1[j] - at));
      if (!best || score < best.score) best = { score, series: hits.series[j], at: hits.at[j] };
    }
    if (!best) return null;
    const s = model.series[best.series];
    const item = s.item[best.at];
    if (view.raw) {
      const t = view.tasks[item];
      const j = s.action[best.at];
      return { task: item, key: t.key, text: taskText(t, j >= 0 ? t.actions[j] : null) };
    }
    return { bin: item, lane, text: binText(view.lanes[lane], item) };
  }
  chart.dsHitAt = (clientX, clientY) => {
    const box = chart.getBoundingClientRect();
    return hitAt(clientX - box.left, clientY - box.top);
  };
  function showTip(hit, ev) {
    if (!hit) { tip.hidden = true; return; }
    tip.innerHTML = hit.text; // built from ds.text-escaped parts only
    tip.hidden = false;
    const pad = 14;
    const w = tip.offsetWidth;
    const h = tip.offsetHeight;
    let x = ev.clientX + pad;
    let y = ev.clientY + pad;
    if (x + w > window.innerWidth - 4) {
      // no room on the right, where later tasks are: below (or above) the lanes, so
      // it covers neither the task nor the arrows coming to it from the left
      const f = frame();
      const box = chart.getBoundingClientRect();
      const below = box.top + f.top + f.height + 8;
      x = Math.max(4, Math.min(ev.clientX - w / 2, window.innerWidth - w - 4));
      y = below + h < window.innerHeight - 4 ? below : Math.max(4, box.top + f.top - 8 - h);
    } else if (y + h > window.innerHeight - 4) {
      y = Math.max(4, ev.clientY - pad - h);
    }
    tip.style.left = `${x}px`;
    tip.style.top = `${y}px`;
  }
  function pointer(ev) {
    const box = chart.getBoundingClientRect();
    return [ev.clientX - box.left, ev.clientY - box.top];
  }
  chart.addEventListener("mousemove", (ev) => {
    if (ev.buttons) { tip.hidden = true; return; } // dragging: plotly's zoom or pan
    const hit = hitAt(...pointer(ev));
    showTip(hit, ev);
    const same = (hit && hit.task) === (hovered && hovered.task) && (hit && hit.bin) === (hovered && hovered.bin);
    hovered = hit;
    chart.dataset.hovered = hit && hit.key ? hit.key : "";
    if (!same) paintMarks();
  });
  chart.addEventListener("mouseleave", () => {
    tip.hidden = true;
    if (hovered) { hovered = null; chart.dataset.hovered = ""; paintMarks(); }
  });
  // plotly's drag layer takes the mouse; a click that was not a drag lands here
  chart.addEventListener("click", (ev) => {
    if (chart._dragged) return;
    const hit = hitAt(...pointer(ev));
    if (hit && hit.key) select(hit.key);
  });

  // --- the legend ---------------------------------------------------------------------
  // HTML below the chart, as many rows as it takes at any width (plotly's own, over the
  // chart, covered the rows of a phone and met the mode bar and the "Busy %" panel);
  // each entry a button that hides or shows what it names
  const IDLE_NAME = "no thread computing";
  const BUSY_NAME = "threads busy";
  function legend() {
    const box = document.getElementById("timeline-legend");
    const entries = model.series.map((s) => [s.name, s.colour]);
    entries.push([BUSY_NAME, "#2f6fd1"]);
    if (view.idle_gaps.length) entries.push([IDLE_NAME, IDLE]);
    box.replaceChildren(...entries.map(([name, colour]) => {
      const swatch = Object.assign(document.createElement("i"), { className: "swatch" });
      swatch.style.background = colour;
      const button = Object.assign(document.createElement("button"), { type: "button", className: "legend-item" });
      button.dataset.name = name;
      button.setAttribute("aria-pressed", String(!hidden.has(name)));
      button.title = `hide or show ${name}`;
      button.append(swatch, name);
      button.addEventListener("click", () => {
        if (hidden.has(name)) hidden.delete(name); else hidden.add(name);
        button.setAttribute("aria-pressed", String(!hidden.has(name)));
        if (name === IDLE_NAME) Plotly.relayout(chart, { shapes: idleShapes() });
        else if (name === BUSY_NAME) Plotly.restyle(chart, { visible: hidden.has(name) ? "legendonly" : true }, [1]);
        else paint();
        publish();
      });
      return button;
    }));
  }
  // What the lanes draw, for whoever reads the page (the tests): a legend entry each,
  // and where a task's compute bar is on the screen (its middle, in client pixels)
  function publish() {
    chart.dsSeries = model.series.map((s) => ({ name: s.name, colour: s.colour, bars: s.x0.length, visible: !hidden.has(s.name) }));
  }
  chart.dsLocate = (key) => {
    const f = frame();
    const runs = model && model.byKey.get(key);
    if (!f || !runs) return null;
    const t = view.tasks[runs[runs.length - 1]];
    const computing = t.actions.find((a) => a.action === "compute") || t;
    const g = geometry(f);
    const box = chart.getBoundingClientRect();
    const middle = (computing.start + computing.stop) / 2 - shownOrigin;
    return { x: box.left + f.left + g.x(middle), y: box.top + f.top + g.y(t.lane), lane: t.lane };
  };

  // --- plotly: axes, the "Busy %" panel, idle bands ----------------------------------
  function utilisationTrace() {
    const u = view.utilisation;
    return {
      type: "scatter", mode: "lines", name: BUSY_NAME, yaxis: "y2", line: { shape: "hv", width: 1, color: "#2f6fd1" },
      fill: "tozeroy", fillcolor: "rgba(47, 111, 209, 0.2)", hoverinfo: "text", visible: hidden.has(BUSY_NAME) ? "legendonly" : true,
      x: u.length ? [...u.map((b) => b.start - shownOrigin), u[u.length - 1].stop - shownOrigin] : [],
      y: u.length ? [...u.map((b) => 100 * b.fraction), 100 * u[u.length - 1].fraction] : [],
      hovertext: u.length ? [...u, u[u.length - 1]].map((b) => `${ds.utc(b.start, true)} UTC: ${ds.percent(b.fraction)} of the threads busy`) : [],
    };
  }
  function idleShapes() {
    return view.idle_gaps.map((g) => ({
      type: "rect", xref: "x", yref: "y domain", x0: g.start - shownOrigin, x1: g.stop - shownOrigin, y0: 0, y1: 1,
      fillcolor: IDLE, line: { width: 0 }, layer: "below", name: IDLE_NAME, visible: !hidden.has(IDLE_NAME),
    }));
  }

  // One draw at a time: a window's answer arriving while plotly still draws the last one
  // (a mode-bar click, then another) made two Plotly.react calls overlap, and plotly
  // threw ("reading 'select'"); each waits for the one before and draws the newest view
  let drawn = Promise.resolve();
  function draw() {
    const next = drawn.then(drawNow);
    drawn = next.catch(() => {});
    return next;
  }
  function drawNow() {
    shownOrigin = origin();
    model = buildModel();
    hovered = null;
    syncSelected();
    const narrow = chart.clientWidth < 600;
    const labels = view.lanes.map((l) => ds.text(l.label));
    const laneHeight = narrow ? 20 : 24;
    // the legend is HTML below the chart: the chart's height is the rows'
    const height = Math.max(narrow ? 320 : 380, 170 + labels.length * laneHeight);
    const when = ds.utc(shownOrigin, true);
    // an empty trace on the lanes' axes keeps their subplot (the bars are the canvas's)
    const traces = [{ type: "scatter", x: [], y: [], hoverinfo: "skip", showlegend: false }, utilisationTrace()];
    const layout = ds.layout({
      height,
      // no transition: the axis is where the zoom or pan left it, and the lanes'
      // canvas is painted once plotly has drawn (an animated axis made each window
      // wait 300 ms for it)
      transition: { duration: 0 },
      hovermode: "closest",
      dragmode: "zoom",
      // above the "Busy %" panel: room for plotly's mode bar, so it covers nothing
      margin: { l: 10, r: 10, t: 34, b: 10 },
      showlegend: false,
      xaxis: ds.axis(`Time (s after ${narrow ? when.slice(11) : when} UTC)`, {
        range: [view.start - shownOrigin, view.stop - shownOrigin], zeroline: false, anchor: "y",
        showgrid: true, nticks: narrow ? 5 : 12,
      }),
      yaxis: ds.axis("Worker thread", {
        tickmode: "array", tickvals: labels.map((_, i) => i), ticktext: labels, range: [labels.length - 0.5, -0.5],
        showgrid: false, zeroline: false, fixedrange: true, domain: [0, 0.8], tickfont: { size: narrow ? 9 : 11 },
      }),
      yaxis2: ds.axis("Busy %", { domain: [0.86, 1], range: [0, 100], fixedrange: true, tickvals: [0, 50, 100], anchor: "x" }),
      shapes: idleShapes(),
    });
    drawing = true;
    legend();
    publish();
    // the box as tall as the chart: a redraw on resize left it at its min-height, the
    // chart spilling over the legend below
    chart.style.height = `${height + chart.offsetHeight - chart.clientHeight}px`; // + borders
    const config = { ...ds.config, doubleClick: "autosize" };
    let done;
    try {
      done = Plotly.react(chart, traces, layout, config);
    } catch (err) {
      done = Promise.reject(err);
    }
    // plotly's react can throw when a mode-bar action left its state half-changed
    // ("reading 'select'"): then the chart is drawn anew, its events bound again
    return done.catch(() => { bound = false; return Plotly.newPlot(chart, traces, layout, config).then(bind); })
      .then(paint)
      .finally(() => { drawing = false; });
  }

  // --- state: window, filters and the selected task in the URL ------------------------
  const number = (v) => (v === null || v === undefined ? null : Number(v).toFixed(6));
  function wanted() {
    const p = new URLSearchParams();
    for (const key of [...FILTERS, "start", "stop", "max_tasks"]) {
      const v = ds.state.get(key);
      if (v) p.set(key, v);
    }
    // a bin every two pixels: as fine as the eye reads, half the work of one a pixel
    p.set("bins", String(Math.max(50, Math.min(4000, Math.round((chart.clientWidth || 1000) / 2)))));
    return p;
  }

  let shownQuery = wanted().toString(); // the window and filters on screen
  const held = view; // a report file's one window (web/report_file.py)
  async function load() {
    if (ds.report) { // zoomed, the held window is stretched; the whole range is it again
      const whole = !ds.state.get("start") && !ds.state.get("stop");
      if (whole) { view = held; await show(); }
      status(whole ? "The whole window this report holds."
        : `Zoomed into the window this report holds${view.raw ? "" : " (its bins stretched)"}: the dashboard loads each window's own tasks.`);
      return;
    }
    const mine = ++asked;
    status("Loading…");
    let body;
    const query = wanted().toString();
    try {
      body = await ds.json(`${base}/timeline?${query}`);
    } catch (err) {
      if (mine === asked) status(`Could not load the window: ${err.message}`);
      return;
    }
    if (mine !== asked) return;
    view = body;
    shownQuery = query;
    loads += 1;
    document.body.dataset.loads = String(loads);
    await show();
  }

  function choose(start, stop) {
    ds.state.set({ start: number(start), stop: number(stop) });
    load();
  }

  let bound = false;
  function bind() {
    if (bound) return;
    bound = true;
    chart.on("plotly_relayout", (ev) => {
      paint(); // the bars follow the axis at once; the window's own bars come after
      if (drawing) return;
      if (ev["xaxis.autorange"]) { choose(null, null); return; }
      let a = ev["xaxis.range[0]"];
      let b = ev["xaxis.range[1]"];
      if (Array.isArray(ev["xaxis.range"])) [a, b] = ev["xaxis.range"];
      if (a === undefined || b === undefined) return;
      const start = shownOrigin + Number(a);
      const stop = shownOrigin + Number(b);
      if (Math.abs(start - view.start) < 1e-6 && Math.abs(stop - view.stop) < 1e-6) return;
      choose(start, stop);
    });
    // while panning, plotly moves its axis: the bars move with it
    chart.on("plotly_relayouting", () => paint());
    chart.on("plotly_afterplot", () => paint());
  }

  document.getElementById("timeline-reset").addEventListener("click", () => choose(null, null));
  document.getElementById("zoom-out").addEventListener("click", () => {
    const first = view.totals.first ?? view.start;
    const last = view.totals.last ?? view.stop;
    const half = view.stop - view.start;
    const start = Math.max(first, view.start - half / 2);
    const stop = Math.min(last, view.stop + half / 2);
    if (start <= first && stop >= last) choose(null, null);
    else choose(start, stop);
  });
  for (const button of document.querySelectorAll(".clear-filter")) {
    button.addEventListener("click", () => {
      ds.state.set({ [button.dataset.filter]: null, start: null, stop: null });
      load();
    });
  }
  ds.state.onChange(() => {
    if (wanted().toString() !== shownQuery) load(); // else only the selection changed
    const key = ds.state.get("task");
    if (key !== (selected ? selected.key : null)) showTask(key);
  });

  // --- the rest of the page ---------------------------------------------------------
  function status(text) {
    document.getElementById("timeline-status").textContent = text;
  }

  function setStat(key, text) {
    document.querySelector(`[data-stat="${key}"]`).textContent = text;
  }

  function fillFilters() {
    let any = false;
    for (const key of FILTERS) {
      const value = view.filters[key];
      const el = document.querySelector(`.filter[data-filter="${key}"]`);
      el.hidden = !value;
      el.querySelector(".filter-value").textContent = value || "";
      any = any || Boolean(value);
    }
    document.getElementById("filters").hidden = !any;
  }

  function row(tbody, cells) {
    const tr = tbody.insertRow();
    tr.append(...cells);
    return tr;
  }
  function keyButton(key, label) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "key-link";
    button.textContent = label || key;
    button.addEventListener("click", () => select(key));
    return button;
  }
  function keyCell(key) {
    const td = document.createElement("td");
    td.appendChild(keyButton(key));
    return td;
  }
  const groupUrl = (group) => {
    const p = new URLSearchParams(window.location.search);
    p.set("group", group);
    p.delete("start");
    p.delete("stop");
    return `${window.location.pathname}?${p}`;
  };

  function fillTables() {
    const gaps = document.querySelector("#idle-gaps tbody");
    gaps.replaceChildren();
    for (const g of [...view.idle_gaps.slice(0, 5), ...view.lane_gaps.slice(0, 5)]) {
      row(gaps, [ds.cell(ds.duration(g.duration_s), { cls: "num" }), ds.cell(g.lane === null ? "all threads" : g.lane),
        ds.cell(ds.utc(g.start, true)), ds.cell(ds.utc(g.stop, true))]);
    }
    const note = view.raw ? "Exact: every task of the window is known." : `To within ${ds.duration(view.resolution_s)} (a bin of the window); zoom in for exact gaps.`;
    document.getElementById("gaps-note").textContent = (gaps.rows.length ? "" : "No idle time in this window. ") + note;
    const slowest = document.querySelector("#slowest tbody");
    slowest.replaceChildren();
    for (const t of view.slowest) {
      row(slowest, [ds.cell(ds.duration(t.stop - t.start), { cls: "num" }), ds.cell(ds.duration(t.compute_s), { cls: "num" }),
        keyCell(t.key), ds.cell(t.group, { href: groupUrl(t.group) }), ds.cell(laneOf(t).label),
        ds.cell(ds.utc(t.start, true)), ds.cell(ds.bytes(t.nbytes), { cls: "num" })]);
    }
  }

  // The selected task: in the URL (?task=KEY), its executions listed below the chart
  // and outlined on it
  function select(key) {
    ds.state.set({ task: key });
    showTask(key);
  }
  // Its executions' rows on this window's lanes (a lane is named the same in both)
  function syncSelected() {
    if (!selected) return;
    const index = new Map(view.lanes.map((l, i) => [l.label, i]));
    selected.executions = selected.detail.executions.map((t) => ({
      lane: index.has(selected.detail.lanes[t.lane].label) ? index.get(selected.detail.lanes[t.lane].label) : -1,
      start: t.start, stop: t.stop,
    }));
  }
  let shownKey = 0;
  async function showTask(key) {
    const div = document.getElementById("task-detail");
    const mine = ++shownKey;
    if (!key) {
      selected = null;
      delete div.dataset.key;
      div.replaceChildren(Object.assign(document.createElement("p"), { className: "muted", textContent: "Click a task on the timeline (or a key below) to see every execution of it." }));
      paintMarks();
      return;
    }
    let detail;
    try {
      detail = await ds.json(`${base}/tasks/${encodeURIComponent(key)}`);
    } catch (err) {
      if (mine !== shownKey) return;
      selected = null;
      div.replaceChildren(Object.assign(document.createElement("p"), { className: "bad", textContent: err.message }));
      div.dataset.key = key;
      paintMarks();
      return;
    }
    if (mine !== shownKey) return;
    selected = { key: detail.key, detail, executions: [] };
    syncSelected();
    paintMarks();
    const title = Object.assign(document.createElement("p"), { className: "task-key" });
    title.append(Object.assign(document.createElement("code"), { textContent: detail.key }),
      ` · ${detail.executions.length === 1 ? "one execution" : `${detail.executions.length} executions (recomputed)`}`);
    const parts = [title];
    const triggers = [...new Set(detail.executions.map((t) => t.trigger).filter(Boolean))];
    if (triggers.length) {
      const p = Object.assign(document.createElement("p"), { className: "task-trigger" });
      p.append("Started when this dependency ended: ");
      triggers.forEach((k, i) => { if (i) p.append(", "); p.append(keyButton(k)); });
      parts.push(p);
    }
    const table = document.createElement("table");
    table.className = "listing";
    table.id = "task-executions";
    table.createTHead().innerHTML = "<tr><th>Worker · thread</th><th>Start (UTC)</th><th class='num'>Duration</th><th class='num'>Compute</th><th class='num'>Output</th><th>State</th><th>Actions</th></tr>";
    const tbody = table.createTBody();
    for (const t of detail.executions) {
      row(tbody, [ds.cell(detail.lanes[t.lane].label), ds.cell(ds.utc(t.start, true)), ds.cell(ds.duration(t.stop - t.start), { cls: "num" }),
        ds.cell(ds.duration(t.compute_s), { cls: "num" }), ds.cell(ds.bytes(t.nbytes), { cls: "num" }), ds.cell(t.state, { cls: t.state === "memory" ? "" : "bad" }),
        ds.cell(t.actions.map((a) => `${a.action} ${ds.duration(a.stop - a.start)}${a.source ? ` from ${a.source}` : ""}`).join(", "))]);
    }
    const wrap = Object.assign(document.createElement("div"), { className: "scroll-x" });
    wrap.appendChild(table);
    parts.push(wrap);
    div.replaceChildren(...parts);
    div.dataset.key = detail.key;
  }

  async function show() {
    const t = view.totals;
    setStat("window", ds.duration(view.stop - view.start));
    setStat("tasks", ds.count(t.tasks));
    setStat("threads", `${ds.count(t.workers)} · ${ds.count(t.threads)}`);
    setStat("busy", ds.duration(t.busy_s));
    setStat("utilisation", ds.percent(t.utilisation));
    fillFilters();
    fillTables();
    const bins = view.lanes.reduce((n, l) => Math.max(n, l.bins ? l.bins.start.length : 0), 0);
    status(view.raw
      ? `Every task of the window: ${ds.count(view.tasks.length)}. Hover a task for the arrows of what made it start.`
      : `${ds.count(t.tasks)} tasks: each thread's time in bins of ${ds.duration(view.resolution_s)} (up to ${ds.count(bins)} a thread); zoom in to see the tasks.`);
    document.body.dataset.mode = view.raw ? "raw" : "binned";
    await draw();
    bind();
    document.body.dataset.window = `${number(view.start)},${number(view.stop)}`;
  }

  show();
  if (ds.state.get("task")) showTask(ds.state.get("task"));
  // Redrawn for a new width only (the rows' labels depend on it); a taller window
  // changes nothing
  let drawnWidth = chart.clientWidth;
  window.addEventListener("resize", () => {
    if (drawing || chart.clientWidth === drawnWidth) return;
    drawnWidth = chart.clientWidth;
    draw();
  });
})();
