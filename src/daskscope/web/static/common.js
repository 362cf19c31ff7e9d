// Helpers shared by the dashboard's pages (no dependencies; plotly.js for the charts,
// loaded by the page or, where a page draws its first chart without it, by ds.plotly()).
// Numbers read as daskscope.format writes them: DS_FORMAT is format.SPEC, which the
// server puts before this file (web/routes/assets.py), so these functions apply the
// same definitions as the terminal and the templates. Rounding is toFixed's (half away
// from zero on the exact value), which format.py follows.
"use strict";
// Nothing a page can do sends data off this host. plotly.js puts a "Share chart..." button
// on every chart's mode bar that opens plotly's cloud with the chart's data (task keys,
// members, costs): off for every chart on every page, whatever config a page passes,
// and no address to send to should a page turn it back on.
const dsNoCloud = () => Plotly.setPlotConfig({ showSendToCloud: false, plotlyServerURL: "" });
if (window.Plotly) dsNoCloud();
const ds = (() => {
  const F = DS_FORMAT;
  // A report file (daskscope report, web/report_file.py) holds the answers to the
  // requests its page makes: ds.json reads them there and asks no server.
  const REPORT = (() => {
    const held = document.getElementById("report-responses");
    return held ? JSON.parse(held.textContent) : null;
  })();
  const MISSING = F.missing;
  const animate = () =>
    !(window.daskscopeAnimations === false || window.matchMedia("(prefers-reduced-motion: reduce)").matches);
  const missing = (v) => v === null || v === undefined || !Number.isFinite(Number(v));
  // v with d decimals; thousands separated when grouping; no sign on a zero
  const fixed = (v, d, grouping) => {
    if (Math.abs(v) >= 1e21) return scientific(v); // where toFixed gives up
    let t = (v + 0).toFixed(d);
    if (t.startsWith("-") && !/[1-9]/.test(t)) t = t.slice(1);
    if (!grouping) return t;
    const [whole, frac] = t.split(".");
    return whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",") + (frac === undefined ? "" : `.${frac}`);
  };
  // Python's float floor division (a, b > 0)
  const floordiv = (a, b) => {
    const div = (a - (a % b)) / b;
    const floor = Math.floor(div);
    return fixed(div - floor > 0.5 ? floor + 1 : floor, 0);
  };
  const roundHalfEven = (x) => {
    const r = Math.round(x);
    return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
  };
  // the power of ten parsed, not computed: both languages get the nearest double
  const scientific = (v) => {
    const magnitude = Math.floor(Math.log10(Math.abs(v)));
    return `${fixed(v / parseFloat(`1e${magnitude}`), F.significant - 1)}e${magnitude}`;
  };
  const significant = (v) => {
    if (v === 0) return "0";
    const magnitude = Math.floor(Math.log10(Math.abs(v)));
    const [low, high] = F.scientific;
    if (!(low <= magnitude && magnitude < high)) return scientific(v);
    return fixed(v, Math.max(0, F.significant - 1 - magnitude), true);
  };
  const twoUnits = (sign, s, big, bigScale, small, smallScale) =>
    `${sign}${floordiv(s, bigScale)} ${big} ${floordiv(s % bigScale, smallScale)} ${small}`;
  const percent = (v, scale) => (missing(v) ? MISSING : `${fixed(Number(v) * scale, F.percent.decimals)} %`);

  const fmt = {
    MISSING,
    bytes(n) {
      if (missing(n)) return MISSING;
      const { base, units, decimals } = F.bytes;
      let size = Number(n);
      for (let i = 0; i < units.length; i += 1) {
        if (Math.abs(size) < base || i === units.length - 1) return `${fixed(size, i === 0 ? 0 : decimals)} ${units[i]}`;
        size /= base;
      }
      return MISSING;
    },
    duration(seconds) {
      if (missing(seconds)) return MISSING;
      let s = Number(seconds);
      const sign = s < 0 ? "-" : "";
      s = Math.abs(s);
      if (s === 0) return "0 s";
      const D = F.duration;
      for (const [below, unit, scale, decimals] of D.small) {
        if (s < below) return `${sign}${fixed(s * scale, decimals)} ${unit}`;
      }
      for (const [below, ...parts] of D.large) if (s < below) return twoUnits(sign, s, ...parts);
      return twoUnits(sign, s, ...D.largest);
    },
    // UTC epoch seconds as "2026-11-23 13:45:01", ".123" more with millis (microseconds
    // rounded half to even first, as Python's datetime does)
    utc(t, millis) {
      if (missing(t)) return MISSING;
      const x = Number(t);
      const [low, high] = F.timestamp.range;
      if (!(low <= x && x < high)) return fmt.num(x);
      let whole = Math.trunc(x);
      let micros = roundHalfEven((x - whole) * 1e6);
      if (micros >= 1e6) { whole += 1; micros -= 1e6; } else if (micros < 0) { whole -= 1; micros += 1e6; }
      const text = new Date(whole * 1000).toISOString().slice(0, 19).replace("T", " ");
      return millis ? `${text}.${String(Math.floor(micros / 1000)).padStart(3, "0")}` : text;
    },
    num(n) {
      if (missing(n)) return MISSING;
      const x = Number(n);
      return Number.isInteger(x) && Math.abs(x) < 1e15 ? fixed(x, 0, true) : significant(x);
    },
    count(n) {
      if (missing(n)) return MISSING;
      const x = Number(n);
      return Math.abs(x) < 1e21 ? fixed(x, 0, true) : significant(x);
    },
    rate: (v, unit) => (missing(v) ? MISSING : `${significant(Number(v))} ${unit}`),
    percent: (fraction) => percent(fraction, 100),
    money(v, currency) {
      if (missing(v)) return MISSING;
      const x = Number(v);
      const decimals = x !== 0 && Math.abs(x) < 1 ? F.money.small_decimals : F.money.decimals;
      return `${fixed(x, decimals, true)} ${currency || "USD"}`;
    },
    // A value in its unit's form (format.value_text): the units of the metric catalogue
    value(v, unit, currency) {
      if (missing(v)) return MISSING;
      const spec = Object.prototype.hasOwnProperty.call(F.units, unit) ? F.units[unit] : null;
      if (spec === null) return `${fmt.num(v)} ${unit}`;
      const kinds = {
        duration: () => fmt.duration(v),
        bytes: () => fmt.bytes(v),
        timestamp: () => fmt.utc(v),
        percent: () => percent(v, spec.scale),
        money: () => fmt.money(v, currency || F.money.currency),
        significant: () => significant(Number(v)),
        count: () => fmt.count(v),
      };
      return (kinds[spec.kind] || (() => fmt.num(v)))() + (spec.suffix || "");
    },
  };

  // plotly.js for a page that does not load it itself (its <meta name="daskscope-plotly">
  // names it): fetched after the page's first frame, so that the 1.5 MB and the most of a
  // second it takes to compile and run come after what the server drew (the cluster
  // page's first chart); every chart drawing awaits this.
  let plotlyLoad = null;
  function plotly() {
    if (window.Plotly) return Promise.resolve(window.Plotly);
    if (plotlyLoad) return plotlyLoad;
    const meta = document.querySelector('meta[name="daskscope-plotly"]');
    if (!meta) return Promise.reject(new Error("this page loads no plotly.js"));
    plotlyLoad = new Promise((resolve, reject) => {
      requestAnimationFrame(() => setTimeout(() => {
        const script = document.createElement("script");
        script.src = meta.content;
        script.onload = () => { dsNoCloud(); resolve(window.Plotly); };
        script.onerror = () => { plotlyLoad = null; reject(new Error(`plotly.js did not load from ${meta.content}`)); };
        document.head.append(script);
      }, 0));
    });
    return plotlyLoad;
  }

  return {
    ...fmt,
    plotly,
    // The page's data: "page-data", or a part's own (a report file's timeline) when present
    data: (id) => JSON.parse(((id && document.getElementById(id)) || document.getElementById("page-data")).textContent),
    report: REPORT !== null,
    animate,
    layout: (extra) => Object.assign(
      { margin: { l: 60, r: 20, t: 10, b: 40 }, transition: { duration: animate() ? 300 : 0 },
        font: { size: 12 }, legend: { orientation: "h", y: -0.15 } },
      extra || {}),
    config: { displaylogo: false, responsive: true },
    // Text for plotly, which reads strings as its own markup (<a href>, <b>, <br>,
    // <span style>...) in names, labels, axes and hover: what a cluster sends must
    // show as typed, so every such string goes through here first.
    text: (value) => String(value ?? "").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"),
    async json(url) {
      if (REPORT !== null) {
        if (Object.prototype.hasOwnProperty.call(REPORT, url)) return structuredClone(REPORT[url]);
        throw new Error("not in this report file: open the page on the daskscope server for this view");
      }
      const response = await fetch(url, { headers: { Accept: "application/json" } });
      const body = await response.json();
      if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
      return body;
    },
    // A table cell; text only (never HTML), optionally a link.
    cell(text, { cls, href } = {}) {
      const td = document.createElement("td");
      if (cls) td.className = cls;
      if (href) {
        const a = document.createElement("a");
        a.href = href; a.textContent = text; td.appendChild(a);
      } else {
        td.textContent = text;
      }
      return td;
    },
    // A plotly axis with its title (plotly.js wants {text}: a bare string is ignored)
    axis: (title, extra) => Object.assign({ title: { text: title }, automargin: true }, extra || {}),
    // Ticks of a bytes axis from 0 to max in one binary unit, e.g. 0, 256 MiB, 512 MiB:
    // plotly's own formats are decimal ("1.12B")
    bytesTicks(max) {
      const { base, units } = F.bytes;
      let i = 0;
      while (i < units.length - 1 && max >= base ** (i + 1)) i += 1;
      const scale = base ** i;
      const top = Math.max(max / scale, 1);
      const rough = top / 4;
      const pow = 10 ** Math.floor(Math.log10(rough));
      // whole bytes never split: a flat zero series gets 0, 1 B, ... not 0.25 B
      const step = Math.max(i === 0 ? 1 : 0, [1, 2, 2.5, 5, 10].map((m) => m * pow).find((m) => m >= rough));
      const tickvals = [];
      const ticktext = [];
      for (let v = 0; v <= top + step / 2; v += step) {
        tickvals.push(v * scale);
        ticktext.push(`${Number(v.toFixed(3))} ${units[i]}`);
      }
      return { tickvals, ticktext, range: [0, Math.max(max, step * scale) * 1.05] };
    },
    // The page's view state in its URL (?key=value), so a reload or a shared link shows
    // the same view and Back/Forward step through what the user chose.
    state: {
      get(key, fallback) {
        const value = new URLSearchParams(window.location.search).get(key);
        return value === null ? (fallback === undefined ? null : fallback) : value;
      },
      // Set (null/"" removes) keys; push a history entry unless {replace: true}
      set(values, { replace } = {}) {
        const params = new URLSearchParams(window.location.search);
        for (const [key, value] of Object.entries(values)) {
          if (value === null || value === undefined || value === "") params.delete(key);
          else params.set(key, String(value));
        }
        const query = params.toString();
        const url = `${window.location.pathname}${query ? `?${query}` : ""}${window.location.hash}`;
        if (url === `${window.location.pathname}${window.location.search}${window.location.hash}`) return;
        if (replace) window.history.replaceState(null, "", url);
        else window.history.pushState(null, "", url);
      },
      // Call fn when Back/Forward changed the URL's state
      onChange(fn) {
        window.addEventListener("popstate", () => fn());
      },
    },
  };
})();
