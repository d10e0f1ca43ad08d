/* Browser tests of the interactive page (templates/timeline.js) on pages built by
 * make_page_fixture.py: node timeline.test.js DIR, where DIR holds oom_capacity.html,
 * no_history.html, hostile.html and tampered.html. Prints "ok N - ..." / "not ok N - ...".
 * Chromium runs headless with the network off; every request other than the page itself
 * fails the test, as do console errors, page errors, dialogs and CSP violations. */
"use strict";
const path = require("path");
const puppeteer = require("puppeteer-core");

const dir = process.argv[2];
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
let n = 0, failed = 0;
function ok(cond, name, detail) {
  n++;
  if (cond) console.log(`ok ${n} - ${name}`);
  else { failed++; console.log(`not ok ${n} - ${name}${detail ? " (" + String(detail).slice(0, 300) + ")" : ""}`); }
}

/* The same formats as timeline.js and the C report (mr_format_bytes). */
function fmtBytes(b) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  if (b < 1024) return b + " B";
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return b.toFixed(2) + " " + u[i];
}
const group = (x) => String(Math.round(x)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");

const ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--disable-extensions", "--disable-default-apps", "--mute-audio",
  "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
  "--host-resolver-rules=MAP * ~NOTFOUND"];

/* Opens FILE in a fresh page that records what must never happen. */
async function open(browser, file, { js = true } = {}) {
  const page = await browser.newPage();
  const bad = { requests: [], console: [], errors: [], csp: [], dialogs: [] };
  const url = "file://" + path.resolve(file);
  await page.setViewport({ width: 1200, height: 900 });
  await page.setJavaScriptEnabled(js);
  await page.setRequestInterception(true);
  page.on("request", (r) => {
    if (r.url() === url || r.url().startsWith("data:")) r.continue();
    else { bad.requests.push(r.url()); r.abort(); }
  });
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warn") bad.console.push(m.text()); });
  page.on("pageerror", (e) => bad.errors.push(e.message));
  page.on("dialog", (d) => { bad.dialogs.push(d.message()); d.dismiss(); });
  await page.evaluateOnNewDocument(() => {
    window.__csp = [];
    document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));
  });
  await page.goto(url, { waitUntil: "load" });
  if (js) {
    await page.evaluate(() => { const c = document.querySelector(".tl-device"); if (c) c.scrollIntoView(); });
    await frames(page);
    bad.csp = await page.evaluate(() => window.__csp);
  }
  return { page, bad };
}
const frames = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
const view = (page) => page.evaluate(() => window.memreportTimeline.view(0));

function clean(name, bad) {
  ok(!bad.requests.length, `${name}: no network requests`, bad.requests.join(" "));
  ok(!bad.console.length && !bad.errors.length, `${name}: no console errors or page errors`, bad.console.concat(bad.errors).join(" | "));
  ok(!bad.csp.length && !bad.console.some((t) => /Content Security Policy/.test(t)), `${name}: no CSP violations`, bad.csp.join(" "));
  ok(!bad.dialogs.length, `${name}: no dialogs`, bad.dialogs.join(" "));
}

async function oomCapacity(browser) {
  const { page, bad } = await open(browser, path.join(dir, "oom_capacity.html"));
  const state = await page.evaluate(() => ({
    explore: !document.getElementById("explore").hidden,
    staticHidden: Array.from(document.querySelectorAll("#timeline figure")).every((f) => f.hidden),
    api: !!window.memreportTimeline,
    data: JSON.parse(document.getElementById("memreport-data").textContent),
  }));
  ok(state.explore && state.api, "oom_capacity: the interactive timeline is shown");
  ok(state.staticHidden, "oom_capacity: the static SVG timeline gives way to it");
  const data = state.data, d = data.devices[0];

  /* The largest band live at the peak, from the data itself. */
  const peak = d.marks.find((m) => m.kind === "peak");
  let best = -1;
  for (let i = 0; i < d.bands.length / 4; i++) {
    const s = d.bands[4 * i] < 0 ? 0 : d.bands[4 * i], e = d.bands[4 * i + 1] < 0 ? d.x_end + 1 : d.bands[4 * i + 1];
    if (s <= peak.x && peak.x < e && (best < 0 || d.bands[4 * i + 2] > d.bands[4 * best + 2])) best = i;
  }
  const bytes = d.bands[4 * best + 2], stack = data.stacks[d.bands[4 * best + 3]];
  const f = 3 * stack[2 + stack[0]];
  const user = { name: data.strings[data.frames[f]], file: data.strings[data.frames[f + 1]], line: data.frames[f + 2] };
  ok(/train\.py$/.test(user.file) && !/\/torch\//.test(user.file), "oom_capacity: the largest band at the peak has a user frame in train.py", user.file);
  const box = await page.evaluate((j, x) => window.memreportTimeline.bandBox(0, j, x), best, peak.x);
  ok(box && box.height > 4, "oom_capacity: the largest band at the peak is drawn", JSON.stringify(box));
  await page.mouse.move(box.x, box.y);
  await frames(page);
  const tip = await page.evaluate(() => { const t = document.querySelector(".tl-chart .tl-tip"); return t.hidden ? "" : t.textContent; });
  ok(tip.includes(fmtBytes(bytes)) && tip.includes(group(bytes) + " B"), `oom_capacity: hover shows the band's size (${fmtBytes(bytes)})`, tip);
  ok(tip.includes("your code: " + user.name + " " + user.file + ":" + user.line), `oom_capacity: hover shows its user frame first (${user.name} ${path.basename(user.file)}:${user.line})`, tip);

  const pane = await page.evaluate(() => document.querySelectorAll(".tl-detail ol.frames li").length);
  ok(pane === stack.length - 2, `oom_capacity: hover shows the full stack below the chart (${stack.length - 2} frames)`, pane);

  /* Click pins: the detail panel keeps the full stack, with the user's frame marked. */
  await page.mouse.click(box.x, box.y);
  await frames(page);
  const pinned = await page.evaluate(() => ({
    pinned: window.memreportTimeline.pinned(0),
    shown: /^Pinned/.test(document.querySelector(".tl-detail .stack-h").textContent),
    frames: document.querySelectorAll(".tl-detail ol.frames li").length,
    user: (document.querySelector(".tl-detail li.tl-user") || {}).textContent || "",
    cpp: /CUDACachingAllocator/.test(document.querySelector(".tl-detail").textContent),
  }));
  ok(pinned.pinned === best && pinned.shown && pinned.frames >= 3, "oom_capacity: click pins the band and shows its full stack", JSON.stringify(pinned));
  ok(pinned.user.includes(user.file + ":" + user.line) && !pinned.cpp, "oom_capacity: the pinned stack marks the user frame, allocator frames filtered", pinned.user);
  await page.mouse.move(box.x, 30);
  await page.keyboard.press("Escape");
  await frames(page);
  ok(await page.evaluate(() => window.memreportTimeline.pinned(0) === -1 && !document.querySelector(".tl-detail ol.frames")), "oom_capacity: Escape unpins");

  /* Wheel zoom changes the visible range, around the pointer. */
  const v0 = await view(page);
  await page.mouse.move(box.x, box.y);
  await page.mouse.wheel({ deltaY: -400 });
  await frames(page);
  const v1 = await view(page);
  ok(v1.x1 - v1.x0 < (v0.x1 - v0.x0) * 0.7 && v1.x0 > 0, "oom_capacity: wheel zooms in", JSON.stringify([v0, v1]));
  const range = await page.evaluate(() => document.querySelector(".tl-range").textContent);
  ok(/showing events/.test(range) && !range.includes("0–" + group(v0.x1) + " "), "oom_capacity: the range label follows the zoom", range);

  /* Drag pans the zoomed view. */
  await page.mouse.move(box.x, box.y);
  await page.mouse.down();
  await page.mouse.move(box.x - 200, box.y, { steps: 4 });
  await page.mouse.up();
  await frames(page);
  const v2 = await view(page);
  ok(v2.x0 > v1.x0 && Math.abs((v2.x1 - v2.x0) - (v1.x1 - v1.x0)) < 1e-6 * v0.x1 + 1e-9, "oom_capacity: drag pans", JSON.stringify([v1, v2]));

  /* The brush on the overview selects a range; reset shows everything again. */
  const ov = await page.evaluate(() => { const r = document.querySelector("canvas.tl-overview").getBoundingClientRect(); return { l: r.left, w: r.width, t: r.top, h: r.height }; });
  const pw = ov.w - 74 - 14, a = ov.l + 74 + 0.2 * pw, z = ov.l + 74 + 0.6 * pw;
  await page.mouse.move(a, ov.t + ov.h / 2);
  await page.mouse.down();
  await page.mouse.move(z, ov.t + ov.h / 2, { steps: 5 });
  await page.mouse.up();
  await frames(page);
  const v3 = await view(page);
  const near = (p, q) => Math.abs(p - q) <= 0.02 * v0.x1 + 1;
  ok(near(v3.x0, 0.2 * v0.x1) && near(v3.x1, 0.6 * v0.x1), "oom_capacity: the brush selects a range", JSON.stringify(v3));
  await page.click(".tl-bar button");
  await frames(page);
  const v4 = await view(page);
  ok(v4.x0 === 0 && v4.x1 === v0.x1, "oom_capacity: reset shows the whole trace", JSON.stringify(v4));

  /* Keyboard: focusable, +/- zoom, arrows pan, 0 resets; focus is visible. */
  /* reached with Tab, as a keyboard user would */
  await page.focus(".tl-bar button");
  for (let i = 0; i < 20 && !(await page.evaluate(() => document.activeElement.classList.contains("tl-chart"))); i++)
    await page.keyboard.press("Tab");
  const ring = await page.evaluate(() => getComputedStyle(document.querySelector(".tl-chart")).boxShadow);
  ok(ring && ring !== "none", "oom_capacity: the focused chart shows a focus ring", ring);
  await page.keyboard.press("+");
  await frames(page);
  const k1 = await view(page);
  ok(Math.abs((k1.x1 - k1.x0) - v0.x1 / 2) < 1, "oom_capacity: + zooms in by half", JSON.stringify(k1));
  await page.keyboard.press("ArrowRight");
  await frames(page);
  const k2 = await view(page);
  ok(k2.x0 > k1.x0, "oom_capacity: ArrowRight pans", JSON.stringify([k1, k2]));
  await page.keyboard.press("-");
  await page.keyboard.press("0");
  await frames(page);
  const k3 = await view(page);
  ok(k3.x0 === 0 && k3.x1 === v0.x1, "oom_capacity: - and 0 zoom out and reset", JSON.stringify(k3));
  await page.keyboard.press("ArrowUp");
  await page.keyboard.press("Enter");
  await frames(page);
  ok(await page.evaluate(() => window.memreportTimeline.pinned(0) >= 0), "oom_capacity: ArrowUp walks to a band, Enter pins it");
  await page.keyboard.press("Escape");

  /* The default moment is the one the verdict talks about (the OOM); the peak mark shows the
   * peak's segments. */
  ok(await page.evaluate(() => window.memreportTimeline.moment(0)) === data.focus.moment, "oom_capacity: the maps open at the verdict's moment (the OOM)");
  const flag = await page.evaluate(() => window.memreportTimeline.flagBox(0, "peak"));
  await page.mouse.click(flag.x, flag.y);
  await frames(page);
  const map = await page.evaluate(() => {
    const c = document.querySelector("canvas.tl-map"), ctx = c.getContext("2d");
    const px = ctx.getImageData(0, 0, c.width, c.height).data;
    let blue = 0, red = 0;
    for (let i = 0; i < px.length; i += 4) {
      if (px[i] === 0x3b && px[i + 1] === 0x7d && px[i + 2] === 0xdd) blue++;
      if (px[i] === 0xe2 && px[i + 1] === 0x62 && px[i + 2] === 0x5a) red++;
    }
    return { moment: window.memreportTimeline.moment(0), attr: document.querySelector(".tl-mapwrap").getAttribute("data-moment"),
      head: document.querySelector(".tl-moment h4").textContent, sum: document.querySelector(".tl-sum").textContent, blue, red };
  });
  ok(map.moment === peak.moment && map.attr === String(peak.moment) && /peak/.test(map.head), "oom_capacity: clicking the peak mark shows the peak's segment maps", JSON.stringify(map));
  const mo = d.moments[peak.moment];
  const reserved = mo.segments.reduce((s, g) => s + g[1], 0);
  ok(map.blue > 1000 && map.sum.includes(fmtBytes(reserved) + " in " + mo.segments.length + " segments"), "oom_capacity: the peak's maps are drawn from its segments", `${map.blue} ${map.sum}`);

  /* Hovering a block of the map names it and its user frame. */
  const mb = await page.evaluate(() => { const r = document.querySelector("canvas.tl-map").getBoundingClientRect(); return { x: r.left + 40, y: r.top + 14 }; });
  await page.mouse.move(mb.x, mb.y);
  const mtip = await page.evaluate(() => { const t = document.querySelector(".tl-mapwrap .tl-tip"); return t.hidden ? "" : t.textContent; });
  ok(/segment 0x[0-9a-f]+: /.test(mtip) && /allocated/.test(mtip) && /your code: /.test(mtip), "oom_capacity: hovering a block names its size, state and user frame", mtip);
  clean("oom_capacity", bad);
  await page.close();
}

async function jsOff(browser) {
  const { page, bad } = await open(browser, path.join(dir, "oom_capacity.html"), { js: false });
  const s = await page.evaluate(() => ({
    hidden: document.getElementById("explore").hidden,
    verdict: (document.getElementById("verdict") || {}).textContent || "",
    cards: document.querySelectorAll("#devices .card").length,
    svg: document.querySelector("svg.timeline") ? document.querySelector("svg.timeline").getBoundingClientRect().width : 0,
    figures: Array.from(document.querySelectorAll("#timeline figure")).every((f) => !f.hidden),
    maps: Array.from(document.querySelectorAll("img.map")).filter((i) => i.complete && i.naturalWidth > 0).length,
    canvases: document.querySelectorAll("#explore canvas").length,
  }));
  ok(s.hidden && s.canvases === 0, "JS off: the interactive parts stay hidden", JSON.stringify(s));
  ok(s.verdict.length > 20 && s.cards >= 6, "JS off: the static summary is there", JSON.stringify(s));
  ok(s.svg > 300 && s.figures && s.maps >= 40, "JS off: the server-rendered timeline and segment maps are shown", JSON.stringify(s));
  /* The maps at every marked moment are written by memreport itself, the verdict's open. */
  const mo = await page.evaluate(() => {
    const data = JSON.parse(document.getElementById("memreport-data").textContent);
    const open = Array.from(document.querySelectorAll("#maps details.moment[open]"));
    return { want: data.devices[0].moments.length, focus: data.focus.moment,
      got: document.querySelectorAll("#maps details.moment").length, open: open.map((e) => e.id),
      head: open.length ? open[0].querySelector("summary").textContent : "",
      imgs: open.length ? Array.from(open[0].querySelectorAll("img.map")).filter((i) => i.complete && i.naturalWidth > 0).length : 0,
      links: document.querySelectorAll("#maps p.moments a").length };
  });
  ok(mo.got === mo.want && mo.links === mo.want && mo.open.length === 1 && mo.open[0] === "maps-d0-m" + mo.focus &&
    /^At the out-of-memory moment/.test(mo.head) && mo.imgs >= 10,
    "JS off: segment maps at every marked moment, the verdict's (the OOM) open", JSON.stringify(mo));
  ok(!bad.requests.length, "JS off: no network requests", bad.requests.join(" "));
  await page.close();
}

async function noHistory(browser) {
  const { page, bad } = await open(browser, path.join(dir, "no_history.html"));
  const s = await page.evaluate(() => ({
    shown: !document.getElementById("explore").hidden,
    chart: document.querySelectorAll(".tl-chart").length,
    moment: window.memreportTimeline.moment(0),
    head: document.querySelector(".tl-moment h4").textContent,
  }));
  ok(s.shown && s.chart === 0 && s.moment === 0 && /snapshot/.test(s.head), "no_history: no timeline, the segments at the snapshot", JSON.stringify(s));
  clean("no_history", bad);
  await page.close();
}

async function hostile(browser) {
  const { page, bad } = await open(browser, path.join(dir, "hostile.html"));
  /* Hover every band: the tooltip and detail panel get the hostile strings as text. */
  const boxes = await page.evaluate(() => {
    const d = JSON.parse(document.getElementById("memreport-data").textContent).devices[0], out = [];
    for (let i = 0; i < d.bands.length / 4; i++) {
      const s = Math.max(0, d.bands[4 * i]), e = d.bands[4 * i + 1] < 0 ? d.x_end + 1 : d.bands[4 * i + 1];
      const b = window.memreportTimeline.bandBox(0, i, (s + e) / 2);
      if (b) out.push(b);
    }
    return out;
  });
  let text = "";
  for (const b of boxes) {
    await page.mouse.click(b.x, b.y);
    await frames(page);
    text += await page.evaluate(() => document.querySelector(".tl-detail").textContent + document.querySelector(".tl-chart .tl-tip").textContent);
  }
  const s = await page.evaluate(() => ({
    scripts: document.scripts.length,
    injected: document.querySelectorAll("#explore img, #explore script, [onerror]").length,
  }));
  s.text = text;
  ok(boxes.length > 0 && s.injected === 0 && s.scripts === 3, "hostile snapshot: its strings stay text in tooltips and stacks", JSON.stringify(s));
  ok(/<script>alert\(1\)<\/script>/.test(s.text) || boxes.length === 0, "hostile snapshot: the strings are shown as written", s.text.slice(0, 200));
  clean("hostile", bad);
  await page.close();
}

async function tampered(browser) {
  const { page, bad } = await open(browser, path.join(dir, "tampered.html"));
  const shown = await page.evaluate(() => !document.getElementById("explore").hidden);
  ok(!shown && bad.console.some((t) => /Content Security Policy/.test(t)), "a tampered timeline.js is blocked by the page's CSP (the check can fail)", bad.console.join(" | "));
  await page.close();
}

(async () => {
  const browser = await puppeteer.launch({ executablePath: chromium, headless: true, args: ARGS });
  try {
    for (const t of [oomCapacity, jsOff, noHistory, hostile, tampered]) {
      try { await t(browser); } catch (e) { ok(false, t.name + " ran", e.stack); }
    }
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.log(`not ok ${n + 1} - the browser tests ran (${e.message})`); process.exit(1); });
