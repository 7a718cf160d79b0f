// Leases over a network that misbehaves, in Chromium, Firefox and WebKit: the page's leases
// (`createLeases(serverLeaseStore(...))`) talk to the real lease service (SQLite) through a TCP proxy on
// loopback (tests/e2e/lease_service.mjs `faultyProxy`) that drops, stalls or cuts requests, or falls
// silent altogether. Each case prints its figures (`#` lines):
// - one dropped extension: keepAlive tries again and the lease lives on, onLost never called;
// - offline past the ttl: onLost (Expired, by the page's deadline) comes before the service's expiry, and
//   checkLock says Expired at once without the network;
// - a lost tryLock answer: the retry (same request id) gets the lease the service granted, not
//   AlreadyLocked, and only one lease was made;
// - a take-over during an edit, the page not hearing the change stream: the form turns read-only on the
//   next extension (Revoked) and offers the unsaved text, which is kept as a draft; bob's save stands;
// - and the IndexedDB store (no network) under the same deadline.
// The engines' drivers are the bench's (bench/lib/{chromium,firefox,webkit}.mjs): one tab interface.
// The page's origin is http://127.0.0.1 (leases use no navigator.locks: nothing native to remove).
// Needs the build (`npm run build`).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as chromium from '../../../bench/lib/chromium.mjs';
import * as firefox from '../../../bench/lib/firefox.mjs';
import * as webkit from '../../../bench/lib/webkit.mjs';
import { startServer } from '../server.mjs';
import { faultyProxy, leaseClient, mintToken, newSecret, startLeaseService, temporarySqlite } from '../lease_service.mjs';
import { devLeaseBackend } from '../../../scripts/dev_lease_backend.mjs';

const secret = newSecret();
let db;
let web;
let service;
let proxy;

before(async () => {
  db = temporarySqlite();
  let backend = async () => false;
  // A blank page of the origin for the scripted cases, and the demo's dev backend for the edit form.
  const blank = (req, res) => {
    if (req.url !== '/net.html') return false;
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>leases through a faulty network</title>');
    return true;
  };
  web = await startServer({ handle: async (req, res) => blank(req, res) || backend(req, res) });
  service = await startLeaseService({ database: db.url, secret, origins: [web.url.replace(/\/$/, '')] });
  backend = devLeaseBackend({ secret, serviceUrl: () => service.url });
  proxy = await faultyProxy(Number(new URL(service.url).port));
});

after(async () => {
  await proxy?.close();
  await web?.close();
  await service?.stop();
  db?.remove();
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const direct = (sub, perms = []) => leaseClient(service.url, mintToken(secret, { sub, name: sub, perms }));

/** In the page: leases over the proxy as `sub`, kept on `window.net` with what happens to them. */
async function pageLeases({ proxyUrl, token }) {
  const { createLeases } = await import('/js/leases.js');
  const { serverLeaseStore } = await import('/js/lease_server_store.js');
  window.net = { leases: createLeases(serverLeaseStore({ url: proxyUrl, token })), lost: [] };
  return true;
}

/** In the page: take a lease for `ttlMs` and keep it alive every `everyMs`; onLost is recorded. */
async function takeAndKeep({ type, id, ttlMs, everyMs }) {
  const { leases, lost } = window.net;
  const lockId = await leases.tryLock(type, id, { ttlMs });
  window.net.stop = leases.keepAlive(lockId, {
    everyMs,
    onLost: (e) => lost.push({ at: Date.now(), code: e.code, deadline: e.deadline === true, message: e.message }),
  });
  window.net.lockId = lockId;
  return lockId;
}

/** In the page: wait (up to `ms`) for onLost; then checkLock, timed, which must not need the network. */
async function lostThenCheck({ ms }) {
  const { leases, lost, lockId } = window.net;
  const until = Date.now() + ms;
  while (lost.length === 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
  const started = performance.now();
  const check = await leases.checkLock(lockId).then(
    () => ({ code: 'live' }),
    (e) => ({ code: e.code, deadline: e.deadline === true }),
  );
  return { lost, check, checkMs: performance.now() - started };
}

const engines = [chromium, firefox, webkit];

for (const engine of engines) {
  describe(`${engine.name}: leases through a faulty network`, () => {
    let browser;
    let tab;
    let keyCount = 0;
    const key = () => `${engine.name}-${++keyCount}`;

    before(async () => {
      browser = await engine.launch();
      tab = await browser.newTab(`${web.url}net.html`);
    });
    after(async () => {
      await tab?.close().catch(() => {});
      await browser?.close();
    });

    /** A fresh page state: leases as `sub` over the proxy. */
    const leasesAs = (sub) => tab.evaluate(pageLeases, { proxyUrl: proxy.url, token: mintToken(secret, { sub, name: sub }) });

    test('one dropped extension: keepAlive tries again, the lease lives on, onLost is never called', async () => {
      await leasesAs('alice');
      const id = key();
      const lockId = await tab.evaluate(takeAndKeep, { type: 'net.Article', id, ttlMs: 4000, everyMs: 300 });
      await sleep(700);
      const from = proxy.log.length;
      proxy.fail('POST /v1/extendLockExpiration', 'drop');
      await sleep(2500);
      const seen = proxy.log.slice(from).filter((r) => r.line.startsWith('POST /v1/extendLockExpiration'));
      const dropped = seen.findIndex((r) => r.fate === 'drop');
      assert.ok(dropped >= 0, `an extension was dropped: ${JSON.stringify(seen)}`);
      const retried = seen.slice(dropped + 1).find((r) => r.fate === 'pass');
      assert.ok(retried, 'and tried again');
      console.log(`# ${engine.name} dropped extension: tried again ${retried.at - seen[dropped].at} ms later; ${seen.length - dropped - 1} extensions since`);
      const { lost } = await tab.evaluate(() => ({ lost: window.net.lost }));
      assert.deepEqual(lost, [], 'onLost was not called');
      const checked = await direct('alice').checkLock(lockId);
      assert.equal(checked.status, 200, JSON.stringify(checked.body));
      // 3.2 s or more since the grant: unextended, the 4 s lease would have under 0.8 s left.
      assert.ok(checked.body.expiresAt - checked.body.now > 1000, `the lease kept its time: ${checked.body.expiresAt - checked.body.now} ms left`);
      await tab.evaluate(() => window.net.stop());
      await direct('alice').releaseLock(lockId);
    });

    test('offline past the ttl: onLost (by the deadline) before the service’s expiry; checkLock says Expired without the network', async () => {
      await leasesAs('alice');
      const id = key();
      const lockId = await tab.evaluate(takeAndKeep, { type: 'net.Article', id, ttlMs: 2000, everyMs: 400 });
      await sleep(500);
      proxy.offline();
      const offlineAt = Date.now();
      let outcome;
      try {
        outcome = await tab.evaluate(lostThenCheck, { ms: 5000 });
      } finally {
        proxy.online();
      }
      const [lost] = outcome.lost;
      assert.ok(lost, 'onLost was called');
      assert.deepEqual([lost.code, lost.deadline], ['Expired', true], lost.message);
      // The service's expiry of that lease, asked directly.
      const after = await direct('alice').checkLock(lockId);
      const serviceExpiry = after.body.error?.expiresAt ?? after.body.expiresAt;
      console.log(
        `# ${engine.name} offline: onLost ${lost.at - offlineAt} ms after going offline, ${serviceExpiry - lost.at} ms before the service's expiry; ` +
          `checkLock then said ${outcome.check.code} in ${outcome.checkMs.toFixed(1)} ms`,
      );
      assert.ok(lost.at < serviceExpiry, `onLost at ${lost.at}, the service expires the lease at ${serviceExpiry}`);
      assert.deepEqual(outcome.check, { code: 'Expired', deadline: true });
      assert.ok(outcome.checkMs < 200, 'without asking the (silent) service');
      // The deadline holds for good: the network back, the page still says Expired.
      const later = await tab.evaluate(async () => window.net.leases.checkLock(window.net.lockId).then(() => 'live', (e) => e.code));
      assert.equal(later, 'Expired');
    });

    test('a lost tryLock answer: the retry gets the lease the service granted, not AlreadyLocked', async () => {
      await leasesAs('alice');
      const id = key();
      const from = proxy.log.length;
      proxy.fail('POST /v1/tryLock', 'cut');
      const { lockId, tookMs } = await tab.evaluate(
        async ({ id }) => {
          const started = performance.now();
          const lockId = await window.net.leases.tryLock('net.Article', id, { ttlMs: 5000 });
          return { lockId, tookMs: performance.now() - started };
        },
        { id },
      );
      const tries = proxy.log.slice(from).filter((r) => r.line.startsWith('POST /v1/tryLock'));
      assert.deepEqual(tries.map((r) => r.fate).slice(0, 2), ['cut', 'pass'], JSON.stringify(tries));
      console.log(`# ${engine.name} lost tryLock answer: granted after ${tries.length} tries in ${Math.round(tookMs)} ms`);
      const checked = await direct('alice').checkLock(lockId);
      assert.equal(checked.status, 200, 'the lockId the page got holds the lease');
      assert.equal(checked.body.fence, 1, 'one lease was granted, not two');
      const bob = await direct('bob').tryLock('net.Article', id);
      assert.deepEqual([bob.status, bob.body.error.holder?.name], [409, 'alice'], 'others are still told who holds it');
      await direct('alice').releaseLock(lockId);
    });

    test('the IndexedDB store keeps the same deadline: checkLock says Expired a margin before the store would, keepAlive reports it', async () => {
      const outcome = await tab.evaluate(async (id) => {
        const { leases } = await import('/js/leases_entry.js');
        const lockId = await leases.tryLock('net.Local', id, { ttlMs: 3000 });
        const { expiresAt } = await leases.checkLock(lockId);
        // On this page's clock, the store's own: past the deadline (253 ms before the expiry), not at the expiry.
        while (Date.now() < expiresAt - 120);
        const refusal = await leases.checkLock(lockId).then(() => null, (e) => ({ code: e.code, deadline: e.deadline === true, at: Date.now() }));
        const lost = await new Promise((resolve) => leases.keepAlive(lockId, { everyMs: 50, onLost: (e) => resolve([e.code, e.deadline === true]) }));
        await leases.releaseLock(lockId);
        return { expiresAt, refusal, lost };
      }, key());
      assert.deepEqual([outcome.refusal?.code, outcome.refusal?.deadline], ['Expired', true]);
      assert.ok(outcome.refusal.at < outcome.expiresAt, `refused ${outcome.expiresAt - outcome.refusal.at} ms before the store's expiry`);
      assert.deepEqual(outcome.lost, ['Expired', true]);
    });

    test('a take-over during an edit: the form turns read-only and keeps the unsaved text as a draft; bob’s save stands', async () => {
      const article = `${engine.name.length}${keyCount++}`;
      // alice's page cannot hear the change stream: she learns of the take-over from her next extension.
      proxy.fail('GET /v1/events', 'stall', Infinity);
      const form = await browser.newTab(`${web.url}www/edit-form.html?user=alice&article=${article}&ttl=6000&every=300&service=${encodeURIComponent(proxy.url)}`);
      const state = () => form.evaluate(() => document.getElementById('status').dataset.state);
      const waitFor = async (wanted, ms = 10_000) => {
        const until = Date.now() + ms;
        while ((await state()) !== wanted) {
          if (Date.now() > until) {
            assert.fail(`state ${await state()}, not ${wanted}: ${await form.evaluate(() => document.getElementById('status').textContent)}`);
          }
          await sleep(50);
        }
      };
      try {
        await waitFor('editing');
        await form.evaluate(() => {
          document.getElementById('title').value = 'alice’s title';
          document.getElementById('body').value = 'alice typed this and never saved it';
        });
        // bob takes over (directly at the service) and saves his version through the backend.
        const bobToken = mintToken(secret, { sub: 'dev-bob', name: 'bob', perms: ['takeover'] });
        const taken = await leaseClient(service.url, bobToken).takeOver('domain.Article', article, 60_000);
        assert.equal(taken.status, 200, JSON.stringify(taken.body));
        const takenAt = Date.now();
        const saved = await fetch(`${web.url}dev/articles/${article}`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${bobToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ title: 'bob’s title', body: 'bob’s version', lockId: taken.body.lockId }),
        });
        assert.equal(saved.status, 200);
        await waitFor('lost', 5000);
        const noticedMs = Date.now() - takenAt;
        const shown = await form.evaluate(() => ({
          status: document.getElementById('status').textContent,
          readOnly: document.getElementById('fields').disabled,
          draftShown: !document.getElementById('draft').hidden,
          draft: [document.getElementById('draft-title').value, document.getElementById('draft-body').value],
        }));
        console.log(`# ${engine.name} take-over during an edit: the form read-only ${noticedMs} ms after it (no stream)`);
        assert.match(shown.status, /Your lease was lost \(Revoked\)/);
        assert.equal(shown.readOnly, true, 'the form is read-only');
        assert.equal(shown.draftShown, true, 'the unsaved text is offered');
        assert.deepEqual(shown.draft, ['alice’s title', 'alice typed this and never saved it']);
        await form.evaluate(() => document.getElementById('keep-draft').click());
        const kept = await form.evaluate((article) => JSON.parse(localStorage.getItem(`weblocks-demo:draft:alice:${article}`)), article);
        assert.deepEqual([kept.title, kept.body], ['alice’s title', 'alice typed this and never saved it']);
        const stored = await (await fetch(`${web.url}dev/articles/${article}`)).json();
        assert.deepEqual([stored.title, stored.body, stored.savedBy], ['bob’s title', 'bob’s version', 'bob'], 'the winner’s record stands');
        await leaseClient(service.url, bobToken).releaseLock(taken.body.lockId);
      } finally {
        proxy.heal();
        await form.close().catch(() => {});
      }
    });
  });
}
