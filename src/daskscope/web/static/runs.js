// Workflow runs listing: its state (filters, order, page) is the URL, rendered by the
// server, so reload and Back/Forward show the same runs. This script only keeps the
// URL short and makes the sort headers answer Space as buttons do.
"use strict";
(() => {
  const form = document.getElementById("run-filters");
  // Leave empty filters out of the URL: /runs?status=failed, not ?q=&user=&status=failed
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams();
    for (const [key, value] of new FormData(form)) if (value !== "") params.set(key, value);
    const query = params.toString();
    window.location.assign(`/runs${query ? `?${query}` : ""}`);
  });
  // Filters apply on Enter or Apply, not on every change: arrow keys on a list or
  // typing a date would otherwise load a page per key
  for (const link of document.querySelectorAll("#run-listing th a[role=button]")) {
    link.addEventListener("keydown", (event) => {
      if (event.key === " ") { event.preventDefault(); link.click(); }
    });
  }
})();
