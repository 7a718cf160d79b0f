// What the platform does with the IndexedDB transactions of a worker that ends while it writes, in each
// engine: the fact behind a limit in the README. A worker keeps read/write transactions on one store in flight
// and is ended, by its page's `terminate()` or by its own `close()`; then its page reads the store.
// - Chromium and Firefox end the worker's transactions with it: the page's read completes, every time.
// - WebKitGTK does not: within a few tries the page's read (a read-only transaction) never completes, and no
//   later one on that store does. weblocks' log (the transport it uses in WebKit) and its leases are kept in
//   such stores, so there a worker ended in the middle of a write stops the origin's locks or leases: safely
//   (no second holder), but for good. The README says so; this test fails once WebKit ends them too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { eachEngine } from './fixtures/evidence_engines.mjs';

const PAGE = 'tests/e2e/fixtures/worker_end.html';
// Up to 40 ends, at delays spread over a few tens of milliseconds: in WebKit one in a few leaves a transaction.
const DELAYS_MS = Array.from({ length: 40 }, (_, i) => 3 + ((i * 7) % 50));

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
        await Promise.race([tab.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 5000))]);
      }
    });
  }
});
