// The review page: a grid of scans to work through, and a 3D view of one (plotly.js mesh3d) on click.
// Mesh arrays arrive as base64 little-endian typed arrays and are decoded only when a scan is opened;
// positions as uint16 per axis over the bounding box (origin + q * step), the uncertainty as uint8
// (round(255 * margin between the two most probable classes)). The mesh is the scan's own: vertex k is the
// file's vertex k (nothing decimated or merged), so corrected labels are per original vertex in file order.
// Above the size bound the page is an index (scans carry the "page" that shows them) or one chunk of scans
// (report.index links back). Marks (accept, flag) and corrected labels persist in localStorage under the
// run's id, which every page of one run shares.
"use strict";
(function () {
  const report = JSON.parse(document.getElementById("report-data").textContent);
  const scans = report.scans;
  const grid = document.getElementById("grid");
  const viewer = document.getElementById("viewer");
  const plot = document.getElementById("plot");
  const $ = (id) => document.getElementById(id);
  const WRONG = "#d62728", RIGHT = "#d9d9d9";
  const STORE = "pointmamba-review:" + (report.run || "");
  let current = null;  // the index of the scan in the 3D view
  let mode = "prediction";
  let order = [];  // the grid's order (sort and filter): next and previous follow it

  function decode(b64, Type) {
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Type(bytes.buffer);
  }
  function encode(bytes) {  // Uint8Array -> base64, in chunks (String.fromCharCode takes a bounded argument list)
    let bin = "";
    for (let i = 0; i < bytes.length; i += 8192) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));
    return btoa(bin);
  }
  function fmt(x, digits) { return x === null || x === undefined ? "–" : Number(x).toFixed(digits); }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function download(filename, text, type) {
    const url = URL.createObjectURL(new Blob([text], {type: type}));
    const a = el("a", {href: url, download: filename});
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  // ------------------------------------------------------------------ marks (localStorage)
  function stored(key, fallback) {
    try { return JSON.parse(localStorage.getItem(STORE + key)) || fallback; } catch (e) { return fallback; }
  }
  function store(key, value) {  // false where the browser keeps nothing (storage off or full)
    try { localStorage.setItem(STORE + key, typeof value === "string" ? value : JSON.stringify(value)); return true; } catch (e) { return false; }
  }
  function marks() { return stored("/marks", {}); }  // read each time: another page of this run may have marked scans
  function setMark(scan, kind) {  // "accepted" or "flagged"; the same again clears it
    const all = marks();
    const m = all[scan.source] || {};
    m.mark = m.mark === kind ? "" : kind;
    m.time = new Date().toISOString();
    all[scan.source] = m;
    store("/marks", all);
    showMarks();
  }
  function noteCorrected(scan, count) {
    const all = marks();
    all[scan.source] = Object.assign(all[scan.source] || {}, {corrected: count, time: new Date().toISOString()});
    store("/marks", all);
  }

  // Spreadsheet formulas neutralized as pointmamba/utils/atomic_file.py's csv_cell does (OWASP): text starting with
  // = + - @, a tab or a carriage return gets a leading '; a cell with a comma, quote or newline is quoted.
  const FORMULA = /^[=+\-@\t\r]/;
  function csvCell(value) {
    if (value === null || value === undefined) return "";
    let s = String(value);
    if (typeof value !== "number" && FORMULA.test(s)) s = "'" + s;
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  function marksCsv() {
    const all = marks();
    const rows = [["scan", "source", "jaw", "review", "mark", "corrected_vertices", "marked_at"]];
    for (const s of scans) {
      const m = all[s.source] || {};
      rows.push([s.name, s.source, s.jaw, s.failed ? "failed" : (s.review ? "yes" : "no"), m.mark || "",
                 m.corrected || 0, m.time || ""]);
    }
    return rows.map((r) => r.map(csvCell).join(",")).join("\r\n") + "\r\n";
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

  function flaggedNote(c) {  // a flagged scan's teeth read less sure than their number's posterior
    return c.posterior == null ? "" : ` (${fmt(c.posterior, 2)} before the scan's flag)`;
  }
  function toothClass(scan, c) {
    if (!c.found) return "missing";
    if (c.confidence < (scan.review_below ?? 0.65)) return "low";
    return c.confidence < 0.9 ? "unsure" : "sure";
  }
  function chartStrip(scan, index) {  // the full arch as a dental chart reads, patient's right first; a click opens that tooth
    const strip = el("div", {class: "chart", "aria-label": "dental chart"});
    scan.chart.forEach((c, k) => {
      const title = c.found ? `tooth ${c.fdi}: confidence ${fmt(c.confidence, 2)}` + flaggedNote(c) + `, runner-up ${c.runner_up} ${fmt(c.runner_up_confidence, 2)}` +
        (c.twice ? " (number used twice)" : "") : `tooth ${c.fdi}: not found`;
      const cell = el("span", {class: toothClass(scan, c) + (k === scan.chart.length / 2 - 1 ? " mid" : ""),
                               title: title, "data-fdi": c.fdi}, String(c.fdi));
      cell.addEventListener("click", (ev) => { ev.stopPropagation(); openTooth(index, c.fdi); });
      strip.appendChild(cell);
    });
    return strip;
  }
  function markBadges(scan, title, all) {  // all: the marks, read once per grid (an index may list thousands)
    const m = all[scan.source] || {};
    if (m.mark === "accepted") title.appendChild(el("span", {class: "badge accepted mark"}, "accepted"));
    if (m.mark === "flagged") title.appendChild(el("span", {class: "badge marked-flag mark"}, "flagged"));
    if (m.corrected) title.appendChild(el("span", {class: "badge accepted mark"}, "corrected"));
  }

  function card(scan, index) {
    if (scan.failed) return failedCard(scan);
    const c = el("div", {class: "card" + (scan.review ? " flagged" : ""), tabindex: "0", "data-index": index,
                         "data-name": scan.name});
    if (scan.thumbnail) c.appendChild(el("img", {src: scan.thumbnail, alt: scan.name}));
    const body = el("div", {class: "body"});
    const title = el("div", {class: "name"});
    title.appendChild(el("span", {}, scan.name));
    const badges = el("span", {class: "badges"});
    badges.appendChild(el("span", {class: "badge " + (scan.review ? "review" : "ok")}, scan.review ? "review" : "ok"));
    // the reviewer's marks: added by showMarks, which drawGrid calls
    title.appendChild(badges);
    body.appendChild(title);
    body.appendChild(el("div", {class: "muted"},
      `${scan.teeth.length} teeth · lowest confidence ${fmt(scan.min_confidence, 2)}`));
    if (scan.chart && scan.chart.length) {
      body.appendChild(chartStrip(scan, index));
      const missing = scan.chart.filter((c) => !c.found).map((c) => c.fdi);
      body.appendChild(el("div", {class: "missing-line"}, missing.length ? "not found: " + missing.join(" ") : "all 16 teeth found"));
    }
    if (scan.metrics) {
      const m = scan.metrics;
      const wrong = Object.entries(m.wrong_teeth || {}).map(([p, r]) => `${p}→${r}`).join(" ");
      body.appendChild(el("div", {class: "metrics"},
        `accuracy ${fmt(m.accuracy, 3)} · mIoU ${fmt(m.miou, 3)} · TSA ${fmt(m.TSA, 3)} · TLA ${fmt(m.TLA, 3)} · ` +
        `TIR ${fmt(m.TIR, 3)}` + (wrong ? ` · wrong numbers ${wrong}` : "")));
    }
    if (scan.reasons.length) {
      const ul = el("ul", {class: "reasons"});
      const shown = scan.reasons.length > 4 ? 3 : 4;  // a long list would bury the next card
      for (const r of scan.reasons.slice(0, shown)) ul.appendChild(el("li", {}, r));
      if (scan.reasons.length > shown) {
        ul.appendChild(el("li", {class: "more", title: scan.reasons.slice(shown).join("\n")},
                          `and ${scan.reasons.length - shown} more (in the 3D view)`));
      }
      body.appendChild(ul);
    }
    if (scan.page) body.appendChild(el("div", {class: "muted"}, "on " + scan.page));
    c.appendChild(body);
    c.addEventListener("click", () => openScan(index));
    return c;
  }

  function drawGrid() {
    const key = $("sort").value;
    const only = $("only-flagged").checked;
    order = scans.map((s, i) => i).filter((i) => !only || scans[i].review)
      .sort((a, b) => sorters[key](scans[a], scans[b]) || scans[a].name.localeCompare(scans[b].name));
    grid.replaceChildren(...order.map((i) => card(scans[i], i)));
    const flagged = scans.filter((s) => s.review && !s.failed).length;
    const failed = scans.filter((s) => s.failed).length;
    const summary = $("summary");
    summary.textContent =
      `${scans.length} scan${scans.length === 1 ? "" : "s"}, ${flagged} flagged for review` +
      (failed ? `, ${failed} failed` : "") + ` · ${report.model}` +
      (report.part ? ` · ${report.part} · ` : "");
    if (report.index) summary.appendChild(el("a", {href: encodeURIComponent(report.index), id: "index-link"}, "all scans"));
    showMarks();
  }

  function showMarks() {  // the mark badges of every card and the viewer's buttons, from the stored marks
    const all = marks();
    for (const c of grid.querySelectorAll(".card[data-index]")) {
      const badges = c.querySelector(".badges");
      for (const b of badges.querySelectorAll(".mark")) b.remove();
      markBadges(scans[+c.dataset.index], badges, all);
      c.classList.toggle("current", +c.dataset.index === current);
    }
    if (current !== null) {
      const m = all[scans[current].source] || {};
      $("accept").classList.toggle("on", m.mark === "accepted");
      $("flag").classList.toggle("on", m.mark === "flagged");
    }
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
    const predicted = decode(m.labels, Uint8Array);
    const reference = m.reference ? decode(m.reference, Uint8Array) : null;
    const margin = m.margin ? decode(m.margin, Uint8Array) : null;
    scan._arrays = {x, y, z, i, j, k, predicted, reference, margin, n, adjacency: null};
    return scan._arrays;
  }

  function adjacency(a) {  // vertex neighbours over the mesh's edges (CSR), built on the first click
    if (a.adjacency) return a.adjacency;
    const start = new Uint32Array(a.n + 1);
    const f = a.i.length, corners = [a.i, a.j, a.k];
    for (let t = 0; t < f; t++) for (const c of corners) start[c[t] + 1] += 2;
    for (let v = 0; v < a.n; v++) start[v + 1] += start[v];
    const fill = start.slice(0, a.n), next = new Uint32Array(start[a.n]);
    for (let t = 0; t < f; t++) {
      const p = [a.i[t], a.j[t], a.k[t]];
      for (let c = 0; c < 3; c++) { next[fill[p[c]]++] = p[(c + 1) % 3]; next[fill[p[c]]++] = p[(c + 2) % 3]; }
    }
    a.adjacency = {start, next};
    return a.adjacency;
  }

  // ------------------------------------------------------------------ corrections
  // Per scan: the labels as corrected so far (file order), the undo history, the selection (vertex ids) and
  // the cut plane. Corrected labels are kept in localStorage too, so a closed page loses nothing.
  function editOf(scan) {
    if (scan._edit) return scan._edit;
    const a = meshArrays(scan);
    const labels = Uint8Array.from(a.predicted);
    let saved = null;  // base64 of the corrected labels, where this browser kept them
    try { saved = localStorage.getItem(STORE + "/labels/" + scan.source); } catch (err) { /* storage off */ }
    if (saved) {
      const back = decode(saved, Uint8Array);
      if (back.length === a.n) labels.set(back);
    }
    scan._edit = {labels, history: [], selection: null, base: null, cut: null, cutting: false, flip: false, saved: true};
    return scan._edit;
  }
  function corrected(scan) {
    const e = editOf(scan), p = meshArrays(scan).predicted;
    let count = 0;
    for (let v = 0; v < p.length; v++) count += e.labels[v] !== p[v];
    return count;
  }
  function keep(scan) {
    const e = editOf(scan), count = corrected(scan);
    if (count) {
      e.saved = store("/labels/" + scan.source, encode(e.labels));
    } else {
      try { localStorage.removeItem(STORE + "/labels/" + scan.source); } catch (err) { /* storage off */ }
      e.saved = true;
    }
    noteCorrected(scan, count);
  }

  function regionAt(scan, v) {  // the vertices connected to v over edges whose ends have v's label
    const a = meshArrays(scan), adj = adjacency(a), lab = editOf(scan).labels, l = lab[v];
    const seen = new Uint8Array(a.n), stack = [v], out = [];
    seen[v] = 1;
    while (stack.length) {
      const u = stack.pop();
      out.push(u);
      for (let e = adj.start[u]; e < adj.start[u + 1]; e++) {
        const w = adj.next[e];
        if (!seen[w] && lab[w] === l) { seen[w] = 1; stack.push(w); }
      }
    }
    return Uint32Array.from(out);
  }
  function brushAt(scan, v, radius) {  // every vertex within radius mm of v (the aligned frame is in mm)
    const a = meshArrays(scan), out = [], r2 = radius * radius;
    for (let u = 0; u < a.n; u++) {
      const dx = a.x[u] - a.x[v], dy = a.y[u] - a.y[v], dz = a.z[u] - a.z[v];
      if (dx * dx + dy * dy + dz * dz <= r2) out.push(u);
    }
    return out;
  }
  function toothVertices(scan, fdi) {
    const lab = editOf(scan).labels, out = [];
    for (let v = 0; v < lab.length; v++) if (lab[v] === fdi) out.push(v);
    return Uint32Array.from(out);
  }

  function select(scan, vertices, how) {
    const e = editOf(scan);
    e.selection = vertices && vertices.length ? Uint32Array.from(vertices) : null;
    e.base = e.selection;
    e.cut = null;
    e.flip = false;
    e.how = how;
    showEdit(scan);
    return draw();
  }
  function selectFdi(fdi) {  // the chart's rows: every vertex now carrying that number
    const scan = scans[current];
    const verts = toothVertices(scan, fdi);
    $("number").value = String(fdi);
    if (!verts.length) {
      select(scan, null, "");
      $("selection").textContent = `tooth ${fdi} has no vertices: paint it with the brush (click picks: a brush)`;
      return Promise.resolve();
    }
    return select(scan, verts, `tooth ${fdi}`);
  }
  function clickVertex(v) {  // a click on the prediction's mesh
    const scan = scans[current], e = editOf(scan);
    if (e.cutting && e.base) return cutAt(scan, v);
    const label = e.labels[v];
    $("number").value = String(label);
    if ($("pick").value === "brush") {
      const radius = Math.max(0.1, Number($("brush").value) || 3);
      const before = e.how === "brush" && e.selection ? Array.from(e.selection) : [];
      return select(scan, Array.from(new Set(before.concat(brushAt(scan, v, radius)))), "brush");
    }
    return select(scan, regionAt(scan, v), label ? `region of tooth ${label}` : "region of gingiva");
  }

  function cutAt(scan, v) {
    // The plane through the clicked vertex, upright (crowns are +z in this frame) and across the selection's
    // long axis in the occlusal plane: along the arch, which is where two teeth under one number meet.
    const e = editOf(scan), a = meshArrays(scan), base = e.base;
    let mx = 0, my = 0;
    for (const u of base) { mx += a.x[u]; my += a.y[u]; }
    mx /= base.length; my /= base.length;
    let sxx = 0, sxy = 0, syy = 0;
    for (const u of base) { const dx = a.x[u] - mx, dy = a.y[u] - my; sxx += dx * dx; sxy += dx * dy; syy += dy * dy; }
    const angle = 0.5 * Math.atan2(2 * sxy, sxx - syy);
    e.cut = {px: a.x[v], py: a.y[v], nx: Math.cos(angle), ny: Math.sin(angle)};
    e.cutting = false;
    $("cut").classList.remove("on");
    return applyCut(scan);
  }
  function applyCut(scan) {
    const e = editOf(scan), a = meshArrays(scan), c = e.cut, sign = e.flip ? -1 : 1;
    e.selection = Uint32Array.from(Array.from(e.base).filter((u) => sign * ((a.x[u] - c.px) * c.nx + (a.y[u] - c.py) * c.ny) >= 0));
    showEdit(scan);
    return draw();
  }

  function applyNumber() {  // the selection gets the chosen number: renumber, merge, split, give to gingiva
    const scan = scans[current], e = editOf(scan);
    if (!e.selection) return Promise.resolve();
    const to = Number($("number").value);
    const old = new Uint8Array(e.selection.length);
    e.selection.forEach((v, k) => { old[k] = e.labels[v]; e.labels[v] = to; });
    e.history.push({vertices: e.selection, old: old});
    e.selection = e.base = e.cut = null;
    keep(scan);
    showEdit(scan);
    return draw();
  }
  function takeRunnerUp() {  // the selected tooth gets its runner-up: right for most wrong numbers (docs/results/review_flag)
    const scan = scans[current], e = editOf(scan);
    if (!e.selection) return Promise.resolve();
    const predicted = meshArrays(scan).predicted, fdi = predicted[e.selection[0]];
    const tooth = scan.chart.find((c) => c.fdi === fdi && c.found);
    if (!tooth || e.selection.some((v) => predicted[v] !== fdi)) {
      $("selection").textContent = "the runner-up is a predicted tooth's: select one tooth as predicted (its region or its row)";
      return Promise.resolve();
    }
    $("number").value = String(tooth.runner_up);
    return applyNumber();
  }
  function undo() {
    const scan = scans[current], e = editOf(scan), last = e.history.pop();
    if (!last) return Promise.resolve();
    last.vertices.forEach((v, k) => { e.labels[v] = last.old[k]; });
    keep(scan);
    showEdit(scan);
    return draw();
  }
  function resetEdits() {
    const scan = scans[current], e = editOf(scan);
    e.labels.set(meshArrays(scan).predicted);
    e.history = [];
    e.selection = e.base = e.cut = null;
    keep(scan);
    showEdit(scan);
    return draw();
  }

  function correctedDocument(scan) {
    // Teeth3DS: one FDI label per vertex of the scan's file, in file order, and instances 0 = gingiva,
    // 1..k one per tooth in increasing FDI order (as pointmamba.data.teeth3ds.instances_from_labels)
    const labels = Array.from(editOf(scan).labels);
    const teeth = Array.from(new Set(labels)).filter((l) => l > 0).sort((p, q) => p - q);
    const id = {};
    teeth.forEach((t, k) => { id[t] = k + 1; });
    return {id_patient: scan.id_patient, jaw: scan.jaw, labels: labels, instances: labels.map((l) => (l > 0 ? id[l] : 0))};
  }
  function downloadCorrected() {
    const scan = scans[current];
    download(scan.name + ".json", JSON.stringify(correctedDocument(scan)), "application/json");
    noteCorrected(scan, corrected(scan));
    showMarks();
  }

  function showEdit(scan) {  // the side panel: chart (counts as corrected), selection, corrections
    const e = editOf(scan), counts = {};
    for (const l of e.labels) counts[l] = (counts[l] || 0) + 1;
    const body = $("chart").tBodies[0];
    body.replaceChildren();
    for (const c of scan.chart) {
      const here = counts[c.fdi] || 0;
      const row = el("tr", {class: "tooth " + (here ? "" : "missing ") + (c.found && toothClass(scan, c) === "low" ? "low" : ""),
                            "data-fdi": c.fdi});
      if (e.how === `tooth ${c.fdi}`) row.classList.add("selected");
      row.appendChild(el("td", {}, String(c.fdi) + (here && !c.found ? " (added)" : "")));
      row.appendChild(el("td", {}, here ? (c.found ? fmt(c.confidence, 2) + (c.twice ? " ×2" : "") : "–") : "missing"));
      row.appendChild(el("td", {}, c.found ? `${c.runner_up} (${fmt(c.runner_up_confidence, 2)})` : ""));
      row.addEventListener("click", () => selectFdi(c.fdi));
      body.appendChild(row);
    }
    const sel = $("number");
    if (!sel.options.length || sel.dataset.jaw !== scan.jaw) {
      sel.replaceChildren(el("option", {value: "0"}, "gingiva (0)"));
      for (const c of scan.chart) sel.appendChild(el("option", {value: String(c.fdi)}, String(c.fdi)));
      sel.dataset.jaw = scan.jaw;
    }
    $("selection").textContent = e.selection
      ? `selected: ${e.how}${e.cut ? ", one side of the cut" : ""} (${e.selection.length} vertices)` +
        (e.cutting ? " · click the mesh where to cut" : "")
      : (e.cutting ? "select a region first" : "click a tooth in the 3D view or the chart");
    const count = corrected(scan);
    $("edits").textContent = count
      ? `${count} vertices corrected (${e.history.length} step${e.history.length === 1 ? "" : "s"} to undo)` +
        (e.saved ? "" : " · not kept by this browser: download them")
      : "no corrections";
  }

  const UNCERTAIN = (function () {  // margin 0 (a tie) red, through orange, to light grey (sure)
    const lut = new Array(256);
    for (let m = 0; m < 256; m++) {
      const t = m / 255, r = Math.round(214 + (224 - 214) * t), g = Math.round(39 + (224 - 39) * Math.sqrt(t)),
        b = Math.round(40 + (224 - 40) * t);
      lut[m] = `rgb(${r},${g},${b})`;
    }
    return lut;
  })();

  function colours(scan, which) {
    const a = meshArrays(scan), e = editOf(scan), out = new Array(a.n);
    if (which === "errors") {
      for (let v = 0; v < a.n; v++) out[v] = e.labels[v] === a.reference[v] ? RIGHT : WRONG;
    } else if (which === "uncertainty") {
      for (let v = 0; v < a.n; v++) out[v] = a.margin ? UNCERTAIN[a.margin[v]] : RIGHT;
    } else {
      const src = which === "reference" ? a.reference : e.labels;
      for (let v = 0; v < a.n; v++) out[v] = scan.palette[src[v]] || "#888888";
    }
    if (which !== "reference" && e.selection) {  // the selection as it is, the rest faded (every bright colour is a tooth's)
      const chosen = new Uint8Array(a.n);
      for (const v of e.selection) chosen[v] = 1;
      for (let v = 0; v < a.n; v++) if (!chosen[v]) out[v] = faded(out[v]);
    }
    return out;
  }
  const fadedCache = new Map();
  function faded(colour) {  // "#rrggbb" or "rgb(r,g,b)" mixed 70 % with white
    let f = fadedCache.get(colour);
    if (f === undefined) {
      const c = colour[0] === "#" ? [1, 3, 5].map((i) => parseInt(colour.slice(i, i + 2), 16)) : colour.match(/\d+/g).map(Number);
      f = `rgb(${c.map((x) => Math.round(0.3 * x + 0.7 * 255)).join(",")})`;
      fadedCache.set(colour, f);
    }
    return f;
  }

  function hoverText(scan) {
    const a = meshArrays(scan), lab = editOf(scan).labels, conf = {}, text = new Array(a.n);
    for (const t of scan.confidence) conf[t.fdi] = t;
    for (let v = 0; v < a.n; v++) {
      const l = lab[v], t = conf[l];
      let s;
      if (l !== a.predicted[v]) s = `${l === 0 ? "gingiva" : "tooth " + l} (corrected from ${a.predicted[v] || "gingiva"})`;
      else s = l === 0 ? "gingiva" : `tooth ${l}` + (t ? ` · confidence ${fmt(t.confidence, 2)}${flaggedNote(t)} (${t.runner_up}: ${fmt(t.runner_up_confidence, 2)})` : "");
      if (l === a.predicted[v] && t && t.alternative) s += ` · other dentition: ${t.alternative}`;
      if (a.reference) s += `<br>reference: ${a.reference[v] === 0 ? "gingiva" : a.reference[v]}` + (a.reference[v] !== l ? " (wrong)" : "");
      if (a.margin) s += `<br>margin ${fmt(a.margin[v] / 255, 2)}`;
      text[v] = s;
    }
    return text;
  }

  function toothLabels(scan, src, scene) {
    const a = meshArrays(scan), sums = {};
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
            textfont: {size: 13, color: "#111"}, scene: scene};
  }

  function meshTrace(scan, which, scene) {
    const a = meshArrays(scan);
    return {type: "mesh3d", x: a.x, y: a.y, z: a.z, i: a.i, j: a.j, k: a.k, vertexcolor: colours(scan, which),
            text: scan._text || (scan._text = hoverText(scan)), hovertemplate: "%{text}<extra></extra>",
            flatshading: false, showscale: false, scene: scene,
            lighting: {ambient: 0.55, diffuse: 0.7, specular: 0.08, roughness: 0.6, fresnel: 0.1},
            lightposition: {x: 0, y: -100, z: 1000}};
  }

  function traces(scan) {  // [mesh, numbers] per scene; the prediction's mesh is the one clicks correct
    const a = meshArrays(scan), e = editOf(scan);
    if (mode === "compare") {
      return [meshTrace(scan, "reference", "scene"), toothLabels(scan, a.reference, "scene"),
              meshTrace(scan, "prediction", "scene2"), toothLabels(scan, e.labels, "scene2")];
    }
    return [meshTrace(scan, mode, "scene"), toothLabels(scan, mode === "reference" ? a.reference : e.labels, "scene")];
  }

  function note(scan) {
    const bits = [`${scan.jaw} jaw · ${scan.vertices} vertices · ${scan.teeth.length} teeth · ${scan.source}`];
    const a = meshArrays(scan), lab = editOf(scan).labels;
    if (a.reference) {
      let wrong = 0;
      for (let v = 0; v < a.n; v++) wrong += lab[v] !== a.reference[v];
      bits.push(`${(100 * wrong / a.n).toFixed(1)} % of vertices differ from the reference`);
    }
    if (scan.review) bits.push("review: " + scan.reasons.join("; "));
    if (mode === "errors") bits.push("red: wrong vertices, grey: right");
    if (editOf(scan).selection) bits.push("the selection in full colour, the rest faded");
    if (mode === "compare") bits.push("left: reference, right: prediction (the cameras move together)");
    if (mode === "uncertainty" && a.margin) {
      let low = 0;
      for (let v = 0; v < a.n; v++) low += a.margin[v] < 51;
      bits.push(`margin between the two most probable labels: red 0 (a tie) to grey 1 (sure); ${(100 * low / a.n).toFixed(1)} % of vertices under 0.2`);
    }
    return bits.join(" · ");
  }

  const SCENE = {aspectmode: "data", xaxis: {visible: false}, yaxis: {visible: false}, zaxis: {visible: false},
                 camera: {eye: {x: 0, y: -0.55, z: 1.6}, up: {x: 0, y: 1, z: 0}}};
  let linking = false;
  let lastClick = {vertex: -1, time: 0};

  function draw() {
    const scan = scans[current];
    scan._text = null;  // the hover text follows the corrected labels
    $("viewer-note").textContent = note(scan);
    const layout = {margin: {l: 0, r: 0, t: 0, b: 0}, paper_bgcolor: "#ffffff", showlegend: false,
                    uirevision: scan.name + (mode === "compare" ? ":2" : ":1")};  // the camera kept when colours change
    if (mode === "compare") {
      // each scene half as wide: the eye further out, so that the whole arch fits
      const half = Object.assign({}, SCENE, {camera: {eye: {x: 0, y: -0.9, z: 2.6}, up: {x: 0, y: 1, z: 0}}});
      layout.scene = Object.assign({}, half, {domain: {x: [0, 0.5], y: [0, 1]}});
      layout.scene2 = Object.assign({}, half, {domain: {x: [0.5, 1], y: [0, 1]}});
      layout.annotations = [{text: "reference", x: 0.25, y: 1, xref: "paper", yref: "paper", showarrow: false, yanchor: "top"},
                            {text: "prediction", x: 0.75, y: 1, xref: "paper", yref: "paper", showarrow: false, yanchor: "top"}];
    } else {
      layout.scene = SCENE;
    }
    const name = scan.name, drawn = mode;
    return Plotly.react(plot, traces(scan), layout, {displaylogo: false, responsive: true}).then(() => {
      if (!plot._pointmamba) {  // once per plot (Plotly.purge drops the handlers)
        plot._pointmamba = true;
        plot.on("plotly_click", (ev) => {
          const pt = ev && ev.points && ev.points[0];
          if (!pt || current === null || pt.curveNumber !== (mode === "compare" ? 2 : 0) || mode === "reference") return;
          const v = pt.pointNumber, now = Date.now();
          // plotly's 3D view reports one click twice (press and release, about 0.25 s apart): taken once
          if (v === lastClick.vertex && now - lastClick.time < 600) return;
          lastClick = {vertex: v, time: now};
          setTimeout(() => clickVertex(v), 0);  // redrawn after plotly's own click handling, not inside it
        });
        plot.on("plotly_relayout", linkCameras);
      }
      plot.dataset.rendered = name + ":" + drawn;
    });
  }

  function linkCameras(ev) {  // side by side: the other scene's camera follows the one moved
    if (mode !== "compare" || linking || !ev) return;
    const one = ev["scene.camera"], two = ev["scene2.camera"];
    if (!one === !two) return;
    linking = true;
    Plotly.relayout(plot, one ? {"scene2.camera": one} : {"scene.camera": two}).then(() => { linking = false; }, () => { linking = false; });
  }

  function modesOf(scan) {
    return scan.mesh.reference ? ["prediction", "reference", "compare", "errors", "uncertainty"] : ["prediction", "uncertainty"];
  }

  function setMode(wanted) {
    const scan = scans[current];
    mode = modesOf(scan).includes(wanted) ? wanted : "prediction";
    for (const b of document.querySelectorAll("#modes input")) b.checked = b.value === mode;
    const hash = "#scan=" + encodeURIComponent(scan.name) + (mode === "prediction" ? "" : "&view=" + mode);
    if (location.hash !== hash) history.replaceState(null, "", hash);
    return draw();
  }

  function openScan(index, view) {
    const scan = scans[index];
    if (scan.page) {  // an index page: the scan is drawn on its chunk's page
      location.href = encodeURIComponent(scan.page) + "#scan=" + encodeURIComponent(scan.name) +
        (view ? "&view=" + encodeURIComponent(view) : "");
      return Promise.resolve();
    }
    if (scan.failed) return Promise.resolve();
    if (current !== index) {
      Plotly.purge(plot);  // a new scan, a new camera
      plot._pointmamba = false;
    }
    current = index;
    $("viewer-title").textContent = scan.name + (scan.review ? " (review)" : "");
    const modes = $("modes");
    modes.replaceChildren();
    for (const m of modesOf(scan)) {
      const label = el("label", {});
      const input = el("input", {type: "radio", name: "mode", value: m});
      input.addEventListener("change", () => setMode(m));
      label.appendChild(input);
      label.appendChild(document.createTextNode(" " + m + " "));
      modes.appendChild(label);
    }
    viewer.classList.add("open");
    const e = editOf(scan);
    e.cutting = false;
    showEdit(scan);
    showMarks();
    return setMode(view || "prediction");
  }

  function openTooth(index, fdi) {  // the scan's 3D view with that tooth selected (#scan=NAME&tooth=FDI)
    const scan = scans[index];
    if (scan.page) {
      location.href = encodeURIComponent(scan.page) + "#scan=" + encodeURIComponent(scan.name) + "&tooth=" + fdi;
      return Promise.resolve();
    }
    return openScan(index).then(() => selectFdi(fdi));
  }

  function step(delta) {  // the next (+1) or previous (-1) scan in the grid's order that has a 3D view
    const open = order.filter((i) => !scans[i].failed);
    if (!open.length) return Promise.resolve();
    const at = open.indexOf(current);
    const next = open[(at + delta + open.length) % open.length];
    return openScan(next, mode === "prediction" ? undefined : mode);
  }

  function closeViewer() {
    viewer.classList.remove("open");
    Plotly.purge(plot);
    plot._pointmamba = false;
    delete plot.dataset.rendered;
    const was = current;
    current = null;
    history.replaceState(null, "", location.pathname + location.search);
    showMarks();
    const c = grid.querySelector(`.card[data-index="${was}"]`);
    if (c) c.focus();
  }

  // ------------------------------------------------------------------ keys
  let digits = "", digitsAt = 0;
  function typedNumber(d) {  // two digits choose a number for the selection; 0 the gingiva
    const now = Date.now();
    digits = now - digitsAt > 1500 || digits.length >= 2 ? d : digits + d;
    digitsAt = now;
    const value = digits === "0" ? "0" : digits;
    if (Array.from($("number").options).some((o) => o.value === value)) $("number").value = value;
  }

  function onKey(ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const tag = ev.target && ev.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") {
      if (ev.key === "Escape") ev.target.blur();
      return;
    }
    if (current === null) {  // the grid
      const c = document.activeElement && document.activeElement.closest && document.activeElement.closest(".card[data-index]");
      const cards = Array.from(grid.querySelectorAll(".card[data-index]"));
      if (ev.key === "ArrowRight" || ev.key === "ArrowLeft" || ev.key === "j" || ev.key === "k") {
        const at = cards.indexOf(c), delta = ev.key === "ArrowRight" || ev.key === "j" ? 1 : -1;
        const target = cards[at < 0 ? 0 : Math.min(cards.length - 1, Math.max(0, at + delta))];
        if (target) target.focus();
        ev.preventDefault();
      } else if (c && ev.key === "Enter") {
        openScan(+c.dataset.index);
      } else if (c && (ev.key === "a" || ev.key === "f")) {
        setMark(scans[+c.dataset.index], ev.key === "a" ? "accepted" : "flagged");
      }
      return;
    }
    const scan = scans[current];
    if (tag === "BUTTON" && (ev.key === "Enter" || ev.key === " ")) return;  // the button's own click
    const act = {
      Escape: closeViewer, n: () => step(1), ArrowRight: () => step(1), p: () => step(-1), ArrowLeft: () => step(-1),
      a: () => setMark(scan, "accepted"), f: () => setMark(scan, "flagged"),
      v: () => { const ms = modesOf(scan); return setMode(ms[(ms.indexOf(mode) + 1) % ms.length]); },
      Enter: applyNumber, r: takeRunnerUp, z: undo, c: toggleCut,
    }[ev.key];
    if (act) {
      ev.preventDefault();
      act();
    } else if (/^[0-9]$/.test(ev.key)) {
      typedNumber(ev.key);
    }
  }

  function toggleCut() {
    const scan = scans[current], e = editOf(scan);
    e.cutting = !e.cutting && !!e.base;
    $("cut").classList.toggle("on", e.cutting);
    showEdit(scan);
  }

  $("sort").addEventListener("change", drawGrid);
  $("only-flagged").addEventListener("change", drawGrid);
  $("close").addEventListener("click", closeViewer);
  $("prev").addEventListener("click", () => step(-1));
  $("next").addEventListener("click", () => step(1));
  $("accept").addEventListener("click", () => setMark(scans[current], "accepted"));
  $("flag").addEventListener("click", () => setMark(scans[current], "flagged"));
  $("apply").addEventListener("click", applyNumber);
  $("runner-up").addEventListener("click", takeRunnerUp);
  $("undo").addEventListener("click", undo);
  $("reset").addEventListener("click", resetEdits);
  $("cut").addEventListener("click", toggleCut);
  $("flip").addEventListener("click", () => {
    const scan = scans[current], e = editOf(scan);
    if (!e.cut) return;
    e.flip = !e.flip;
    applyCut(scan);
  });
  $("download-json").addEventListener("click", downloadCorrected);
  $("download-marks").addEventListener("click", () => download("review-marks.csv", marksCsv(), "text/csv"));
  document.addEventListener("keydown", onKey);
  viewer.addEventListener("click", (ev) => { if (ev.target === viewer) closeViewer(); });
  window.addEventListener("storage", showMarks);  // marks made on another page of this run
  drawGrid();

  function parseHash() {  // #scan=NAME&view=MODE
    const out = {};
    for (const part of location.hash.replace(/^#/, "").split("&")) {
      const at = part.indexOf("=");
      if (at > 0) { try { out[part.slice(0, at)] = decodeURIComponent(part.slice(at + 1)); } catch (e) { /* a malformed link */ } }
    }
    return out;
  }
  function openFromHash() {  // index.html#scan=MSN001_lower&view=uncertainty opens that scan so; &tooth=36 selects 36
    const want = parseHash();
    const index = scans.findIndex((s) => s.name === want.scan);
    if (index < 0) return;
    const opened = index !== current ? openScan(index, want.view)
      : (want.view && want.view !== mode ? setMode(want.view) : Promise.resolve());
    if (want.tooth && !scans[index].page) opened.then(() => selectFdi(Number(want.tooth)));
  }
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
  window.pointmambaReport = {open: openScan, setMode: setMode, close: closeViewer, next: () => step(1),
                             correctedDocument: (i) => correctedDocument(scans[i]), marksCsv: marksCsv,
                             clickVertex: clickVertex, selectFdi: selectFdi, apply: applyNumber};
})();
