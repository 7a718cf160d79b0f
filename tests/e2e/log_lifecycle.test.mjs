// The IndexedDB log carried by BroadcastChannel (docs/PROTOCOL.md §12) over its life, in Chromium: its
// database deleted and made anew while frames of the old one are still about (a page's logout code that
// wipes every database), and contexts that come and go for many memberships, after which the log must still
// be short. The fixture's `?transport=carried` takes the log even where the channel gives one order, on a
// scope of its own; the native navigator.locks is removed. Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { shareServerAndChromium } from './browser.mjs';
import { call, expectEvent, expectNoEvent, openTab, untilSnapshot, withOrigin as withOriginOf } from './fixtures/xctx_harness.mjs';

let server;
let browser;
shareServerAndChromium((s, b) => {
  server = s;
  browser = b;
});

const withOrigin = (body) => withOriginOf(browser, body);

/** The carrier's channel and the log's database of a scope. */
const channelOf = (scope) => `weblocks:${scope}`;
const databaseOf = (scope) => `weblocks-log:weblocks:${scope}`;

/** In `page`: `{ entries, floor, identity }` of the log of `scope` (the floor is meta's greatest key). */
function inspectLog(page, scope) {
  return page.evaluate(
    (name) =>
      new Promise((resolve, reject) => {
        const open = indexedDB.open(name);
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const db = open.result;
          const transaction = db.transaction(['log', 'meta']);
          const count = transaction.objectStore('log').count();
          const meta = transaction.objectStore('meta').openCursor(null, 'prev');
          transaction.oncomplete = () => {
            db.close();
            const last = meta.result;
            resolve({ entries: count.result, floor: last ? last.key : 0, identity: last ? last.value : undefined });
          };
          transaction.onabort = () => reject(transaction.error);
        };
      }),
    databaseOf(scope),
  );
}

/** `n` exclusive lock cycles on `name` in `target`, one after the other (each one request and one release). */
async function lockCycles(target, name, n, prefix) {
  for (let k = 0; k < n; k++) {
    await call(target, 'request', `${prefix}${k}`, name, { holdMs: 0 });
    await expectEvent(target, `${prefix}${k}`, 'release');
  }
}

test("carried log: the database deleted and made anew while frames of the old log are replayed; one lock manager after", async () => {
  const scope = 'remade';
  const query = { transport: 'carried', scope };
  await withOrigin(async (context) => {
    const [a, b] = await Promise.all(['a', 'b'].map((label) => openTab(context, server, label, query)));
    // Records every frame on the carrier (a channel object of the page's own; weblocks's are others).
    await a.evaluate((name) => {
      window.frames = [];
      window.recorder = new BroadcastChannel(name);
      window.recorder.onmessage = (event) => window.frames.push(event.data);
    }, channelOf(scope));
    // The old log: enough entries that its keys run well past what the new log will have.
    for (let k = 0; k < 10; k++) {
      await lockCycles(a, 'warm', 1, `a${k}-`);
      await lockCycles(b, 'warm', 1, `b${k}-`);
    }
    const old = await inspectLog(a, scope);
    assert.ok(Number.isInteger(old.identity) && old.identity > 0, `the log has an identity: ${JSON.stringify(old)}`);
    // b holds x; a, idle, makes way and leaves the protocol.
    await call(b, 'request', 'x1', 'x');
    await expectEvent(b, 'x1', 'granted');
    // Logout code deletes every database: both contexts' connections close, and b steps out (its lock is
    // reported lost) and is made to request again on the new database.
    await a.evaluate(
      (name) =>
        new Promise((resolve, reject) => {
          const request = indexedDB.deleteDatabase(name);
          request.onsuccess = resolve;
          request.onerror = () => reject(request.error);
        }),
      databaseOf(scope),
    );
    const lost = await expectEvent(b, 'x1', 'rejected');
    assert.equal(lost.error, 'AbortError');
    await call(b, 'request', 'x2', 'x');
    await expectEvent(b, 'x2', 'granted');
    const remade = await inspectLog(a, scope);
    assert.ok(remade.identity > 0 && remade.identity !== old.identity, `a new identity: ${JSON.stringify({ old, remade })}`);
    const frames = await a.evaluate(() => window.frames.length);
    assert.ok(frames > remade.entries + 10, `old frames with keys past the new log's: ${frames} frames, ${remade.entries} entries`);
    // Every frame of the old log comes again, late, now that b follows the new one: a frame names its log,
    // so b takes none of them in place of the new log's entries of their keys.
    await a.evaluate(() => {
      for (const frame of window.frames) window.recorder.postMessage(frame);
    });
    // a joins the new log: it must find x held by b, whatever frames of the old log went round.
    await call(a, 'request', 'x3', 'x', { ifAvailable: true });
    await expectEvent(a, 'x3', 'null');
    await call(a, 'request', 'x4', 'x');
    const seen = await untilSnapshot(b, (s) => s.pending.some((p) => p.clientId === a.clientId), "a's request in b's queue");
    assert.deepEqual(
      seen.held.map((l) => l.clientId),
      [b.clientId],
    );
    await call(b, 'release', 'x2');
    await expectEvent(a, 'x4', 'granted');
    await call(a, 'release', 'x4');
  });
});

test('carried log: 150 memberships that come and go beside a busy context leave a short log', async () => {
  const scope = 'churn';
  const query = { transport: 'carried', scope };
  await withOrigin(async (context) => {
    const [busy, v1, v2] = await Promise.all(['busy', 'v1', 'v2'].map((label) => openTab(context, server, label, query)));
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
    const [a, b] = await Promise.all(['a', 'b'].map((label) => openTab(context, server, label, query)));
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
