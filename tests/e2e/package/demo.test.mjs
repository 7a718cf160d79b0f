// The demo (www/index.html) in several tabs of one Chromium context, asserting on the DOM: exactly one
// tab is the primary and another takes over when it closes; two tabs bursting IndexedDB writes under the
// writer lock lose no update; a lock requested by hand in one tab shows in another tab's held table.
// The demo uses the ponyfill (`../js/index.js`), never the native navigator.locks.
// Screenshots for review go to test-results/demo-*.png. Needs the build (`npm run build`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { startServer, repoRoot } from '../server.mjs';
import { launchChromium } from '../browser.mjs';

const shotsDir = path.join(repoRoot, 'test-results');
let server;
let browser;

before(async () => {
  await fs.mkdir(shotsDir, { recursive: true });
  server = await startServer();
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.close();
});

async function openDemo(context) {
  const page = await context.newPage();
  await page.setViewportSize({ width: 1280, height: 1000 });
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(`pageerror: ${e.message}`));
  await page.goto(`${server.url}www/index.html`);
  await page.waitForSelector('body[data-ready="true"][data-stories-ready="true"]', { timeout: 10000 });
  return page;
}

async function screenshot(page, name) {
  const file = path.join(shotsDir, `demo-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`screenshot: ${file}`);
}

const role = (page) => page.getAttribute('#primary-role', 'data-role');
const roles = (pages) => Promise.all(pages.map(role));
const number = async (page, sel) => Number(await page.textContent(sel));

/** Poll `probe` until `done(value)` or `timeout` ms; returns the last value. */
async function waitUntil(probe, done, timeout) {
  const end = Date.now() + timeout;
  let value = await probe();
  while (!done(value) && Date.now() < end) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    value = await probe();
  }
  return value;
}

test('three tabs: exactly one is PRIMARY, and closing it hands the role to another within 2 s', async () => {
  const context = await browser.newContext();
  try {
    const pages = [await openDemo(context), await openDemo(context), await openDemo(context)];
    const settled = await waitUntil(() => roles(pages), (r) => r.filter((x) => x === 'primary').length === 1, 3000);
    assert.deepEqual(settled.filter((x) => x === 'primary').length, 1, `roles: ${settled}`);
    const primaryIndex = settled.indexOf('primary');
    const primary = pages[primaryIndex];
    assert.equal(await primary.textContent('#primary-role'), 'PRIMARY');
    for (const [i, page] of pages.entries()) {
      if (i !== primaryIndex) assert.equal(await page.textContent('#primary-role'), 'standby (waiting)');
    }
    // The whole origin's held table shows the primary lock held by the primary tab, in every tab.
    const standbyPage = pages[(primaryIndex + 1) % 3];
    await standbyPage.waitForFunction(() => /weblocks-demo:primary/.test(document.querySelector('#held').textContent));
    assert.match(await standbyPage.textContent('#pending'), /weblocks-demo:primary/, 'the standby tabs wait');
    // The election runs on weblocks, not on the browser's native lock manager (present on localhost).
    const native = await primary.evaluate(async () => (await navigator.locks.query()).held.map((l) => l.name));
    assert.ok(!native.includes('weblocks-demo:primary'), `native navigator.locks holds: ${native}`);
    await screenshot(primary, 'primary');
    await screenshot(standbyPage, 'standby');

    await primary.close();
    const rest = pages.filter((p) => p !== primary);
    const started = Date.now();
    const after = await waitUntil(() => roles(rest), (r) => r.includes('primary'), 2000);
    const tookMs = Date.now() - started;
    assert.equal(after.filter((x) => x === 'primary').length, 1, `after closing the primary: ${after}`);
    console.log(`takeover observed after ${tookMs} ms`);
    await screenshot(rest[after.indexOf('primary')], 'takeover');
    for (const page of rest) assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test('two tabs bursting IndexedDB writes together: the counter equals the sum of their writes', async () => {
  const context = await browser.newContext();
  try {
    const a = await openDemo(context);
    const b = await openDemo(context);
    assert.equal(await number(a, '#idb-counter'), 0, 'a fresh context starts at 0');
    await Promise.all([a.click('#idb-burst'), b.click('#idb-burst')]);
    // While the bursts run, the writers queue on the one lock: some tab shows it pending.
    await a.waitForFunction(() => /weblocks-demo:idb-writer/.test(document.querySelector('#pending').textContent), null, { timeout: 5000 });
    await screenshot(a, 'idb-burst-running');
    for (const page of [a, b]) {
      await page.waitForFunction(() => document.querySelector('#idb-status').textContent === 'done (50)', null, { timeout: 20000 });
    }
    const writes = (await number(a, '#idb-writes')) + (await number(b, '#idb-writes'));
    assert.equal(writes, 100);
    const counter = await a.evaluate(() => new Promise((resolve, reject) => {
      const open = indexedDB.open('weblocks-demo', 1);
      open.onerror = () => reject(open.error);
      open.onsuccess = () => {
        const get = open.result.transaction('counter').objectStore('counter').get('value');
        get.onsuccess = () => { resolve(get.result); open.result.close(); };
        get.onerror = () => reject(get.error);
      };
    }));
    assert.equal(counter, writes, 'no lost update');
    await b.waitForFunction((n) => document.querySelector('#idb-counter').textContent === String(n), writes, { timeout: 2000 });
    await screenshot(b, 'idb-burst-done');
    assert.deepEqual([...a.errors, ...b.errors], []);
  } finally {
    await context.close();
  }
});

test('a lock requested by hand in tab A shows in tab B\'s held table, and leaves it on release', async () => {
  const context = await browser.newContext();
  try {
    const a = await openDemo(context);
    const b = await openDemo(context);
    await a.fill('#request-form input[name=name]', 'printer');
    await a.click('#request-btn');
    await a.waitForSelector('#mine .badge.held');
    const heldRow = () => b.evaluate(() => [...document.querySelectorAll('#held tbody tr')]
      .map((tr) => [...tr.cells].map((td) => td.textContent))
      .find((cells) => cells[0] === 'printer') ?? null);
    const row = await waitUntil(heldRow, (r) => r !== null, 3000);
    assert.ok(row, 'tab B sees printer held');
    assert.equal(row[1], 'exclusive');
    const aClient = await a.textContent('#client-id');
    assert.equal(row[2], aClient.slice(0, 8), 'held by tab A, not "this tab"');
    await screenshot(b, 'held-by-other-tab');
    await a.click('#mine button:not([hidden])');
    const gone = await waitUntil(heldRow, (r) => r === null, 3000);
    assert.equal(gone, null, 'released in A, gone from B');
    assert.deepEqual([...a.errors, ...b.errors], []);
  } finally {
    await context.close();
  }
});
