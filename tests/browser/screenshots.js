/* Screenshots of the interactive page for docs/screenshots: node screenshots.js OUTDIR PAGE...
 * For each page (NAME.html, written by memreport: ./memreport SAMPLE -o NAME.html) it writes
 * NAME-timeline.png (the chart, hovering the largest band at the verdict's moment, with the
 * pinned band's stack) and NAME-maps.png (the segments at that moment, one block hovered).
 * Network off, as in the tests. */
"use strict";
const path = require("path");
const puppeteer = require("puppeteer-core");

const [out, ...pages] = process.argv.slice(2);
const ARGS = ["--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9",
  "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars"];
const frames = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

async function shoot(browser, file) {
  const name = path.basename(file, ".html");
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 1000, deviceScaleFactor: 1 });
  await page.goto("file://" + path.resolve(file), { waitUntil: "load" });
  await page.evaluate(() => document.querySelector(".tl-device").scrollIntoView());
  await frames(page);
  /* A long trace: zoom in about the moment first, as a reader would, so its bands show. */
  const zoom = await page.evaluate(() => {
    const data = JSON.parse(document.getElementById("memreport-data").textContent);
    const d = data.devices.find((v) => v.device === data.focus.device) || data.devices[0];
    const r = document.querySelector("canvas.tl-main").getBoundingClientRect();
    const x = d.moments[data.focus.moment].x;
    return d.x_end > 3000 ? { x: r.left + 74 + x / d.x_end * (r.width - 88), y: r.top + 200 } : null;
  });
  if (zoom) {
    await page.mouse.move(zoom.x, zoom.y);
    for (let i = 0; i < 4; i++) { await page.mouse.wheel({ deltaY: -500 }); await frames(page); }
  }
  /* The largest band live at the focus moment's event. */
  const target = await page.evaluate(() => {
    const data = JSON.parse(document.getElementById("memreport-data").textContent);
    const d = data.devices.find((v) => v.device === data.focus.device) || data.devices[0];
    const x = d.moments[data.focus.moment].x + 0.5; /* mid-way through its event's state */
    let best = -1;
    for (let i = 0; i < d.bands.length / 4; i++) {
      const s = Math.max(0, d.bands[4 * i]), e = d.bands[4 * i + 1] < 0 ? d.x_end + 1 : d.bands[4 * i + 1];
      if (s <= x && x < e && (best < 0 || d.bands[4 * i + 2] > d.bands[4 * best + 2])) best = i;
    }
    const i = data.devices.indexOf(d);
    return best < 0 ? null : window.memreportTimeline.bandBox(i, best, x);
  });
  if (target) {
    await page.mouse.click(target.x, target.y);
    await page.mouse.move(target.x - 120, target.y - 40);
    await page.mouse.move(target.x, target.y);
    await frames(page);
  }
  /* clips are in page coordinates: element boxes plus the scroll offset */
  const abs = (sel) => page.evaluate((q) => {
    const e = document.querySelector(q);
    if (!e || e.hidden) return null;
    const r = e.getBoundingClientRect();
    return { x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height };
  }, sel);
  const box = await abs(".tl-device");
  const dbox = await abs(".tl-detail");
  const bottom = dbox && dbox.height ? Math.min(dbox.y + dbox.height, box.y + 760) : box.y + 520;
  await page.screenshot({ path: path.join(out, name + "-timeline.png"), clip: { x: box.x, y: box.y, width: box.width, height: bottom - box.y } });
  const mom = await page.$(".tl-moment");
  await mom.scrollIntoView();
  const mb = await (await page.$("canvas.tl-map")).boundingBox();
  await page.mouse.move(mb.x + 60, mb.y + 14);
  await frames(page);
  const m = await abs(".tl-moment");
  await page.screenshot({ path: path.join(out, name + "-maps.png"), clip: { x: m.x, y: m.y, width: m.width, height: Math.min(m.height, 640) } });
  await page.close();
}

(async () => {
  const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true, args: ARGS });
  try { for (const p of pages) await shoot(browser, p); } finally { await browser.close(); }
})().catch((e) => { console.error(e); process.exit(1); });
