// The review page: a grid of scans, and a 3D view of one (plotly.js mesh3d) on click.
// Mesh arrays arrive as base64 little-endian typed arrays and are decoded only when a scan is opened;
// positions as uint16 per axis over the bounding box (origin + q * step). Above the size bound the page
// is an index (scans carry the "page" that shows them) or one chunk of scans (report.index links back).
"use strict";
(function () {
  const report = JSON.parse(document.getElementById("report-data").textContent);
  const scans = report.scans;
  const grid = document.getElementById("grid");
  const viewer = document.getElementById("viewer");
  const plot = document.getElementById("plot");
  const WRONG = "#d62728", RIGHT = "#d9d9d9";
  let current = null;

  function decode(b64, Type) {
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Type(bytes.buffer);
  }
  function fmt(x, digits) { return x === null || x === undefined ? "–" : Number(x).toFixed(digits); }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // ------------------------------------------------------------------ grid
  const sorters = {
    confidence: (a, b) => (a.min_confidence ?? 2) - (b.min_confidence ?? 2),
    review: (a, b) => (b.review - a.review) || (a.min_confidence ?? 2) - (b.min_confidence ?? 2),
    name: (a, b) => a.name.localeCompare(b.name),
    accuracy: (a, b) => ((a.metrics && a.metrics.accuracy) ?? 2) - ((b.metrics && b.metrics.accuracy) ?? 2),
  };

  function failedCard(scan) {  // a scan that could not be segmented: its name and why, nothing to open
    const c = el("div", {class: "card failed", "data-name": scan.name});
    const body = el("div", {class: "body"});
    const title = el("div", {class: "name"});
    title.appendChild(el("span", {}, scan.name));
    title.appendChild(el("span", {class: "badge failed"}, "failed"));
    body.appendChild(title);
    body.appendChild(el("div", {class: "muted"}, scan.failed));
    c.appendChild(body);
    return c;
  }

  function card(scan, index) {
    if (scan.failed) return failedCard(scan);
    const c = el("div", {class: "card" + (scan.review ? " flagged" : ""), tabindex: "0", "data-index": index,
                         "data-name": scan.name});
    if (scan.thumbnail) c.appendChild(el("img", {src: scan.thumbnail, alt: scan.name}));
    const body = el("div", {class: "body"});
    const title = el("div", {class: "name"});
    title.appendChild(el("span", {}, scan.name));
    title.appendChild(el("span", {class: "badge " + (scan.review ? "review" : "ok")}, scan.review ? "review" : "ok"));
    body.appendChild(title);
    body.appendChild(el("div", {class: "muted"},
      `${scan.teeth.length} teeth: ${scan.teeth.join(" ")} · lowest confidence ${fmt(scan.min_confidence, 2)}`));
    if (scan.metrics) {
      const m = scan.metrics;
      const wrong = Object.entries(m.wrong_teeth || {}).map(([p, r]) => `${p}→${r}`).join(" ");
      body.appendChild(el("div", {class: "metrics"},
        `accuracy ${fmt(m.accuracy, 3)} · mIoU ${fmt(m.miou, 3)} · TSA ${fmt(m.TSA, 3)} · TLA ${fmt(m.TLA, 3)} · ` +
        `TIR ${fmt(m.TIR, 3)}` + (wrong ? ` · wrong numbers ${wrong}` : "")));
    }
    if (scan.reasons.length) {
      const ul = el("ul", {class: "reasons"});
      for (const r of scan.reasons) ul.appendChild(el("li", {}, r));
      body.appendChild(ul);
    }
    if (scan.page) body.appendChild(el("div", {class: "muted"}, "on " + scan.page));
    c.appendChild(body);
    c.addEventListener("click", () => openScan(index));
    c.addEventListener("keydown", (ev) => { if (ev.key === "Enter") openScan(index); });
    return c;
  }

  function drawGrid() {
    const key = document.getElementById("sort").value;
    const only = document.getElementById("only-flagged").checked;
    const order = scans.map((s, i) => i).filter((i) => !only || scans[i].review)
      .sort((a, b) => sorters[key](scans[a], scans[b]) || scans[a].name.localeCompare(scans[b].name));
    grid.replaceChildren(...order.map((i) => card(scans[i], i)));
    const flagged = scans.filter((s) => s.review && !s.failed).length;
    const failed = scans.filter((s) => s.failed).length;
    const summary = document.getElementById("summary");
    summary.textContent =
      `${scans.length} scan${scans.length === 1 ? "" : "s"}, ${flagged} flagged for review` +
      (failed ? `, ${failed} failed` : "") + ` · ${report.model}` +
      (report.part ? ` · ${report.part} · ` : "");
    if (report.index) summary.appendChild(el("a", {href: encodeURIComponent(report.index), id: "index-link"}, "all scans"));
  }

  // ------------------------------------------------------------------ 3D view
  function meshArrays(scan) {
    if (scan._arrays) return scan._arrays;
    const m = scan.mesh;
    const q = decode(m.positions, Uint16Array), o = m.origin, st = m.step;
    const n = q.length / 3;
    const x = new Float32Array(n), y = new Float32Array(n), z = new Float32Array(n);
    for (let v = 0; v < n; v++) {
      x[v] = o[0] + q[3 * v] * st[0]; y[v] = o[1] + q[3 * v + 1] * st[1]; z[v] = o[2] + q[3 * v + 2] * st[2];
    }
    const faces = decode(m.faces, m.index_bytes === 2 ? Uint16Array : Uint32Array);
    const f = faces.length / 3;
    const i = new Uint32Array(f), j = new Uint32Array(f), k = new Uint32Array(f);
    for (let t = 0; t < f; t++) { i[t] = faces[3 * t]; j[t] = faces[3 * t + 1]; k[t] = faces[3 * t + 2]; }
    const labels = decode(m.labels, Uint8Array);
    const reference = m.reference ? decode(m.reference, Uint8Array) : null;
    const conf = {};
    for (const t of scan.confidence) conf[t.fdi] = t;
    const text = new Array(n);
    for (let v = 0; v < n; v++) {
      const l = labels[v], t = conf[l];
      let s = l === 0 ? "gingiva" : `tooth ${l}` + (t ? ` · confidence ${fmt(t.confidence, 2)} (${t.runner_up}: ${fmt(t.runner_up_confidence, 2)})` : "");
      if (t && t.alternative) s += ` · other dentition: ${t.alternative}`;
      if (reference) s += `<br>reference: ${reference[v] === 0 ? "gingiva" : reference[v]}` + (reference[v] !== l ? " (wrong)" : "");
      text[v] = s;
    }
    scan._arrays = {x, y, z, i, j, k, labels, reference, text, n};
    return scan._arrays;
  }

  function colours(scan, a, mode) {
    const out = new Array(a.n);
    if (mode === "errors") {
      for (let v = 0; v < a.n; v++) out[v] = a.labels[v] === a.reference[v] ? RIGHT : WRONG;
    } else {
      const src = mode === "reference" ? a.reference : a.labels;
      for (let v = 0; v < a.n; v++) out[v] = scan.palette[src[v]] || "#888888";
    }
    return out;
  }

  function toothLabels(scan, a, mode) {
    const src = mode === "reference" ? a.reference : a.labels;
    const sums = {};
    for (let v = 0; v < a.n; v++) {
      const l = src[v];
      if (l === 0) continue;
      const s = sums[l] || (sums[l] = [0, 0, 0, 0, -Infinity]);
      s[0] += a.x[v]; s[1] += a.y[v]; s[3] += 1; s[4] = Math.max(s[4], a.z[v]);
    }
    const tx = [], ty = [], tz = [], tt = [];
    for (const l in sums) {
      const s = sums[l];
      if (s[3] < 5) continue;
      tx.push(s[0] / s[3]); ty.push(s[1] / s[3]); tz.push(s[4] + 1.5); tt.push(String(l));
    }
    return {type: "scatter3d", mode: "text", x: tx, y: ty, z: tz, text: tt, hoverinfo: "skip", showlegend: false,
            textfont: {size: 13, color: "#111"}};
  }

  function traces(scan, mode) {
    const a = meshArrays(scan);
    return [{type: "mesh3d", x: a.x, y: a.y, z: a.z, i: a.i, j: a.j, k: a.k, vertexcolor: colours(scan, a, mode),
             text: a.text, hovertemplate: "%{text}<extra></extra>", flatshading: false, showscale: false,
             lighting: {ambient: 0.55, diffuse: 0.7, specular: 0.08, roughness: 0.6, fresnel: 0.1},
             lightposition: {x: 0, y: -100, z: 1000}},
            toothLabels(scan, a, mode)];
  }

  function note(scan, mode) {
    const bits = [`${scan.jaw} jaw · ${scan.vertices} vertices · ${scan.teeth.length} teeth · ${scan.source}`];
    if (scan.metrics) {
      const a = meshArrays(scan);
      let wrong = 0;
      for (let v = 0; v < a.n; v++) wrong += a.labels[v] !== a.reference[v];
      bits.push(`${(100 * wrong / a.n).toFixed(1)} % of vertices differ from the reference`);
    }
    if (scan.review) bits.push("review: " + scan.reasons.join("; "));
    if (mode === "errors") bits.push("red: wrong vertices, grey: right");
    return bits.join(" · ");
  }

  function setMode(mode) {
    const scan = scans[current];
    for (const b of document.querySelectorAll("#modes input")) b.checked = b.value === mode;
    document.getElementById("viewer-note").textContent = note(scan, mode);
    const layout = {
      margin: {l: 0, r: 0, t: 0, b: 0}, paper_bgcolor: "#ffffff", showlegend: false,
      scene: {aspectmode: "data", xaxis: {visible: false}, yaxis: {visible: false}, zaxis: {visible: false},
              camera: {eye: {x: 0, y: -0.55, z: 1.6}, up: {x: 0, y: 1, z: 0}}},
      uirevision: scan.name,  // keep the camera when switching colours
    };
    return Plotly.react(plot, traces(scan, mode), layout, {displaylogo: false, responsive: true})
      .then(() => { plot.dataset.rendered = scan.name + ":" + mode; });
  }

  function openScan(index) {
    const scan = scans[index];
    if (scan.page) {  // an index page: the scan is drawn on its chunk's page
      location.href = encodeURIComponent(scan.page) + "#scan=" + encodeURIComponent(scan.name);
      return Promise.resolve();
    }
    current = index;
    document.getElementById("viewer-title").textContent = scan.name + (scan.review ? " (review)" : "");
    const modes = document.getElementById("modes");
    modes.replaceChildren();
    for (const mode of scan.mesh.reference ? ["prediction", "reference", "errors"] : ["prediction"]) {
      const label = el("label", {});
      const input = el("input", {type: "radio", name: "mode", value: mode});
      input.addEventListener("change", () => setMode(mode));
      label.appendChild(input);
      label.appendChild(document.createTextNode(" " + mode + " "));
      modes.appendChild(label);
    }
    viewer.classList.add("open");
    if (location.hash !== "#scan=" + encodeURIComponent(scan.name)) history.replaceState(null, "", "#scan=" + encodeURIComponent(scan.name));
    return setMode("prediction");
  }

  function closeViewer() {
    viewer.classList.remove("open");
    Plotly.purge(plot);
    delete plot.dataset.rendered;
    current = null;
    history.replaceState(null, "", location.pathname + location.search);
  }

  document.getElementById("sort").addEventListener("change", drawGrid);
  document.getElementById("only-flagged").addEventListener("change", drawGrid);
  document.getElementById("close").addEventListener("click", closeViewer);
  document.addEventListener("keydown", (ev) => { if (ev.key === "Escape" && current !== null) closeViewer(); });
  viewer.addEventListener("click", (ev) => { if (ev.target === viewer) closeViewer(); });
  drawGrid();
  function openFromHash() {  // a link such as index.html#scan=MSN001_lower opens that scan
    const wanted = decodeURIComponent((location.hash.match(/^#scan=(.*)$/) || [])[1] || "");
    const index = scans.findIndex((s) => s.name === wanted);
    if (index >= 0 && index !== current) openScan(index);
  }
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
  window.pointmambaReport = {open: openScan, setMode: setMode, close: closeViewer};
})();
