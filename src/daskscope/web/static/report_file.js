// A report file's start (web/report_file.py): unpack plotly.js (gzip, in base64) with the
// browser's own DecompressionStream, then run the page's scripts in their order. They
// read the answers embedded in the file (common.js, ds.json), never a server.
"use strict";
(async () => {
  const status = document.getElementById("report-status");
  const say = (text, bad) => { status.textContent = text; status.classList.toggle("bad", Boolean(bad)); };
  const run = (text) => {
    const script = document.createElement("script");
    script.textContent = text;
    document.body.appendChild(script);
  };
  window.addEventListener("error", (ev) => {
    say(`A chart could not be drawn: ${ev.message}`, true);
    document.body.dataset.reportError = ev.message;
  });
  const packed = document.getElementById("report-plotly");
  if (packed) {
    if (typeof DecompressionStream !== "function") {
      say("This browser cannot unpack the report's charts (it lacks DecompressionStream): open the file in "
        + "Chrome or Edge 80 or later, Firefox 113 or later, or Safari 16.4 or later. The tables are below.", true);
      document.body.dataset.reportReady = "unsupported";
      return;
    }
    const binary = atob(packed.textContent.trim());
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    run(await new Response(stream).text());
  }
  for (const script of document.querySelectorAll('script[type="text/x-daskscope-page"]')) run(script.textContent);
  if (!document.body.dataset.reportError) status.hidden = true;
  document.body.dataset.reportReady = "yes";
})();
