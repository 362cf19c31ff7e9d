// Cluster page: the profile as a flame graph (an icicle), of the whole cluster or of one
// computation (?profile=), zoomed into a frame (?flame=, the frame's id in the tree).
"use strict";
window.dsProfile = (() => {
  let base = "";
  let drawn = null; // the scope drawn ("" for the whole cluster)
  let drawing = null;
  let wanted = null; // the scope being drawn

  const flame = () => document.getElementById("flamegraph");

  function fillScopes(computations) {
    const select = document.getElementById("profile-scope");
    if (!select) return;
    const known = new Set([...select.options].map((o) => o.value));
    for (const comp of computations) {
      if (known.has(comp.id)) continue;
      select.append(new Option(`computation ${window.dsComputations.describe(comp)}`, comp.id));
    }
  }

  async function draw(scope, zoom) {
    const div = flame();
    const body = await ds.json(`${base}/profile${scope ? `?computation=${encodeURIComponent(scope)}` : ""}`);
    document.getElementById("profile-summary").textContent =
      `${ds.num(body.samples)} samples · ${ds.duration(body.seconds)} over ${ds.num(body.windows)} profile windows` +
      (body.estimated_splits ? ` · where a frame called several innermost frames (${ds.num(body.estimated_splits)} frame${body.estimated_splits === 1 ? "" : "s"}), Dask's profile does not say how its samples split between them: shared evenly` : "");
    const level = body.ids.includes(zoom) ? zoom : "";
    const trace = {
      type: "icicle", ids: body.ids, labels: body.labels.map(ds.text), parents: body.parents, values: body.values,
      branchvalues: "total", level, maxdepth: -1, sort: false,
      tiling: { orientation: "v", flip: "y" }, pathbar: { visible: true },
      customdata: body.ids.map((_, i) => [ds.duration(body.self_s[i]), ds.duration(body.total_s[i]), ds.text(body.where[i])]),
      hovertemplate: "<b>%{label}</b><br>total %{customdata[1]}<br>self %{customdata[0]}<br>%{customdata[2]}<extra></extra>",
    };
    await ds.plotly();
    await Plotly.react(div, [trace], ds.layout({ margin: { l: 5, r: 5, t: 30, b: 5 } }), ds.config);
    drawn = scope;
    div.dataset.zoom = level;
    div.dataset.scope = scope;
    div.dataset.ready = "1";
  }

  // Draw what the URL says: the scope (redrawn when it changed) and the zoom
  async function sync() {
    const div = flame();
    if (!div) return;
    const scope = ds.state.get("profile", "");
    const zoom = ds.state.get("flame", "");
    const select = document.getElementById("profile-scope");
    select.value = [...select.options].some((o) => o.value === scope) ? scope : "";
    if (drawn !== scope && wanted !== scope) {
      wanted = scope; // one draw per scope, however often this is called meanwhile
      drawing = draw(scope, zoom);
      await drawing;
      return;
    }
    await drawing;
    if (drawn !== scope) return;
    if ((div.dataset.zoom || "") !== zoom) {
      const level = div.data[0].ids.includes(zoom) ? zoom : "";
      await Plotly.restyle(div, { level: [level] });
      div.dataset.zoom = level;
    }
  }

  function init(apiBase, computations) {
    base = apiBase;
    const div = flame();
    if (!div) return;
    fillScopes(computations);
    document.getElementById("profile-scope").addEventListener("change", (ev) => {
      ds.state.set({ profile: ev.target.value, flame: null });
      sync();
    });
    document.getElementById("reset-zoom").addEventListener("click", () => {
      ds.state.set({ flame: null });
      sync();
    });
  }

  // Called once the graph exists: clicks zoom (plotly does it) and go into the URL
  function listen() {
    const div = flame();
    if (!div || div.dataset.listening) return;
    div.dataset.listening = "1";
    div.on("plotly_icicleclick", (ev) => {
      const next = ev.nextLevel && ev.nextLevel !== "all" ? ev.nextLevel : "";
      div.dataset.zoom = next;
      ds.state.set({ flame: next || null });
    });
  }

  async function show() {
    await sync();
    listen();
  }

  return { init, show, sync, fillScopes };
})();
