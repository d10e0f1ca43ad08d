/* memreport: the interactive allocation timeline and the segment maps at marked moments, drawn
 * on canvases from the page's data block (schema memreport-page/1, docs/page-schema.md).
 * The page is complete without this script: it only unhides #explore and fills it. Everything
 * read from the data is untrusted text: it reaches the page through textContent only. */
(function () {
  "use strict";
  var root = document.getElementById("explore");
  var dataEl = document.getElementById("memreport-data");
  if (!root || !dataEl) return;
  var data;
  try {
    data = JSON.parse(dataEl.textContent);
  } catch (e) {
    return; /* a broken block leaves the static page as it is */
  }
  if (!data || data.schema !== "memreport-page/1" || !Array.isArray(data.devices)) return;

  /* Adjacent bands get different colours, as in PyTorch's viewer (Tableau 10). */
  var PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
    "#ff9da7", "#9c755f", "#86bcb6"];
  var RESERVED = "#e07b24", INK = "#1d2330", MUTED = "#5f6b7a";
  var GRID = "#edf0f3", RED = "#c8372d";
  var STATE = { active: "#3b7ddd", waste: "#f2a93b", pending: "#8e5bc4", split: "#e2625a",
    whole: "#9fd39a", track: "#eceff3" };
  var PIECE_CAP = 3000000; /* stacking pieces kept; past it, bands stop dropping (see prepare) */
  var M = { left: 74, right: 14, top: 24, bottom: 34 }; /* plot margins, CSS pixels */
  var HEIGHT = 330, OVERVIEW = 46, ROW = 16, ROWGAP = 5;

  var strings = arr(data.strings), frames = arr(data.frames), stacks = arr(data.stacks);

  function arr(a) { return Array.isArray(a) ? a : []; }
  function num(v) { v = Number(v); return isFinite(v) ? v : 0; }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  /* ---- formatting: the same units as the rest of the report ---- */

  function fmtBytes(b) {
    var u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], i = 0;
    b = num(b);
    if (Math.abs(b) < 1024) return Math.round(b) + " B";
    while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return b.toFixed(2) + " " + u[i];
  }
  function group(n) { return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function fmtSec(us) { return (us / 1e6).toFixed(us < 1e7 ? 4 : 3) + " s"; }
  /* x is an event index (or µs when x_unit is "us"); with recorded times an event also shows
   * the time of its series point (exact when every event has its own point). */
  function fmtX(V, x) {
    if (V.unit !== "event") return fmtSec(x);
    var i = V.st_us ? indexAt(V.sx, x) : -1;
    return "event " + group(Math.floor(x)) + (i >= 0 ? " (" + (V.exact ? "" : "≈") + fmtSec(V.st_us[i]) + ")" : "");
  }
  function fmtSpan(V, dx) {
    if (V.unit === "event") return group(dx) + " event" + (Math.round(dx) === 1 ? "" : "s");
    if (dx < 1000) return Math.round(dx) + " µs";
    if (dx < 1e6) return (dx / 1000).toFixed(2) + " ms";
    return (dx / 1e6).toFixed(3) + " s";
  }
  /* A span of x, with its duration when times were recorded. */
  function lifeText(V, a, z) {
    var t = fmtSpan(V, z - a);
    if (V.unit !== "event" || !V.st_us) return t;
    var i = indexAt(V.sx, a), j = indexAt(V.sx, z);
    return i < 0 || j < 0 ? t : t + ", " + (V.exact ? "" : "≈") + fmtSpan({ unit: "us" }, V.st_us[j] - V.st_us[i]);
  }
  /* A round step giving about `want` intervals: 1, 2 or 5 times a power of ten. */
  function niceStep(span, want) {
    var raw = span / want, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  }

  /* ---- stacks ---- */

  function stackOf(id) {
    var s = stacks[id];
    return Array.isArray(s) && s.length >= 2 ? s : null;
  }
  function frameAt(f) {
    f = num(f) * 3;
    return { name: String(strings[frames[f]] || ""), file: String(strings[frames[f + 1]] || ""),
      line: num(frames[f + 2]) };
  }
  /* The user's own frame (first outside torch and site-packages), else null. */
  function userFrame(id) {
    var s = stackOf(id);
    return s && s[0] >= 0 && s[0] + 2 < s.length ? frameAt(s[2 + s[0]]) : null;
  }
  function libFrame(id) {
    var s = stackOf(id);
    return s && s[1] >= 0 && s[1] + 2 < s.length ? frameAt(s[2 + s[1]]) : null;
  }
  function frameNode(f) {
    var span = el("span");
    span.appendChild(el("code", "fn", f.name));
    span.appendChild(document.createTextNode(" "));
    span.appendChild(el("span", "loc tl-loc", f.file + ":" + f.line));
    return span;
  }
  function stackList(id) {
    var s = stackOf(id);
    if (!s || s.length <= 2)
      return el("p", "muted", "No stack was recorded for this allocation (allocations that " +
        "the autograd engine makes in backward have no Python frame).");
    var ol = el("ol", "frames");
    for (var i = 2; i < s.length; i++) {
      var li = el("li", i - 2 === s[0] ? "tl-user" : i - 2 === s[1] ? "tl-lib" : "");
      li.appendChild(frameNode(frameAt(s[i])));
      ol.appendChild(li);
    }
    return ol;
  }

  /* ---- one device: data, stacking ---- */

  /* Reads the device's bands and stacks them the way PyTorch's active-memory timeline does: a
   * band sits on the live bands before it in the data's order and drops when one of them is
   * freed. The result is a list of pieces (x0, x1, bottom offset, band), each a rectangle. */
  function prepare(d) {
    /* With events on x, the state after event i spans [i, i + 1): the domain ends one past
     * the last event, so the final state (the snapshot, often the OOM) has room too. */
    var unit = d.x_unit === "event" ? "event" : "us";
    var V = { d: d, unit: unit, xEnd: Math.max(num(d.x_end) + (unit === "event" ? 1 : 0), 1) };
    V.half = unit === "event" ? 0.5 : 0; /* marks sit mid-way through their event's state */
    var raw = arr(d.bands), n = Math.floor(raw.length / 4);
    var s = new Float64Array(n), e = new Float64Array(n), b = new Float64Array(n);
    var st = new Int32Array(n);
    for (var i = 0; i < n; i++) {
      var a = num(raw[4 * i]), z = num(raw[4 * i + 1]);
      s[i] = a < 0 ? 0 : Math.min(a, V.xEnd);
      e[i] = z < 0 ? V.xEnd : Math.max(s[i], Math.min(z, V.xEnd));
      b[i] = Math.max(0, num(raw[4 * i + 2]));
      st[i] = num(raw[4 * i + 3]);
    }
    V.n = n; V.s = s; V.e = e; V.b = b; V.st = st;
    V.rawStart = function (i) { return num(raw[4 * i]); };
    V.rawEnd = function (i) { return num(raw[4 * i + 1]); };
    var allocs = [], frees = [];
    for (i = 0; i < n; i++) if (e[i] > s[i]) { allocs.push(i); frees.push(i); }
    allocs.sort(function (p, q) { return s[p] - s[q] || p - q; });
    frees.sort(function (p, q) { return e[p] - e[q] || p - q; });
    var live = [], off = new Float64Array(n), piece = new Int32Array(n);
    var P = { x0: [], x1: [], off: [], band: [] }, total = 0;
    var topX = [0], topV = [0];
    function open(j, x) {
      if (P.x0.length >= PIECE_CAP) { V.approx = true; return; }
      if (piece[j] >= 0) P.x1[piece[j]] = x;
      piece[j] = P.x0.length;
      P.x0.push(x); P.x1.push(V.xEnd); P.off.push(off[j]); P.band.push(j);
    }
    function where(j) { /* position of band j in live (sorted by index), or where it goes */
      var lo = 0, hi = live.length;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (live[mid] < j) lo = mid + 1; else hi = mid; }
      return lo;
    }
    function mark(x) {
      if (topX[topX.length - 1] === x) topV[topV.length - 1] = total;
      else { topX.push(x); topV.push(total); }
    }
    piece.fill(-1);
    var ai = 0, fi = 0, k, p;
    while (ai < allocs.length || fi < frees.length) {
      /* frees first at one x: a band allocated where another ends sits where it was */
      if (fi < frees.length && (ai >= allocs.length || e[frees[fi]] <= s[allocs[ai]])) {
        var j = frees[fi++], x = e[j];
        p = where(j);
        live.splice(p, 1);
        if (piece[j] >= 0) P.x1[piece[j]] = x;
        for (k = p; k < live.length; k++) { off[live[k]] -= b[j]; open(live[k], x); }
        total -= b[j];
        mark(x);
      } else {
        j = allocs[ai++]; x = s[j];
        p = where(j);
        off[j] = total; /* the usual case: on top of everything live */
        if (p < live.length) for (off[j] = 0, k = 0; k < p; k++) off[j] += b[live[k]];
        live.splice(p, 0, j);
        open(j, x);
        for (k = p + 1; k < live.length; k++) { off[live[k]] += b[j]; open(live[k], x); }
        total += b[j];
        mark(x);
      }
    }
    V.P = { n: P.x0.length, x0: Float64Array.from(P.x0), x1: Float64Array.from(P.x1),
      off: Float64Array.from(P.off), band: Int32Array.from(P.band) };
    V.topX = Float64Array.from(topX); V.topV = Float64Array.from(topV);
    var se = d.series || {};
    V.sx = arr(se.x).map(num); V.sActive = arr(se.active).map(num);
    V.sReserved = arr(se.reserved).map(num); V.sSmall = arr(se.small).map(num);
    V.st_us = Array.isArray(se.t_us) && se.t_us.length === V.sx.length ? se.t_us.map(num) : null;
    V.exact = num(se.events_per_point) <= 1;
    var yMax = 1;
    for (i = 0; i < V.sx.length; i++)
      yMax = Math.max(yMax, V.sReserved[i] || 0, V.sActive[i] || 0,
        stepAt(V.topX, V.topV, V.sx[i]) + (V.sSmall[i] || 0));
    for (i = 0; i < V.topV.length; i++) yMax = Math.max(yMax, V.topV[i]);
    V.yMax = yMax * 1.04;
    V.marks = arr(d.marks).filter(function (m) { return m && typeof m.kind === "string"; });
    V.moments = arr(d.moments);
    V.view = { x0: 0, x1: V.xEnd };
    return V;
  }

  /* The value of a step series (xs ascending) at x: the last point at or before x. */
  function indexAt(xs, x) {
    var lo = 0, hi = xs.length - 1;
    if (hi < 0 || x < xs[0]) return -1;
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (xs[mid] <= x) lo = mid; else hi = mid - 1; }
    return lo;
  }
  function stepAt(xs, vs, x) { var i = indexAt(xs, x); return i < 0 ? 0 : vs[i]; }

  /* The band under (x, bytes): live bands at x stacked in order, as they are drawn. */
  function bandAt(V, x, bytes) {
    var off = 0;
    for (var i = 0; i < V.n; i++) {
      if (!(V.s[i] <= x && x < V.e[i])) continue;
      if (bytes >= off && bytes < off + V.b[i]) return { band: i, off: off };
      off += V.b[i];
    }
    var small = stepAt(V.sx, V.sSmall, x);
    if (small > 0 && bytes >= off && bytes < off + small) return { band: -2, off: off, small: small };
    return null;
  }
  function liveAt(V, x) {
    var out = [], off = 0;
    for (var i = 0; i < V.n; i++)
      if (V.s[i] <= x && x < V.e[i]) { out.push({ band: i, off: off }); off += V.b[i]; }
    return out;
  }

  /* ---- drawing the timeline ---- */

  function sizeCanvas(c, w, h) {
    var r = window.devicePixelRatio || 1;
    if (c.width !== Math.round(w * r) || c.height !== Math.round(h * r)) {
      c.width = Math.round(w * r); c.height = Math.round(h * r);
    }
    c.style.height = h + "px";
    var ctx = c.getContext("2d");
    ctx.setTransform(r, 0, 0, r, 0, 0);
    return ctx;
  }
  function geom(V) {
    var w = Math.max(320, V.chart.clientWidth || 900);
    return { w: w, h: HEIGHT, pw: w - M.left - M.right, ph: HEIGHT - M.top - M.bottom };
  }
  function px(V, g, x) { return M.left + (x - V.view.x0) / (V.view.x1 - V.view.x0) * g.pw; }
  function py(V, g, bytes) { return M.top + g.ph - bytes / V.yMax * g.ph; }
  function dataX(V, g, cx) { return V.view.x0 + (cx - M.left) / g.pw * (V.view.x1 - V.view.x0); }

  function draw(V) {
    var g = geom(V), ctx = sizeCanvas(V.canvas, g.w, g.h), i;
    V.g = g;
    ctx.clearRect(0, 0, g.w, g.h);
    yAxis(V, g, ctx);
    ctx.save();
    ctx.beginPath(); ctx.rect(M.left, M.top, g.pw, g.ph); ctx.clip();
    var bands = rasterBands(V, g);
    if (bands) ctx.drawImage(bands, M.left, M.top, g.pw, g.ph);
    drawReserved(V, g, ctx);
    var sel = V.pinned >= 0 ? V.pinned : V.hover;
    if (sel >= 0) outline(V, g, ctx, sel);
    ctx.restore();
    xAxis(V, g, ctx);
    drawMarks(V, g, ctx);
    if (V.cursor !== null) {
      var cx = px(V, g, V.cursor);
      ctx.strokeStyle = INK; ctx.lineWidth = 1; ctx.setLineDash([2, 3]);
      ctx.beginPath(); ctx.moveTo(cx + 0.5, M.top); ctx.lineTo(cx + 0.5, M.top + g.ph); ctx.stroke();
      ctx.setLineDash([]);
    }
    drawOverview(V);
    V.rangeEl.textContent = V.unit === "event" ? "showing events " + group(V.view.x0) + "–" +
      group(V.view.x1) + " of " + group(V.xEnd) + " (" + lifeText(V, V.view.x0, V.view.x1) + ")" :
      "showing " + fmtX(V, V.view.x0) + " – " + fmtX(V, V.view.x1);
  }

  /* The bands, rasterised by hand into an offscreen canvas: a canvas path of ~100 000
   * rectangles costs about half a second to fill in software, these pixel writes a few
   * milliseconds. Each piece covers at least one pixel column; rows are rounded, so bands
   * thinner than a pixel show where they cross a row boundary, in proportion. */
  function pack(c) { /* "#rrggbb" as one opaque little-endian RGBA pixel */
    var v = parseInt(c.slice(1), 16);
    return (0xff000000 | ((v & 0xff) << 16) | (v & 0xff00) | ((v >> 16) & 0xff)) >>> 0;
  }
  var PACKED = PALETTE.map(pack), SMALL_PACKED = pack("#b8c0cc");
  function rasterBands(V, g) {
    var r = window.devicePixelRatio || 1, W = Math.round(g.pw * r), H = Math.round(g.ph * r);
    if (W <= 0 || H <= 0) return null;
    var off = V.offscreen || (V.offscreen = document.createElement("canvas"));
    off.width = W; off.height = H;
    var octx = off.getContext("2d"), img = octx.createImageData(W, H);
    var buf = new Uint32Array(img.data.buffer), P = V.P, x0 = V.view.x0, x1 = V.view.x1;
    var kx = W / (x1 - x0), ky = H / V.yMax;
    smallBand(V, buf, W, H, kx, ky);
    for (var i = 0; i < P.n; i++) {
      if (P.x1[i] <= x0 || P.x0[i] >= x1) continue;
      var j = P.band[i], c0 = Math.max(0, Math.floor((P.x0[i] - x0) * kx));
      var c1 = Math.min(W, Math.max(c0 + 1, Math.ceil((P.x1[i] - x0) * kx)));
      var r0 = Math.max(0, H - Math.round((P.off[i] + V.b[j]) * ky)), r1 = Math.min(H, H - Math.round(P.off[i] * ky));
      var col = PACKED[j % PACKED.length];
      for (var y = r0; y < r1; y++) buf.fill(col, y * W + c0, y * W + c1);
    }
    octx.putImageData(img, 0, 0);
    return off;
  }

  /* The merged small allocations: a band on top of the drawn ones, like the viewer's
   * "summarized" band. Its bottom follows the bands' total (exact), its top adds the small
   * series. Per pixel column it spans the lowest bottom to the highest top found there;
   * the bands, painted after it, cover what overlaps them. */
  function smallBand(V, buf, W, H, kx, ky) {
    var lo = new Float64Array(W).fill(Infinity), hi = new Float64Array(W).fill(-Infinity);
    var x0 = V.view.x0, i = 0, j = 0, x = 0, c, y;
    if (!V.sx.length) return;
    while (i < V.topX.length || j < V.sx.length) {
      var next = j >= V.sx.length || (i < V.topX.length && V.topX[i] <= V.sx[j]) ? V.topX[i++] : V.sx[j++];
      if (next > x) { paint(x, next); x = next; }
    }
    paint(x, V.xEnd);
    function paint(a, z) { /* the stretch [a, z) has constant values */
      if (z <= x0 || a >= V.view.x1) return;
      var top = stepAt(V.topX, V.topV, a), sm = stepAt(V.sx, V.sSmall, a);
      if (sm <= 0) return;
      var c0 = Math.max(0, Math.floor((a - x0) * kx)), c1 = Math.min(W, Math.max(c0 + 1, Math.ceil((z - x0) * kx)));
      for (c = c0; c < c1; c++) { if (top < lo[c]) lo[c] = top; if (top + sm > hi[c]) hi[c] = top + sm; }
    }
    for (c = 0; c < W; c++) {
      if (!(hi[c] > lo[c])) continue;
      var r0 = Math.max(0, H - Math.round(hi[c] * ky)), r1 = Math.min(H, H - Math.round(lo[c] * ky));
      for (y = r0; y < r1; y++) buf[y * W + c] = SMALL_PACKED;
    }
  }

  function yAxis(V, g, ctx) {
    var unit = V.yMax >= 2 * 1073741824 ? [1073741824, "GiB"] : V.yMax >= 2 * 1048576 ?
      [1048576, "MiB"] : [1024, "KiB"];
    var step = niceStep(V.yMax / unit[0], 5);
    ctx.font = "11px system-ui,sans-serif"; ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (var v = 0; v * unit[0] <= V.yMax; v += step) {
      var y = Math.round(py(V, g, v * unit[0])) + 0.5;
      ctx.strokeStyle = GRID; ctx.lineWidth = 1;
      ctx.beginPath(); ctx.moveTo(M.left, y); ctx.lineTo(M.left + g.pw, y); ctx.stroke();
      ctx.fillStyle = MUTED;
      ctx.fillText(+v.toFixed(6) + " " + unit[1], M.left - 6, y);
    }
  }

  function xAxis(V, g, ctx) {
    var span = V.view.x1 - V.view.x0, step = niceStep(span, Math.max(2, Math.floor(g.pw / 110)));
    var sc = 1, name = "", digits = 0;
    if (V.unit === "event") { step = Math.max(1, step); }
    else if (step >= 1e5) { sc = 1e6; name = " s"; }
    else if (step >= 100) { sc = 1e3; name = " ms"; }
    else { step = Math.max(1, step); name = " µs"; }
    digits = Math.max(0, -Math.floor(Math.log10(step / sc) + 1e-9));
    ctx.font = "11px system-ui,sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "top";
    ctx.strokeStyle = "#9aa4b1"; ctx.fillStyle = MUTED; ctx.lineWidth = 1;
    var y = M.top + g.ph;
    ctx.beginPath(); ctx.moveTo(M.left, y + 0.5); ctx.lineTo(M.left + g.pw, y + 0.5); ctx.stroke();
    for (var v = Math.ceil(V.view.x0 / step) * step; v <= V.view.x1; v += step) {
      var x = Math.round(px(V, g, v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x, y + 4); ctx.stroke();
      ctx.fillText((v / sc).toFixed(digits) + name, x, y + 6);
    }
    ctx.textAlign = "left";
    ctx.fillText(V.unit === "event" ? "event index in the trace (alloc, free and segment events)" :
      "time since the first recorded event", M.left, y + 18);
  }

  function drawReserved(V, g, ctx) {
    if (!V.sx.length) return;
    ctx.strokeStyle = RESERVED; ctx.lineWidth = 1.5;
    ctx.beginPath();
    for (var i = 0; i < V.sx.length; i++) {
      var a = px(V, g, V.sx[i]), z = px(V, g, i + 1 < V.sx.length ? V.sx[i + 1] : V.xEnd);
      var y = py(V, g, V.sReserved[i]);
      if (i === 0) ctx.moveTo(a, y); else ctx.lineTo(a, y);
      ctx.lineTo(z, y);
    }
    ctx.stroke();
  }

  /* The hovered or pinned band: lightened, with its top and bottom edges drawn (no line at
   * each drop, which would fill a band that sinks often). */
  function outline(V, g, ctx, j) {
    var P = V.P, first = -1, last = -1;
    ctx.fillStyle = "rgba(255,255,255,.45)"; ctx.strokeStyle = INK; ctx.lineWidth = 1.5;
    ctx.beginPath();
    for (var i = 0; i < P.n; i++) {
      if (P.band[i] !== j) continue;
      var a = px(V, g, P.x0[i]), z = Math.max(px(V, g, P.x1[i]), a + 1);
      var t = py(V, g, P.off[i] + V.b[j]), u = py(V, g, P.off[i]);
      ctx.fillRect(a, t, z - a, Math.max(u - t, 1));
      ctx.moveTo(a, t); ctx.lineTo(z, t); ctx.moveTo(a, u); ctx.lineTo(z, u);
      if (first < 0) { first = i; ctx.moveTo(a, t); ctx.lineTo(a, u); }
      last = i;
    }
    if (last >= 0) {
      var e = Math.max(px(V, g, P.x1[last]), px(V, g, P.x0[last]) + 1);
      ctx.moveTo(e, py(V, g, P.off[last] + V.b[j])); ctx.lineTo(e, py(V, g, P.off[last]));
    }
    ctx.stroke();
  }

  var MARK_STYLE = { peak: [INK, "peak", [4, 3]], oom: [RED, "OOM", []],
    snapshot: ["#4a5565", "snapshot", [1, 2]], iteration: ["#c3cad4", "", [2, 4]] };

  /* Marks: a line through the plot and a flag in the lane above it; a flag is where a click
   * selects the mark's moment. Marks of one moment share a flag; flags never overlap (they
   * slide sideways, the line stays); iteration flags are numbered only where there is room. */
  function drawMarks(V, g, ctx) {
    var flags = [], lastIter = -1e9, right = M.left + g.pw, i, f;
    ctx.font = "bold 11px system-ui,sans-serif"; ctx.textBaseline = "middle"; ctx.textAlign = "left";
    var iters = V.marks.filter(function (m) { return m.kind === "iteration" && m.x >= V.view.x0 && m.x <= V.view.x1; });
    var iterLines = iters.length < 2 || g.pw / iters.length >= 8; /* else only their flags */
    V.marks.forEach(function (m) {
      var st = MARK_STYLE[m.kind] || MARK_STYLE.snapshot, x = num(m.x) + V.half;
      if (x < V.view.x0 || x > V.view.x1) return;
      var cx = Math.round(px(V, g, x)) + 0.5;
      if (m.kind !== "iteration" || iterLines) {
        ctx.strokeStyle = st[0]; ctx.lineWidth = m.kind === "oom" ? 2 : 1; ctx.setLineDash(st[2]);
        ctx.beginPath(); ctx.moveTo(cx, M.top); ctx.lineTo(cx, M.top + g.ph); ctx.stroke();
        ctx.setLineDash([]);
      }
      if (m.kind === "iteration") { /* numbered where it has a moment and there is room */
        var label = m.moment >= 0 && cx - lastIter > 30 ? String(num(m.n)) : "";
        if (label) lastIter = cx;
        flags.push({ cx: cx, label: label, marks: [m], color: "#8a94a3", iter: true });
        return;
      }
      var prev = flags.filter(function (f) { return !f.iter; }).pop();
      if (prev && prev.marks[0].moment === m.moment && m.moment >= 0) { prev.label += " + " + st[1]; prev.marks.push(m); }
      else flags.push({ cx: cx, label: st[1], marks: [m], color: st[0] });
    });
    flags.forEach(function (f) {
      f.w = f.label ? ctx.measureText(f.label).width + 8 : f.marks[0].moment >= 0 ? 6 : 2;
      f.x0 = Math.min(f.label ? f.cx : f.cx - f.w / 2, right - f.w);
    });
    var main = flags.filter(function (f) { return !f.iter; });
    for (i = 1; i < main.length; i++) main[i].x0 = Math.max(main[i].x0, main[i - 1].x0 + main[i - 1].w + 2);
    for (i = main.length - 1; i >= 0; i--)
      main[i].x0 = Math.min(main[i].x0, (i + 1 < main.length ? main[i + 1].x0 - 2 : right) - main[i].w);
    flags = flags.filter(function (f) { return f.iter; }).concat(main); /* main flags on top */
    V.flags = [];
    for (i = 0; i < flags.length; i++) {
      f = flags[i];
      var mo = num(f.marks[0].moment), sel = mo >= 0 && mo === V.moment;
      ctx.fillStyle = sel ? INK : mo >= 0 ? f.color : "#d5dae1";
      if (!f.iter || sel) { ctx.strokeStyle = ctx.fillStyle; ctx.beginPath(); ctx.moveTo(f.cx, 20); ctx.lineTo(f.cx, M.top); ctx.stroke(); }
      if (f.label || mo >= 0) ctx.fillRect(f.x0, 4, f.w, 16); else ctx.fillRect(f.x0, 12, f.w, 8);
      if (f.label) { ctx.fillStyle = "#fff"; ctx.fillText(f.label, f.x0 + 4, 12); }
      V.flags.push({ x0: f.x0 - 1, x1: f.x0 + f.w + 1, mark: f.marks[0], marks: f.marks });
    }
  }

  function drawOverview(V) {
    var w = V.overview.clientWidth || 900, ctx = sizeCanvas(V.overview, w, OVERVIEW);
    var pw = w - M.left - M.right, h = OVERVIEW - 8;
    ctx.clearRect(0, 0, w, OVERVIEW);
    ctx.fillStyle = "#c8daf5"; ctx.strokeStyle = "#3b7ddd"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(M.left, 4 + h);
    for (var i = 0; i < V.sx.length; i++) {
      var y = 4 + h - V.sActive[i] / V.yMax * h;
      ctx.lineTo(M.left + V.sx[i] / V.xEnd * pw, y);
      ctx.lineTo(M.left + (i + 1 < V.sx.length ? V.sx[i + 1] : V.xEnd) / V.xEnd * pw, y);
    }
    ctx.lineTo(M.left + pw, 4 + h); ctx.closePath(); ctx.fill();
    var a = M.left + V.view.x0 / V.xEnd * pw, z = M.left + V.view.x1 / V.xEnd * pw;
    if (V.brush) { a = Math.min(V.brush.a, V.brush.z); z = Math.max(V.brush.a, V.brush.z); }
    ctx.fillStyle = "rgba(29,35,48,.12)"; ctx.strokeStyle = INK;
    ctx.fillRect(a, 1, Math.max(z - a, 2), OVERVIEW - 2);
    ctx.strokeRect(a + 0.5, 1.5, Math.max(z - a, 2) - 1, OVERVIEW - 3);
    ctx.font = "11px system-ui,sans-serif"; ctx.fillStyle = MUTED; ctx.textBaseline = "middle";
    ctx.textAlign = "right"; ctx.fillText("overview", M.left - 6, OVERVIEW / 2);
  }

  /* ---- hover, pin, tooltip ---- */

  function bandInfo(V, j, box) {
    var start = V.rawStart(j), end = V.rawEnd(j), stack = V.st[j];
    box.appendChild(el("div", "tl-size", fmtBytes(V.b[j]) + " "))
      .appendChild(el("span", "tl-k", "(" + group(V.b[j]) + " B requested)"));
    frameLines(stack, box);
    var from = start < 0 ? "before the trace began" : fmtX(V, start);
    var to = end < 0 ? "still live at the end" : fmtX(V, end);
    box.appendChild(el("div", "tl-k", "allocated " + from + ", " + (end < 0 ? to : "freed " + to) +
      (start >= 0 && end >= 0 ? " (lived " + lifeText(V, start, end) + ")" : "")));
    if (start < 0 && end >= 0)
      box.appendChild(el("div", "tl-k", "its allocation is older than the trace: the stack is where it was freed"));
  }

  /* The user's own frame first, then the innermost library frame, or why there is none. */
  function frameLines(stack, box) {
    var u = userFrame(stack), l = libFrame(stack), line;
    if (u) { line = el("div"); line.appendChild(el("span", "tl-k", "your code: ")); line.appendChild(frameNode(u)); box.appendChild(line); }
    if (l) { line = el("div"); line.appendChild(el("span", "tl-k", "library: ")); line.appendChild(frameNode(l)); box.appendChild(line); }
    if (!u && !l) box.appendChild(el("div", "tl-k", stackOf(stack) ? "no Python frame (C++ frames only)" :
      "no stack recorded (as for what the autograd engine allocates in backward)"));
  }

  function showTip(V, tip, wrap, cx, cy, fill) {
    tip.textContent = "";
    fill(tip);
    tip.hidden = false;
    var w = tip.offsetWidth, h = tip.offsetHeight, W = wrap.clientWidth;
    var left = cx + 14 + w > W ? Math.max(0, cx - 14 - w) : cx + 14;
    tip.style.left = left + "px";
    tip.style.top = Math.max(0, Math.min(cy + 12, wrap.clientHeight - h)) + "px";
  }

  function totalsLine(V, x) {
    var i = indexAt(V.sx, x);
    if (i < 0) return fmtX(V, x);
    return "at " + fmtX(V, x) + ": active " + fmtBytes(V.sActive[i]) + ", reserved " +
      fmtBytes(V.sReserved[i]) + (V.d.series && V.d.series.events_per_point > 1 ?
      " (largest over " + group(V.d.series.events_per_point) + " events)" : "");
  }

  function hoverAt(V, cx, cy) {
    var g = V.g, x = dataX(V, g, cx), bytes = (M.top + g.ph - cy) / g.ph * V.yMax;
    if (cy < M.top) {
      var f = flagAt(V, cx);
      V.hover = -1; V.cursor = null;
      if (f) showTip(V, V.tip, V.chart, cx, cy, function (t) {
        t.appendChild(el("div", "tl-size", markTitle(V, f.mark)));
        t.appendChild(el("div", "tl-k", f.mark.moment >= 0 ? "click for the segments at this moment" :
          "no segment map kept for this boundary"));
      });
      else V.tip.hidden = true;
      return;
    }
    if (cx < M.left || cx > M.left + g.pw || cy > M.top + g.ph) { leave(V); return; }
    var hit = bandAt(V, x, bytes);
    V.hover = hit && hit.band >= 0 ? hit.band : -1;
    V.cursor = x;
    showDetail(V);
    showTip(V, V.tip, V.chart, cx, cy, function (t) {
      if (hit && hit.band >= 0) bandInfo(V, hit.band, t);
      else if (hit) {
        t.appendChild(el("div", "tl-size", fmtBytes(hit.small) + " in small allocations"));
        t.appendChild(el("div", "tl-k", "allocations of at most " + fmtBytes(V.d.band_min_bytes) +
          " each, merged into one band (" + group(V.n) + " of " + group(V.d.allocations) +
          " allocations are drawn as bands)"));
      }
      t.appendChild(el("div", "tl-foot", totalsLine(V, x)));
    });
  }

  function leave(V) { V.hover = -1; V.cursor = null; V.tip.hidden = true; showDetail(V); }

  /* The stack pane under the chart: the pinned band, else the hovered one, else a hint. Its
   * height is fixed, so the maps below stay put while the pointer moves. */
  function showDetail(V) {
    var j = V.pinned >= 0 ? V.pinned : V.hover, det = V.detail, key = j + (V.pinned >= 0 ? "p" : "");
    if (!det || det.key === key) return;
    det.key = key;
    det.textContent = "";
    if (j < 0) { det.appendChild(el("p", "muted", "Hover a band for its whole stack; click it (or Enter) to pin it here.")); return; }
    var head = el("div");
    bandInfo(V, j, head);
    det.appendChild(head);
    det.appendChild(el("div", "stack-h", (V.pinned === j ? "Pinned. " : "") + "Stack, innermost first (PyTorch's allocator frames hidden):"));
    det.appendChild(stackList(V.st[j]));
  }
  function pin(V, j) { V.pinned = j; showDetail(V); }

  function flagAt(V, cx) {
    for (var i = (V.flags || []).length - 1; i >= 0; i--)
      if (cx >= V.flags[i].x0 && cx <= V.flags[i].x1) return V.flags[i];
    return null;
  }
  function markTitle(V, m) {
    var t = m.kind === "peak" ? "Peak: " + fmtBytes(m.bytes) + " allocated" :
      m.kind === "oom" ? "Out of memory: " + fmtBytes(m.bytes) + " requested" :
      m.kind === "iteration" ? "End of iteration " + num(m.n) : "Snapshot";
    return t + " · " + fmtX(V, num(m.x));
  }

  /* ---- zoom and pan ---- */

  function setView(V, a, z) {
    var min = V.unit === "event" ? 4 : Math.min(V.xEnd, 20);
    if (z - a < min) { var c = (a + z) / 2; a = c - min / 2; z = c + min / 2; }
    if (z - a > V.xEnd) { a = 0; z = V.xEnd; }
    if (a < 0) { z -= a; a = 0; }
    if (z > V.xEnd) { a -= z - V.xEnd; z = V.xEnd; }
    V.view.x0 = Math.max(0, a); V.view.x1 = z;
    redraw(V);
  }
  function zoom(V, factor, at) {
    var a = V.view.x0, z = V.view.x1;
    setView(V, at - (at - a) * factor, at + (z - at) * factor);
  }
  function pan(V, frac) {
    var d = (V.view.x1 - V.view.x0) * frac;
    setView(V, V.view.x0 + d, V.view.x1 + d);
  }

  var pending = [];
  function redraw(V) {
    if (!V.chart || pending.indexOf(V) >= 0) return;
    pending.push(V);
    if (pending.length === 1) window.requestAnimationFrame(function () {
      var list = pending; pending = [];
      list.forEach(draw);
    });
  }

  function bindChart(V) {
    var c = V.chart, drag = null;
    function pos(ev) { var r = c.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; }
    c.addEventListener("mousemove", function (ev) {
      var p = pos(ev);
      if (drag) {
        var dx = p[0] - drag.cx;
        if (Math.abs(dx) > 3) drag.moved = true;
        if (drag.moved) {
          var k = (drag.x1 - drag.x0) / V.g.pw;
          c.classList.add("tl-panning");
          setView(V, drag.x0 - dx * k, drag.x1 - dx * k);
          V.tip.hidden = true;
          return;
        }
      }
      hoverAt(V, p[0], p[1]); redraw(V);
    });
    c.addEventListener("mouseleave", function () { drag = null; c.classList.remove("tl-panning"); leave(V); redraw(V); });
    c.addEventListener("mousedown", function (ev) {
      if (ev.button !== 0) return;
      var p = pos(ev);
      drag = { cx: p[0], x0: V.view.x0, x1: V.view.x1, moved: false };
      ev.preventDefault();
      c.focus({ preventScroll: true });
    });
    c.addEventListener("mouseup", function (ev) {
      var d = drag; drag = null; c.classList.remove("tl-panning");
      if (!d || d.moved) return;
      var p = pos(ev);
      if (p[1] < M.top) { var f = flagAt(V, p[0]); if (f && f.mark.moment >= 0) selectMoment(V, num(f.mark.moment)); return; }
      hoverAt(V, p[0], p[1]);
      pin(V, V.hover >= 0 && V.hover !== V.pinned ? V.hover : -1);
      redraw(V);
    });
    c.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var p = pos(ev), dy = ev.deltaMode === 1 ? ev.deltaY * 30 : ev.deltaY;
      zoom(V, Math.exp(Math.max(-1, Math.min(1, dy * 0.002))), dataX(V, V.g, Math.max(M.left, Math.min(p[0], M.left + V.g.pw))));
      V.tip.hidden = true;
    }, { passive: false });
    c.addEventListener("keydown", function (ev) { if (key(V, ev.key, ev.shiftKey)) ev.preventDefault(); });
    c.addEventListener("blur", function () { if (V.kbd) { V.kbd = null; leave(V); redraw(V); } });
    bindOverview(V);
  }

  /* Keyboard: arrows pan, +/- zoom about the centre, Up/Down walk the bands stacked at the
   * centre line, Enter pins the one walked to, Escape unpins, 0 or Home resets. */
  function key(V, k, shift) {
    var mid = (V.view.x0 + V.view.x1) / 2;
    if (k === "ArrowLeft" || k === "ArrowRight") pan(V, (k === "ArrowLeft" ? -1 : 1) * (shift ? 0.5 : 0.1));
    else if (k === "+" || k === "=") zoom(V, 0.5, mid);
    else if (k === "-" || k === "_") zoom(V, 2, mid);
    else if (k === "0" || k === "Home") setView(V, 0, V.xEnd);
    else if (k === "ArrowUp" || k === "ArrowDown") {
      var list = liveAt(V, mid);
      if (!list.length) return true;
      var at = V.kbd ? list.map(function (e) { return e.band; }).indexOf(V.kbd.band) : -1;
      at = at < 0 ? (k === "ArrowUp" ? 0 : list.length - 1) : Math.max(0, Math.min(list.length - 1, at + (k === "ArrowUp" ? 1 : -1)));
      V.kbd = list[at];
      V.hover = V.kbd.band; V.cursor = mid;
      showDetail(V);
      var g = V.g, cy = py(V, g, V.kbd.off + V.b[V.kbd.band] / 2);
      showTip(V, V.tip, V.chart, px(V, g, mid), cy, function (t) { bandInfo(V, V.kbd.band, t); t.appendChild(el("div", "tl-foot", totalsLine(V, mid))); });
      redraw(V);
    } else if (k === "Enter") { if (V.hover >= 0) { pin(V, V.hover === V.pinned ? -1 : V.hover); redraw(V); } }
    else if (k === "Escape") { pin(V, -1); V.kbd = null; leave(V); redraw(V); }
    else return false;
    return true;
  }

  /* The overview: drag to brush a range, click to centre the view there. */
  function bindOverview(V) {
    var o = V.overview;
    function at(ev) { var r = o.getBoundingClientRect(); return ev.clientX - r.left; }
    function toX(cx) { var pw = o.clientWidth - M.left - M.right; return Math.max(0, Math.min(V.xEnd, (cx - M.left) / pw * V.xEnd)); }
    o.addEventListener("mousedown", function (ev) { var a = at(ev); V.brush = { a: a, z: a }; ev.preventDefault(); redraw(V); });
    o.addEventListener("mousemove", function (ev) { if (V.brush) { V.brush.z = at(ev); redraw(V); } });
    function end(ev) {
      var b = V.brush; V.brush = null;
      if (!b) return;
      if (ev.type === "mouseup" && Math.abs(b.z - b.a) > 3) setView(V, toX(Math.min(b.a, b.z)), toX(Math.max(b.a, b.z)));
      else if (ev.type === "mouseup") { var c = toX(b.a), h = (V.view.x1 - V.view.x0) / 2; setView(V, c - h, c + h); }
      else redraw(V);
    }
    o.addEventListener("mouseup", end);
    o.addEventListener("mouseleave", end);
  }

  /* ---- moments: the segments after a marked event ---- */

  function momentTitle(V, mo) {
    var kinds = arr(mo.kinds).map(function (k) {
      if (k !== "iteration") return k === "oom" ? "the out-of-memory moment" : "the " + k;
      var it = V.marks.filter(function (m) { return m.kind === "iteration" && m.moment === V.moments.indexOf(mo); })[0];
      return "the end of iteration " + (it ? num(it.n) : "");
    });
    return kinds.join(" and ") || "event " + num(mo.event);
  }

  function selectMoment(V, id) {
    var mo = V.moments[id];
    if (!mo) return;
    V.moment = id;
    V.buttons.forEach(function (b) { b.setAttribute("aria-pressed", String(Number(b.getAttribute("data-moment")) === id)); });
    if (V.select) V.select.value = arr(mo.kinds).indexOf("iteration") >= 0 ? String(id) : "";
    var segs = arr(mo.segments).filter(Array.isArray);
    var sum = { reserved: 0, alloc: 0, free: 0, freeBlocks: 0, largest: 0, pending: 0 };
    segs.forEach(function (s) {
      sum.reserved += num(s[1]);
      var b = arr(s[5]);
      for (var i = 0; i + 4 < b.length; i += 5) {
        var st = num(b[i + 3]), sz = num(b[i + 1]);
        if (st === 0) sum.alloc += sz;
        else if (st === 1) sum.pending += sz;
        else { sum.free += sz; sum.freeBlocks++; sum.largest = Math.max(sum.largest, sz); }
      }
    });
    V.mHead.textContent = "Segments at " + momentTitle(V, mo) + (mo.event >= 0 ? " (after " +
      fmtX(V, num(mo.x)).replace(" (", ", ").replace(/\)$/, "") + ")" : "");
    var p = V.mSum;
    p.textContent = "";
    function part(k, v) { p.appendChild(document.createTextNode(k + " ")); p.appendChild(el("b", "", v)); p.appendChild(document.createTextNode(" · ")); }
    part("reserved", fmtBytes(sum.reserved) + " in " + segs.length + " segments");
    part("allocated", fmtBytes(sum.alloc));
    if (sum.pending) part("pending free", fmtBytes(sum.pending));
    part("free", fmtBytes(sum.free) + " in " + sum.freeBlocks + " blocks");
    part("largest free block", fmtBytes(sum.largest));
    p.appendChild(document.createTextNode("fragmentation "));
    p.appendChild(el("b", "", (sum.free ? (1 - sum.largest / sum.free) * 100 : 0).toFixed(1) + "%"));
    p.appendChild(document.createTextNode(" (1 − largest free / free, at this moment)" +
      (mo.source === "trace" ? ". Reconstructed from the trace: sizes of blocks freed later are " +
      "the requests rounded as the allocator rounds them." : ".")));
    V.mapWrap.setAttribute("data-moment", String(id));
    V.mSegs = layoutSegments(segs);
    drawMap(V);
    redraw(V);
  }

  /* Segments largest first, packed left to right in rows as wide as the largest one. */
  function layoutSegments(segs) {
    var order = segs.slice().sort(function (a, b) { return num(b[1]) - num(a[1]) || num(a[0]) - num(b[0]); });
    var max = order.length ? Math.max(1, num(order[0][1])) : 1, row = 0, used = 0, out = [];
    order.forEach(function (s) {
      var f = num(s[1]) / max;
      if (used > 0 && used + f > 1.0001) { row++; used = 0; }
      out.push({ s: s, row: row, at: used, f: f });
      used += f + 0.004;
    });
    return { list: out, rows: out.length ? row + 1 : 0, max: max };
  }

  function drawMap(V) {
    var L = V.mSegs, w = Math.max(320, V.mapWrap.clientWidth || 900), pad = 8;
    var h = Math.max(30, L.rows * (ROW + ROWGAP) + 2 * pad - ROWGAP);
    var ctx = sizeCanvas(V.map, w, h), span = w - 2 * pad;
    ctx.clearRect(0, 0, w, h);
    V.mapGeom = { pad: pad, span: span };
    L.list.forEach(function (e) {
      var s = e.s, x0 = pad + e.at * span, x1 = x0 + Math.max(1, e.f * span), y = pad + e.row * (ROW + ROWGAP);
      var b = arr(s[5]), scale = (x1 - x0) / Math.max(1, num(s[1])), used = false, i;
      for (i = 0; i + 4 < b.length; i += 5) if (num(b[i + 3]) !== 2) used = true;
      ctx.fillStyle = STATE.track; ctx.fillRect(x0, y, x1 - x0, ROW);
      for (i = 0; i + 4 < b.length; i += 5) {
        var off = num(b[i]), sz = num(b[i + 1]), req = Math.min(num(b[i + 2]), sz), st = num(b[i + 3]);
        var a = x0 + off * scale, z = a + sz * scale;
        if (st === 0) {
          ctx.fillStyle = STATE.active; ctx.fillRect(a, y, Math.max(req * scale, 0.5), ROW);
          if (sz > req) { ctx.fillStyle = STATE.waste; ctx.fillRect(a + req * scale, y, (sz - req) * scale, ROW); }
        } else {
          ctx.fillStyle = st === 1 ? STATE.pending : used ? STATE.split : STATE.whole;
          ctx.fillRect(a, y, Math.max(z - a, 0.5), ROW);
        }
        if (off > 0 && z - a > 2) { ctx.fillStyle = "rgba(29,35,48,.55)"; ctx.fillRect(a, y, 1, ROW); }
      }
    });
  }

  function mapHover(V, cx, cy) {
    var G = V.mapGeom, L = V.mSegs;
    if (!G || !L) return null;
    var row = Math.floor((cy - G.pad) / (ROW + ROWGAP));
    for (var k = 0; k < L.list.length; k++) {
      var e = L.list[k], x0 = G.pad + e.at * G.span, x1 = x0 + Math.max(1, e.f * G.span);
      if (e.row !== row || cx < x0 - 1 || cx > x1 + 1) continue;
      var s = e.s, b = arr(s[5]), off = (cx - x0) / (x1 - x0) * num(s[1]), hit = -1;
      for (var i = 0; i + 4 < b.length; i += 5) if (off >= num(b[i]) && off < num(b[i]) + num(b[i + 1])) hit = i;
      return { seg: s, block: hit };
    }
    return null;
  }

  function mapTip(V, h, t) {
    var s = h.seg, b = arr(s[5]), used = false;
    for (var i = 0; i + 4 < b.length; i += 5) if (num(b[i + 3]) !== 2) used = true;
    t.appendChild(el("div", "tl-k", "segment 0x" + num(s[0]).toString(16) + ": " + fmtBytes(s[1]) + ", " +
      ["large", "small", "private"][num(s[2])] + " pool" + (num(s[3]) ? ", expandable" : "") +
      (num(s[4]) ? ", stream 0x" + num(s[4]).toString(16) : "")));
    if (h.block < 0) return;
    var j = h.block, sz = num(b[j + 1]), req = num(b[j + 2]), st = num(b[j + 3]);
    var what = st === 0 ? "allocated" : st === 1 ? "pending free (waiting for a stream)" :
      used ? "free, inside a split segment (empty_cache() cannot release it)" : "free, a whole segment (releasable)";
    t.appendChild(el("div", "tl-size", fmtBytes(sz) + " " + what));
    if (st !== 2 && req && req !== sz) t.appendChild(el("div", "tl-k", fmtBytes(req) + " requested, " + fmtBytes(sz - req) + " lost to rounding"));
    t.appendChild(el("div", "tl-k", "at offset " + fmtBytes(b[j]) + " (0x" + (num(s[0]) + num(b[j])).toString(16) + ")"));
    if (st !== 2) frameLines(num(b[j + 4]), t);
  }

  function bindMap(V) {
    var m = V.mapWrap;
    m.addEventListener("mousemove", function (ev) {
      var r = m.getBoundingClientRect(), cx = ev.clientX - r.left, cy = ev.clientY - r.top;
      var h = mapHover(V, cx, cy);
      if (!h) { V.mTip.hidden = true; return; }
      showTip(V, V.mTip, m, cx, cy, function (t) { mapTip(V, h, t); });
    });
    m.addEventListener("mouseleave", function () { V.mTip.hidden = true; });
  }

  /* ---- building the section ---- */

  function legendItem(ul, cls, text) {
    var li = el("li"); li.appendChild(el("span", "sw " + cls)); li.appendChild(document.createTextNode(text)); ul.appendChild(li);
  }

  function build(d, focus) {
    var V = prepare(d), box = el("div", "tl-device");
    V.pinned = -1; V.hover = -1; V.cursor = null; V.kbd = null; V.moment = -1; V.buttons = [];
    box.appendChild(el("h3", "", "Device " + num(d.device) + " ")).appendChild(el("span", "muted",
      group(num(d.events)) + " events · " + group(V.n) + " of " + group(num(d.allocations)) +
      " allocations drawn as bands" + (d.truncated ? " · the trace does not reach back to the start" : "")));
    var bar = el("div", "tl-bar"), has = V.sx.length > 0 || V.n > 0;
    if (has) {
      var reset = el("button", "", "Reset zoom");
      reset.type = "button";
      reset.addEventListener("click", function () { setView(V, 0, V.xEnd); });
      bar.appendChild(reset);
    }
    bar.appendChild(el("span", "tl-lbl", "Segments at:"));
    var iters = [];
    V.moments.forEach(function (mo, id) {
      if (!mo) return;
      if (arr(mo.kinds).length === 1 && mo.kinds[0] === "iteration") { iters.push(id); return; }
      var b = el("button", "", momentTitle(V, mo).replace(/^the /, "").replace(/ and the /g, " + "));
      b.type = "button"; b.setAttribute("data-moment", String(id)); b.setAttribute("aria-pressed", "false");
      b.addEventListener("click", function () { selectMoment(V, id); });
      V.buttons.push(b); bar.appendChild(b);
    });
    if (iters.length) {
      var sel = el("select");
      sel.setAttribute("aria-label", "segments at the end of an iteration");
      sel.appendChild(el("option", "", "iteration…")).value = "";
      iters.forEach(function (id) { var o = el("option", "", momentTitle(V, V.moments[id]).replace(/^the /, "")); o.value = String(id); sel.appendChild(o); });
      sel.addEventListener("change", function () { if (sel.value !== "") selectMoment(V, Number(sel.value)); });
      V.select = sel; bar.appendChild(sel);
    }
    V.rangeEl = el("span", "tl-range");
    bar.appendChild(V.rangeEl);
    box.appendChild(bar);
    if (has) {
      V.chart = el("div", "tl-chart");
      V.chart.tabIndex = 0;
      V.chart.setAttribute("role", "application");
      V.chart.setAttribute("aria-label", "Allocation timeline of device " + num(d.device) +
        ". Arrow keys pan, plus and minus zoom, up and down walk the bands at the centre, Enter pins, Escape unpins, 0 resets.");
      V.canvas = el("canvas", "tl-main");
      V.canvas.setAttribute("aria-hidden", "true");
      V.tip = el("div", "tl-tip"); V.tip.hidden = true;
      V.chart.appendChild(V.canvas); V.chart.appendChild(V.tip);
      box.appendChild(V.chart);
      V.overview = el("canvas", "tl-overview");
      V.overview.setAttribute("aria-hidden", "true");
      box.appendChild(V.overview);
      var ul = el("ul", "legend tl-legend");
      legendItem(ul, "tl-bands", "one band per large allocation (requested bytes)");
      legendItem(ul, "tl-small", "smaller allocations, merged");
      legendItem(ul, "tl-resline", "reserved");
      box.appendChild(ul);
      V.detail = el("div", "tl-detail");
      V.detail.setAttribute("aria-live", "polite");
      box.appendChild(V.detail);
      showDetail(V);
      if (V.approx) box.appendChild(el("p", "muted small", "Too many bands drop at once here: some are drawn where they were allocated, not where they sank to."));
      bindChart(V);
    } else {
      V.rangeEl.textContent = "no trace recorded: the segments at the snapshot only";
    }
    var mom = el("div", "tl-moment");
    V.mHead = mom.appendChild(el("h4"));
    V.mSum = mom.appendChild(el("p", "tl-sum"));
    V.mapWrap = el("div", "tl-mapwrap");
    V.map = el("canvas", "tl-map"); V.map.setAttribute("aria-hidden", "true");
    V.mTip = el("div", "tl-tip"); V.mTip.hidden = true;
    V.mapWrap.appendChild(V.map); V.mapWrap.appendChild(V.mTip);
    mom.appendChild(V.mapWrap);
    var leg = el("ul", "legend tl-legend");
    [["st-active", "active"], ["st-waste", "rounding waste"], ["st-pending", "pending free"],
      ["st-split", "free inside a split segment"], ["st-whole", "free whole segment"]].forEach(function (p) { legendItem(leg, p[0], p[1]); });
    mom.appendChild(leg);
    box.appendChild(mom);
    bindMap(V);
    V.box = box;
    V.start = focus;
    return V;
  }

  /* The default moment: the one the verdict talks about on its device, else OOM, peak,
   * snapshot, in that order. */
  function defaultMoment(V, focusMoment) {
    if (focusMoment >= 0 && V.moments[focusMoment]) return focusMoment;
    var want = ["oom", "peak", "snapshot"];
    for (var w = 0; w < want.length; w++)
      for (var i = 0; i < V.moments.length; i++) if (V.moments[i] && arr(V.moments[i].kinds).indexOf(want[w]) >= 0) return i;
    return V.moments.length ? 0 : -1;
  }

  var views = [], focus = data.focus || {}, host = root.querySelector(".tl-root") || root;
  var t0 = performance.now();
  data.devices.forEach(function (d) {
    if (!d || typeof d !== "object") return;
    var V = build(d, num(d.device) === num(focus.device) ? num(focus.moment) : -1);
    host.appendChild(V.box);
    views.push(V);
  });
  if (!views.length) return;
  root.hidden = false;
  /* The static timeline figures are superseded; they stay in the page for readers without
   * script, print and --dump-dom. */
  var section = document.getElementById("timeline");
  if (section) Array.prototype.forEach.call(section.querySelectorAll("figure"), function (f) { f.hidden = true; });
  views.forEach(function (V) {
    if (V.chart) draw(V);
    var m = defaultMoment(V, V.start);
    if (m >= 0) selectMoment(V, m);
  });
  var firstDraw = performance.now() - t0;
  window.addEventListener("resize", function () { views.forEach(function (V) { if (V.chart) redraw(V); if (V.mSegs) drawMap(V); }); });

  /* A read-only hook for the browser tests and the bench: where things are, in client pixels. */
  function bandBox(V, j, x) {
    var list = liveAt(V, x), r = V.canvas.getBoundingClientRect(), g = V.g;
    for (var i = 0; i < list.length; i++) if (list[i].band === j) {
      var top = py(V, g, list[i].off + V.b[j]), bot = py(V, g, list[i].off);
      return { x: r.left + px(V, g, x), y: r.top + (top + bot) / 2, height: bot - top };
    }
    return null;
  }
  window.memreportTimeline = Object.freeze({
    firstDrawMs: firstDraw,
    pieces: function (i) { return views[i].P.n; },
    view: function (i) { return { x0: views[i].view.x0, x1: views[i].view.x1, end: views[i].xEnd }; },
    bandBox: function (i, j, x) { return views[i].chart ? bandBox(views[i], j, x) : null; },
    flagBox: function (i, kind) {
      var V = views[i], r = V.canvas.getBoundingClientRect();
      var f = (V.flags || []).filter(function (f) {
        return f.marks.some(function (m) { return m.kind === kind; }); })[0];
      return f ? { x: r.left + (f.x0 + f.x1) / 2, y: r.top + 12 } : null;
    },
    moment: function (i) { return views[i].moment; },
    pinned: function (i) { return views[i].pinned; }
  });
})();
