// What the platform does with the IndexedDB transactions of a worker that ends while it writes, in each
// engine: the fact behind a limit in the README. A worker keeps read/write transactions on one store in flight
// and is ended, by its page's `terminate()` or by its own `close()`; then its page reads the store.
// - Chromium and Firefox end the worker's transactions with it: the page's read completes, every time.
// - WebKitGTK does not: within a few tries the page's read (a read-only transaction) never completes, and no
//   later one on that store does, for as long as the page lives. weblocks' log (the transport it uses in
//   WebKit) and its leases are kept in such stores, so there a worker ended in the middle of a write stops
//   the origin's locks or leases: safely (no second holder), until the origin's pages are closed; a page
//   opened some seconds after that reads the store again (the browser ends the process the worker ran in,
//   and with it the transaction). The README says so; this test fails once WebKit ends them too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { eachEngine } from '../fixtures/evidence_engines.mjs';

const PAGE = 'tests/e2e/fixtures/worker_end.html';
// Up to 40 ends, at delays spread over a few tens of milliseconds: in WebKit one in a few leaves a transaction.
const DELAYS_MS = Array.from({ length: 40 }, (_, i) => 3 + ((i * 7) % 50));
// After the page closed: a new page of the origin tries to read the store every 10 s, at most 6 times (each
// page is closed before the next wait, so that no page of the origin keeps the worker's process alive).
const REOPEN_WAIT_MS = 10_000;
const REOPEN_TRIES = 6;

/** Closes `tab`, waiting at most 5 s (a page with a stuck transaction may take long to close). */
const closeTab = (tab) => Promise.race([tab.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 5000))]);

eachEngine((engine, env) => {
  for (const how of ['terminate', 'close']) {
    test(`${engine.name}: a worker ended by ${how === 'close' ? 'its own close()' : "its page's terminate()"} while it writes to IndexedDB: ${engine.name === 'WebKit' ? 'its transactions stay, and the store stays locked' : 'its transactions end with it'}`, async () => {
      const tab = await env.browser.newTab(`${env.origin.url}${PAGE}?${how}`);
      try {
        const results = [];
        for (const ms of DELAYS_MS) {
          results.push(await tab.evaluate(([delay, end]) => window.endWhileWriting(delay, end), [ms, how]));
          if (results.at(-1) === 'stuck') break;
        }
        if (engine.name === 'WebKit') assert.equal(results.at(-1), 'stuck', `the page read the store after each of ${results.length} ends`);
        else assert.deepEqual(results, DELAYS_MS.map(() => 'read'));
      } finally {
        await closeTab(tab);
      }
      if (engine.name !== 'WebKit') return;
      // With no page of the origin left, a page opened some seconds later reads the store.
      const closedAt = Date.now();
      let after;
      for (let wait = 0; after !== 'read' && wait < REOPEN_TRIES; wait++) {
        await new Promise((resolve) => setTimeout(resolve, REOPEN_WAIT_MS));
        const fresh = await env.browser.newTab(`${env.origin.url}${PAGE}`);
        after = await fresh.evaluate((database) => window.readStore(database), `worker-end-${how}`);
        await closeTab(fresh);
      }
      assert.equal(after, 'read', `the store still locked ${Math.round((Date.now() - closedAt) / 1000)} s after the page closed`);
      console.log(`# webkit: the store was read again by a page opened ${Math.round((Date.now() - closedAt) / 1000)} s after the worker's page closed`);
    });
  }
});
