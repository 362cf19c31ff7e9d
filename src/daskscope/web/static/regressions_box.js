// The account page's Regressions box: what /api/v1/regressions found, each a link to its
// history. Written with textContent only (names are user data).
"use strict";
(() => {
  const summary = document.getElementById("regressions-summary");
  const list = document.getElementById("regressions-found");
  if (!summary || !list) return;
  fetch("/api/v1/regressions", { headers: { Accept: "application/json" } })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`HTTP ${r.status}`))))
    .then((view) => {
      const n = view.regressions.length;
      const checked = `${view.checked} recurring thing${view.checked === 1 ? "" : "s"} checked`;
      summary.textContent = n
        ? `${n} figure${n === 1 ? "" : "s"} regressed (${checked}).`
        : `No regressions (${checked}).`;
      summary.classList.toggle("muted", !n);
      for (const r of view.regressions) {
        const item = document.createElement("li");
        const link = document.createElement("a");
        link.href = r.history_url;
        link.textContent = `${r.kind} “${r.name}”`;
        const side = r.check.threshold < r.check.median ? "below" : "above";
        item.append(link, `: ${r.label} ${r.check.recent_text.join(", ")} (all ${side} ${r.check.threshold_text})`);
        list.append(item);
      }
    })
    .catch((err) => { summary.textContent = `Regressions could not be checked: ${err.message}.`; });
})();
