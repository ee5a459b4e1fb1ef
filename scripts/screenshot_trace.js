// Draws a merged trace (tools/merge_traces output, Chrome trace-event JSON) in a real trace
// viewer and saves a PNG: the Performance panel of the Chrome DevTools front end that Debian's
// `chromium` package ships, served by headless Chromium itself (http://127.0.0.1:PORT/devtools/
// trace_app.html), so nothing is fetched from the network. Chromium 156 no longer ships the legacy
// chrome://tracing viewer, hence the DevTools panel.
//
// Driven through the DevTools protocol with puppeteer-core (a doc/test tool, installed into a
// temporary folder by scripts/screenshot_trace.sh, never a dependency of the project).
//
// Usage: node screenshot_trace.js TRACE.json OUT.png [--width 1600] [--height 1300]
//            [--window 0,0.5] [--chromium /usr/bin/chromium]
//   --window A,B  show the fraction [A, B] of the trace's time span (default: all of it)
//
// What it does: loads the trace through the panel's "Load trace" file input; the panel remembers
// each track's expansion and order in localStorage ("timeline-persisted-main-flamechart-track-config"),
// so after one load it rewrites that list with every track expanded and the processes ("rank R
// (tp, pp, dp, cp)") sorted by rank, reloads, loads the trace again, closes the side bar, narrows the
// time window, and crops the picture to the tracks drawn.
'use strict';
const path = require('path');
const puppeteer = require('puppeteer-core');

function parseArgs(argv) {
  const o = {width: 1600, height: 1300, window: [0, 1], chromium: '/usr/bin/chromium', pos: []};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--width') o.width = Number(argv[++i]);
    else if (a === '--height') o.height = Number(argv[++i]);
    else if (a === '--window') o.window = argv[++i].split(',').map(Number);
    else if (a === '--chromium') o.chromium = argv[++i];
    else o.pos.push(a);
  }
  if (o.pos.length !== 2) {
    console.error('usage: node screenshot_trace.js TRACE.json OUT.png [--width W] [--height H] ' +
                  '[--window A,B] [--chromium PATH]');
    process.exit(2);
  }
  return o;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const CONFIG_KEY = 'timeline-persisted-main-flamechart-track-config';

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const trace = path.resolve(o.pos[0]);
  const out = path.resolve(o.pos[1]);
  const browser = await puppeteer.launch({
    executablePath: o.chromium,
    headless: true,
    // --no-sandbox: the sandbox cannot start as root in a container.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--enable-unsafe-swiftshader'],
  });
  try {
    const port = new URL(browser.wsEndpoint()).port;
    const url = `http://127.0.0.1:${port}/devtools/trace_app.html?panel=timeline`;
    const page = await browser.newPage();
    await page.setViewport({width: o.width, height: o.height, deviceScaleFactor: 1});

    // Every query goes through the open shadow roots of the DevTools front end.
    const deepAll = (sel) => page.evaluateHandle((sel) => {
      const found = [];
      (function walk(root) {
        for (const el of root.querySelectorAll('*')) {
          if (el.matches(sel)) found.push(el);
          if (el.shadowRoot) walk(el.shadowRoot);
        }
      })(document);
      return found;
    }, sel);
    const visible = async (sel) => {
      const arr = await deepAll(sel);
      const els = [];
      for (const h of (await arr.getProperties()).values()) {
        const e = h.asElement();
        const bb = e && (await e.boundingBox());
        if (bb && bb.width > 0 && bb.height > 0) els.push(e);
      }
      return els;
    };
    const waitVisible = async (sel, ms) => {
      for (let t = 0; t < ms; t += 250) {
        const els = await visible(sel);
        if (els.length) return els[0];
        await sleep(250);
      }
      throw new Error(`timed out waiting for ${sel}`);
    };
    const clickAll = async (sel) => {
      for (const e of await visible(sel)) await e.evaluate((el) => el.click());
    };

    const loadTrace = async () => {
      await page.goto(url, {waitUntil: 'load'});
      let input = null;
      for (let t = 0; t < 60000 && !input; t += 250) {
        input = (await (await deepAll('input[type=file]')).getProperty('0')).asElement();
        if (!input) await sleep(250);
      }
      if (!input) throw new Error('no file input in the Performance panel');
      await input.uploadFile(trace);
      // The details tabs appear once the trace is parsed and drawn.
      await waitVisible('[aria-label="Bottom-up"]', 120000);
      await sleep(1500);
      // "Debugging connection was closed" (no page is attached) and the first-run shortcuts card.
      await clickAll('button[aria-label="Close"]');
      await sleep(300);
      return waitVisible('canvas[aria-label="Flame chart"]', 10000);
    };

    // First load: toggle the first track twice so that the panel writes its track list.
    let canvas = await loadTrace();
    let box = await canvas.boundingBox();
    for (let i = 0; i < 2; i++) {
      await page.mouse.click(box.x + 12, box.y + 25);
      await sleep(500);
    }
    const cfgText = await page.evaluate((k) => localStorage.getItem(k), CONFIG_KEY);
    if (!cfgText) throw new Error(`the panel wrote no ${CONFIG_KEY}`);
    const cfg = JSON.parse(cfgText);
    const procs = [];
    for (const t of cfg) {
      const m = /^rank (\d+) /.exec(t.trackName);
      if (m || procs.length === 0) procs.push({rank: m ? Number(m[1]) : -1, tracks: [t]});
      else procs[procs.length - 1].tracks.push(t);
    }
    procs.sort((a, b) => a.rank - b.rank);
    let v = 0;
    for (const pr of procs) {
      for (const t of pr.tracks) {
        t.visualIndex = v++;
        t.expanded = true;
        t.hidden = false;
      }
    }
    await page.evaluate((k, s) => localStorage.setItem(k, s), CONFIG_KEY, JSON.stringify(cfg));
    console.log(`tracks as the panel found them: ${cfg.map((t) => t.trackName).join(' | ')}`);

    // Second load: ranks in order, everything expanded.
    canvas = await loadTrace();
    await clickAll('button[aria-label="Hide sidebar"]');
    await sleep(800);

    // Time window: drag the overview's right then left handle.
    const [a, b] = o.window;
    if (a > 0 || b < 1) {
      const grid = await waitVisible('[aria-label="Overview grid window"]', 5000);
      const g = await grid.boundingBox();
      const drag = async (label, frac) => {
        const h = await waitVisible(`[aria-label="${label}"]`, 5000);
        const hb = await h.boundingBox();
        // The right handle sits half outside the page at the far right: grab its inner half.
        await page.mouse.move(Math.min(hb.x + hb.width / 2, o.width - 2), hb.y + hb.height / 2);
        await page.mouse.down();
        await page.mouse.move(g.x + g.width * frac, hb.y + hb.height / 2, {steps: 10});
        await page.mouse.up();
        await sleep(800);
      };
      if (b < 1) await drag('Right resizer', b);
      if (a > 0) await drag('Left resizer', a);
      // Away from the overview, whose hover chip shows the window's length.
      await page.mouse.move(o.width / 2, o.height - 5);
    }
    await sleep(1500);

    // Crop below the last drawn row: scan the flame chart's own pixels from the bottom, and wait
    // until the drawing is there and stable.
    const lastInkRow = () => canvas.evaluate((c) => {
      const {data} = c.getContext('2d').getImageData(0, 0, c.width, c.height);
      for (let y = c.height - 1; y >= 0; y--) {
        let ink = 0;
        for (let x = 0; x < c.width; x += 2) {
          const i = (y * c.width + x) * 4;
          if (Math.min(data[i], data[i + 1], data[i + 2]) < 200 && data[i + 3] > 0) ink++;
        }
        if (ink > 3) return y / (c.height / c.getBoundingClientRect().height);
      }
      return -1;
    });
    let lastRow = -1;
    for (let t = 0, prev = -2; t < 60000; t += 500) {
      lastRow = await lastInkRow();
      if (lastRow > 0 && lastRow === prev) break;
      prev = lastRow;
      await sleep(500);
    }
    if (lastRow <= 0) throw new Error('the flame chart drew nothing');
    box = await canvas.boundingBox();
    const height = Math.min(o.height, Math.ceil(box.y + lastRow + 10));
    await page.screenshot({path: out, clip: {x: 0, y: 0, width: o.width, height}, captureBeyondViewport: false});
    console.log(`wrote ${out} (${o.width}x${height})`);
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
