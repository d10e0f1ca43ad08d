/* Open-and-draw time of a page in headless Chromium (network off): node bench.js PAGE [RUNS].
 * Prints one JSON line: the page's bytes, and the median over RUNS fresh tabs of open_ms (from
 * navigation until the first frame after load is painted, the timeline drawn) and of
 * script_ms (timeline.js alone: parse the data block, stack the bands, draw). Goal: open_ms
 * under 2000 for the 88 MB sample (gpt_large_trace). */
"use strict";
const fs = require("fs");
const path = require("path");
const puppeteer = require("puppeteer-core");

const file = path.resolve(process.argv[2]);
const runs = Number(process.argv[3] || 5);
const median = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
(async () => {
  const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND"] });
  const open = [], script = [];
  let pieces = 0;
  try {
    for (let i = 0; i < runs; i++) {
      const page = await browser.newPage();
      await page.setViewport({ width: 1200, height: 900 });
      const t0 = Date.now();
      await page.goto("file://" + file, { waitUntil: "load" });
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      open.push(Date.now() - t0);
      const s = await page.evaluate(() => window.memreportTimeline ? [window.memreportTimeline.firstDrawMs, window.memreportTimeline.pieces(0)] : [-1, 0]);
      script.push(s[0]);
      pieces = s[1];
      await page.close();
    }
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify({ page: path.basename(file), bytes: fs.statSync(file).size, runs,
    open_ms: median(open), script_ms: Math.round(median(script)), pieces, goal_ms: 2000 }));
})().catch((e) => { console.error(e); process.exit(1); });
