// Member usage as a member × week heat map, drawn by the server as a table (every week a
// column, the top members a row each, the rest one "others" row). Here: showing the
// selection (a cell, a member's row or a week's column, outlined in red), and picking
// one by mouse or keyboard. A click selects after the double-click window (a
// double-click clears); the keyboard moves with the arrows, Enter selects, Escape clears.
// Selecting is the page's business: attach() gets select(user, week) and clear().
"use strict";
const accountUsage = (() => {
  const DOUBLE_CLICK_MS = 300;

  const weeksOf = (table) => [...table.tFoot.rows[0].cells].slice(1).map((th) => th.textContent);
  // A cell's row (in usage.rows) and column (in the weeks)
  const rowOf = (button) => button.closest("tr").sectionRowIndex;
  const colOf = (button) => button.closest("td").cellIndex - 1;

  // Row and column of the selection (-1: none); a user among the others selects their row
  function position(table, usage, sel) {
    const weeks = weeksOf(table);
    const col = sel.week ? weeks.indexOf(sel.week) : -1;
    let row = -1;
    if (sel.user) {
      row = usage.rows.findIndex((r) => r.user === sel.user);
      if (row < 0) row = usage.rows.findIndex((r) => r.user === null && r.grouped.includes(sel.user));
    }
    return { row, col };
  }

  const cells = (table) => [...table.tBodies[0].rows].map((tr) => [...tr.querySelectorAll("button.cell")]);

  // Outline the selection; the selected cell (else the first) is the one Tab reaches
  function show(table, usage, sel) {
    const grid = cells(table);
    const { row, col } = position(table, usage, sel);
    grid.forEach((buttons, i) => buttons.forEach((b, j) => {
      const inRow = row < 0 || i === row;
      const inCol = col < 0 || j === col;
      const picked = (row >= 0 || col >= 0) && inRow && inCol;
      b.classList.toggle("sel", picked);
      b.setAttribute("aria-pressed", String(picked && row >= 0 && col >= 0 && i === row && j === col));
    }));
    const focusable = grid[Math.max(row, 0)] && grid[Math.max(row, 0)][Math.max(col, 0)];
    for (const buttons of grid) for (const b of buttons) b.tabIndex = b === focusable ? 0 : -1;
    table.dataset.selected = row >= 0 || col >= 0 ? `${row},${col}` : "";
  }

  function attach(table, usage, { select, clear }) {
    const weeks = weeksOf(table);
    const pick = (button) => select(usage.rows[rowOf(button)].user, weeks[colOf(button)]);
    // the tooltip says what a screen reader does, written when first hovered
    table.addEventListener("pointerover", (ev) => {
      const button = ev.target.closest("button.cell");
      if (button && !button.title) button.title = button.getAttribute("aria-label");
    });
    let pending = null;
    table.addEventListener("click", (ev) => {
      const button = ev.target.closest("button.cell");
      if (!button) return;
      clearTimeout(pending);
      if (ev.detail === 0) pick(button); // Enter or Space
      else if (ev.detail === 1) pending = setTimeout(() => pick(button), DOUBLE_CLICK_MS);
    });
    table.addEventListener("dblclick", () => { clearTimeout(pending); clear(); });
    table.addEventListener("keydown", (ev) => {
      const button = ev.target.closest("button.cell");
      if (!button) return;
      if (ev.key === "Escape") { ev.preventDefault(); clear(); return; }
      const grid = cells(table);
      let i = rowOf(button);
      let j = colOf(button);
      const moves = {
        ArrowLeft: () => { j = Math.max(0, j - 1); }, ArrowRight: () => { j = Math.min(grid[i].length - 1, j + 1); },
        ArrowUp: () => { i = Math.max(0, i - 1); }, ArrowDown: () => { i = Math.min(grid.length - 1, i + 1); },
        Home: () => { j = 0; }, End: () => { j = grid[i].length - 1; },
      };
      if (!moves[ev.key]) return;
      ev.preventDefault();
      moves[ev.key]();
      button.tabIndex = -1;
      grid[i][j].tabIndex = 0;
      grid[i][j].focus();
    });
  }

  return { show, attach, position };
})();
