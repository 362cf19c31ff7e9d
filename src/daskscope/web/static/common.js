// Helpers shared by the dashboard's pages (no dependencies but plotly.js).
"use strict";
const ds = (() => {
  const animate = () =>
    !(window.daskscopeAnimations === false || window.matchMedia("(prefers-reduced-motion: reduce)").matches);
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  return {
    data: () => JSON.parse(document.getElementById("page-data").textContent),
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
    bytes(n) {
      if (n === null || n === undefined) return "–";
      let i = 0; let v = Number(n);
      while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
      return i === 0 ? `${v.toFixed(0)} B` : `${v.toFixed(1)} ${units[i]}`;
    },
    duration(s) {
      if (s === null || s === undefined) return "–";
      if (s < 60) return `${s.toFixed(1)} s`;
      if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
      if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
      return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
    },
    utc(t) {
      return t === null || t === undefined ? "–" : new Date(t * 1000).toISOString().slice(0, 19).replace("T", " ");
    },
    num: (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US")),
    money: (v, cur) => (v === null || v === undefined ? "–" : `${Number(v).toFixed(2)} ${cur || "USD"}`),
    async json(url) {
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
  };
})();
