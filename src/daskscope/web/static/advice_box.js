// The advice box (templates/advice_box.html): every element with class "advice-box" and
// a data-advice-url is filled from that URL (an AdviceView: views/advice.py). Scripts
// that add a box later (a computation's expanded row) call dsAdvice.fill(element).
// Written with textContent only: subjects are user data (task names).
"use strict";
window.dsAdvice = window.dsAdvice || (() => {
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
  const node = (tag, className, text) => {
    const el = document.createElement(tag);
    if (className) el.className = className;
    if (text !== undefined) el.textContent = text;
    return el;
  };
  const item = (advice) => {
    const li = node("li", `advice-item ${advice.severity}`);
    li.dataset.rule = advice.rule;
    const title = node("h3", "advice-title");
    title.append(node("span", `advice-severity ${advice.severity}`, advice.severity));
    title.append(node("span", "advice-name", advice.title));
    if (advice.subject) {
      const subject = node("span", "advice-subject", "for ");
      subject.append(node("code", "", advice.subject));
      title.append(subject);
    }
    li.append(title);
    if (advice.evidence.length) {
      const list = node("ul", "advice-evidence");
      for (const e of advice.evidence) {
        const row = node("li", "");
        row.append(`${e.label}: `, node("span", "value", e.value_text));
        if (e.threshold_text) row.append(" ", node("span", "threshold", `(threshold ${e.threshold_text})`));
        list.append(row);
      }
      li.append(list);
    }
    li.append(node("p", "advice-action", advice.action));
    li.append(node("span", "advice-rule", `rule ${advice.rule}`));
    return li;
  };
  const fill = (box) => {
    if (box.dataset.filled) return;
    box.dataset.filled = "loading";
    const summary = box.querySelector(".advice-summary");
    const list = box.querySelector(".advice-list");
    ds.json(box.dataset.adviceUrl) // a report file holds the answer (common.js)
      .then((view) => {
        const n = view.advice.length;
        summary.textContent = n
          ? `${plural(n, "finding")} from ${plural(view.rules_checked, "rule")}, most severe first.`
          : `No advice: none of ${plural(view.rules_checked, "rule")} found anything.`;
        summary.classList.toggle("muted", !n);
        list.replaceChildren(...view.advice.map(item));
        box.dataset.filled = "done";
      })
      .catch((err) => {
        summary.textContent = `Advice could not be loaded: ${err.message}.`;
        box.dataset.filled = "failed";
      });
  };
  const fillAll = (root) => (root || document).querySelectorAll(".advice-box[data-advice-url]").forEach(fill);
  return { fill, fillAll };
})();
window.dsAdvice.fillAll();
