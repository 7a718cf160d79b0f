// The IndexedDB log carried by BroadcastChannel (docs/PROTOCOL.md §12) over its life, in Chromium: its
// database deleted and made anew while frames of the old one are still about (a page's logout code that
// wipes every database), and contexts that come and go for many memberships, after which the log must still
// be short. The fixture's `?transport=carried` takes the log even where the channel gives one order, on a
// scope of its own; the native navigator.locks is removed. Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { shareServerAndChromium } from '../browser.mjs';
import { call, expectEvent, expectNoEvent, openTab, untilSnapshot, withOrigin as withOriginOf } from '../fixtures/xctx_harness.mjs';
import { checkRemadeLog, inspectLog } from '../fixtures/log_lifecycle_run.mjs';

const shared = shareServerAndChromium();

const withOrigin = (body) => withOriginOf(shared.browser, body);

test("carried log: the database deleted and made anew while frames of the old log are replayed; one lock manager after", async () => {
  const scope = 'remade';
  const query = { transport: 'carried', scope };
  await withOrigin(async (context) => {
    const [a, b] = await Promise.all(['a', 'b'].map((label) => openTab(context, shared.server, label, query)));
    await checkRemadeLog([a, b], scope);
  });
});

test('carried log: 150 memberships that come and go beside a busy context leave a short log', async () => {
  const scope = 'churn';
  const query = { transport: 'carried', scope };
  await withOrigin(async (context) => {
    const [busy, v1, v2] = await Promise.all(['busy', 'v1', 'v2'].map((label) => openTab(context, shared.server, label, query)));
    // The busy context holds y for a moment every few ms for the whole test; each visitor takes x once and
    // goes idle: on the busy one's next request it makes way and leaves the protocol, and joins again for
    // its next lock. Every visit is a membership of its own, none lives long.
    await busy.evaluate(() => {
      window.churning = true;
      window.churned = (async () => {
        let k = 0;
        while (window.churning) {
          await self.agent.request(`y${k}`, 'y', { holdMs: 1 });
          await self.agent.waitFor(`y${k}`, 'release');
          k++;
          await new Promise((resolve) => setTimeout(resolve, 3));
        }
        return k;
      })();
    });
    let visits = 0;
    for (let k = 0; k < 75; k++) {
      for (const visitor of [v1, v2]) {
        await call(visitor, 'request', `v${k}`, 'x', { holdMs: 0 });
        await expectEvent(visitor, `v${k}`, 'release');
        visits++;
      }
    }
    const cycles = await busy.evaluate(() => {
      window.churning = false;
      return window.churned;
    });
    const log = await inspectLog(busy, scope);
    console.log(`# carried log: ${visits} visits beside ${cycles} busy cycles: ${log.entries} entries left, floor ${log.floor}`);
    assert.ok(log.floor > 0, `trimmed: ${JSON.stringify(log)}`);
    assert.ok(log.entries < 500, `a short log: ${JSON.stringify(log)}`);
  });
});

test('carried log: an append that finds the quota full is tried again later, and its context keeps its locks', async () => {
  const scope = 'quota';
  const query = { transport: 'carried', scope };
  await withOrigin(async (context) => {
    const [a, b] = await Promise.all(['a', 'b'].map((label) => openTab(context, shared.server, label, query)));
    await call(a, 'request', 'x', 'x');
    await expectEvent(a, 'x', 'granted');
    await call(b, 'request', 'z', 'z');
    await expectEvent(b, 'z', 'granted');
    await untilSnapshot(a, (s) => s.held.length === 2, 'both members hold');
    // a's next three appends abort as a full disk makes them: QuotaExceededError, once the transaction is
    // asked to commit.
    const attempts = await a.evaluate(() => {
      const add = IDBObjectStore.prototype.add;
      const commit = IDBTransaction.prototype.commit;
      window.appends = 0;
      let failing = 3;
      IDBObjectStore.prototype.add = function (...args) {
        window.appends++;
        if (failing-- > 0) this.transaction.full = true;
        return add.apply(this, args);
      };
      IDBTransaction.prototype.commit = function () {
        if (!this.full) return commit.call(this);
        Object.defineProperty(this, 'error', { value: new DOMException('the disk is full', 'QuotaExceededError') });
        return this.abort();
      };
      return window.appends;
    });
    assert.equal(attempts, 0);
    await call(a, 'request', 'y', 'y');
    await expectEvent(a, 'y', 'granted');
    assert.equal(await a.evaluate(() => window.appends), 4, 'the one append, tried four times');
    await expectNoEvent(a, 'x', 'rejected');
    const seen = await untilSnapshot(b, (s) => s.held.length === 3, "a's two locks and b's");
    assert.deepEqual(seen.held.map((l) => `${l.name}/${l.clientId}`).sort(), [`x/${a.clientId}`, `y/${a.clientId}`, `z/${b.clientId}`].sort());
  });
});
