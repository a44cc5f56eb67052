// Drives the `minfer viz` page in headless Chromium: the graph renders (dagre laid it out), a prompt runs
// and its tokens and top-5 appear, a second tab sees the same run, clicking a node shows statistics that
// match the stats endpoint, and a screenshot is saved. Exits non-zero with the reason on any failure.
import puppeteer from 'puppeteer-core';
import assert from 'node:assert/strict';

const url = process.env.MINFER_VIZ_URL;
const browser = await puppeteer.launch({
  executablePath: process.env.MINFER_CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const errors = [];
const t0 = Date.now();
const log = (what) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${what}`);
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.setViewport({ width: 1400, height: 1250 });
  await page.goto(url, { waitUntil: 'load' });

  log('page loaded');
  // The graph: nodes placed by dagre, layer 0 expanded, the other layer collapsed into one box.
  await page.waitForFunction(() => document.body.dataset.graphReady === '1', { timeout: 20000 });
  const nodeCount = await page.$$eval('g.node[data-id]', (g) => g.length);
  assert.ok(nodeCount > 10, `only ${nodeCount} graph nodes rendered`);
  const placed = await page.$$eval('g.node[data-id]', (g) => new Set(g.map((n) => n.getAttribute('transform'))).size);
  assert.ok(placed > nodeCount / 2, 'nodes were not laid out (positions coincide)');
  assert.ok((await page.$$('g.node.layer')).length >= 1, 'no collapsed layer box');
  assert.ok((await page.$$('path.edge')).length > 10, 'no edges drawn');

  log(`graph rendered: ${nodeCount} nodes`);
  // Search finds a node of the collapsed layer and expands it.
  await page.type('#search', 'blk.1.ffn_down');
  await page.keyboard.press('Enter');
  await page.waitForSelector('g.node.match', { timeout: 5000 });

  log('search found the node');
  // A second tab watches the same run.
  const watcher = await browser.newPage();
  await watcher.goto(url, { waitUntil: 'load' });
  await watcher.waitForFunction(() => document.body.dataset.graphReady === '1', { timeout: 20000 });

  log('second tab ready');
  // Run a prompt: tokens stream in, the top-5 table fills, the step's node times are listed.
  await page.bringToFront();  // a background tab's timers and script calls may be throttled
  await page.$eval('#prompt', (t) => { t.value = 'hello world'; });
  await page.$eval('#n-predict', (i) => { i.value = '6'; });
  await page.click('#run');
  await page.waitForFunction(() => document.body.dataset.runsDone === '1', { timeout: 60000 });
  log('run done');
  const tokens = await page.$$eval('#tokens .tok', (t) => t.length);
  assert.ok(tokens >= 1 && tokens <= 6, `${tokens} tokens shown`);
  const top5 = await page.$$eval('#top5 tbody tr', (rows) => rows.map((r) => Number(r.children[1].textContent)));
  assert.equal(top5.length, 5, 'top-5 table does not have 5 rows');
  for (let i = 1; i < 5; ++i) assert.ok(top5[i] <= top5[i - 1], `top-5 not sorted: ${top5}`);
  assert.ok(top5[0] > 0 && top5[0] <= 1, `bad probability ${top5[0]}`);
  assert.ok((await page.$$('#times .t')).length > 0, 'no per-node times');
  assert.match(await page.$eval('#status', (s) => s.textContent), /tokens \(/);
  await watcher.waitForFunction(() => document.body.dataset.runsDone === '1', { timeout: 20000 });
  assert.equal(await watcher.$$eval('#tokens .tok', (t) => t.length), tokens, 'the second tab saw other tokens');

  log('tokens, top-5 and times checked; the second tab saw the run');
  // Click a node: its statistics for the latest step, equal to what the stats endpoint reports.
  await page.$eval('#search', (i) => { i.value = ''; });
  await page.type('#search', 'blk.0.attn_norm');
  await page.keyboard.press('Enter');  // centres the view on it
  await page.waitForSelector('g.node.match[data-name="blk.0.attn_norm"]', { timeout: 5000 });
  const target = await page.$('g.node[data-name="blk.0.attn_norm"]');
  assert.ok(target, 'node blk.0.attn_norm not drawn');
  const id = await target.evaluate((g) => Number(g.dataset.id));
  await target.click();
  await page.waitForSelector('#stats tr.stat-mean', { timeout: 10000 });
  const shown = await page.$eval('#stats', (s) => Object.fromEntries([...s.querySelectorAll('tr')].map((r) => [r.className, r.children[1].textContent])));
  const api = await page.evaluate(async (i) => (await fetch(`/api/nodes/${i}/stats`)).json(), id);
  assert.equal(Number(shown['stat-nan']), api.stats.nan);
  assert.ok(Math.abs(Number(shown['stat-mean']) - api.stats.mean) < 1e-3, `mean ${shown['stat-mean']} vs ${api.stats.mean}`);
  assert.ok(Math.abs(Number(shown['stat-max']) - api.stats.max) < 1e-3 * Math.max(1, Math.abs(api.stats.max)));
  assert.ok(api.stats.std > 0, 'a normalised activation has no spread');
  log('node statistics match the endpoint');
  const histogramDrawn = await page.$eval('#histogram', (c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    for (let k = 3; k < d.length; k += 4) if (d[k] !== 0) return true;
    return false;
  });
  assert.ok(histogramDrawn, 'histogram canvas is empty');

  assert.deepEqual(errors, [], 'page errors');
  await page.screenshot({ path: process.env.MINFER_SCREENSHOT });
  console.log(`viz page ok: ${nodeCount} nodes, ${tokens} tokens, node ${id} stats shown; screenshot ${process.env.MINFER_SCREENSHOT}`);
} finally {
  await browser.close();
}
