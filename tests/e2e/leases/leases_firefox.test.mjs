// Leases in Firefox (Debian's firefox-esr through geckodriver, plain W3C WebDriver over fetch: playwright
// cannot drive it). Real tabs of one profile, so one origin and one IndexedDB: the tryLock race, survival
// across reload, expiry with a stale lockId, and the demo's story. Hidden tabs' timers are throttled here
// (to ≥ 1 s), unlike in the Chromium tests, so the ttls are longer. Needs the build (`npm run build`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { startServer } from '../server.mjs';

const GECKODRIVER = process.env.GECKODRIVER ?? path.join(os.homedir(), '.cargo', 'bin', 'geckodriver');
const FIREFOX = process.env.FIREFOX_PATH ?? '/usr/bin/firefox-esr';
const RACE_ROUNDS = 300;

/** A minimal W3C WebDriver session on a private geckodriver (ports chosen by the system). */
class FirefoxSession {
  static async start() {
    const driver = spawn(GECKODRIVER, ['--port', '0', '--websocket-port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const base = await new Promise((resolve, reject) => {
      let out = '';
      const onData = (chunk) => {
        out += chunk;
        const m = /Listening on (\S+:\d+)/.exec(out);
        if (m) resolve(`http://${m[1]}`);
      };
      driver.stdout.on('data', onData);
      driver.stderr.on('data', onData);
      driver.once('exit', (code) => reject(new Error(`geckodriver exited (${code}): ${out}`)));
    });
    const session = new FirefoxSession(driver, base);
    const created = await session.#request('POST', '/session', {
      capabilities: {
        alwaysMatch: {
          browserName: 'firefox',
          'moz:firefoxOptions': {
            binary: FIREFOX,
            args: ['-headless'],
            prefs: {
              'app.update.enabled': false,
              'browser.shell.checkDefaultBrowser': false,
              'datareporting.policy.dataSubmissionEnabled': false,
              'network.captive-portal-service.enabled': false,
              'network.connectivity-service.enabled': false,
              'toolkit.telemetry.enabled': false,
              'extensions.update.enabled': false,
              'browser.safebrowsing.malware.enabled': false,
              'browser.safebrowsing.phishing.enabled': false,
            },
          },
        },
      },
    });
    session.id = created.sessionId;
    await session.command('POST', '/timeouts', { script: 120_000, pageLoad: 30_000 });
    return session;
  }

  constructor(driver, base) {
    this.driver = driver;
    this.base = base;
  }

  async #request(method, url, body) {
    const response = await fetch(this.base + url, {
      method,
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const { value } = await response.json();
    if (!response.ok) throw new Error(`WebDriver ${method} ${url}: ${value?.error}: ${value?.message}`);
    return value;
  }

  command(method, url, body) {
    return this.#request(method, `/session/${this.id}${url}`, body);
  }

  /** Run `fn(...args)` in the current tab and resolve with its (awaited) result. */
  run(fn, ...args) {
    return this.command('POST', '/execute/sync', { script: `return (${fn}).apply(null, arguments);`, args });
  }

  goto(url) {
    return this.command('POST', '/url', { url });
  }

  /** Open a new tab, switch to it and return its handle. */
  async newTab() {
    const { handle } = await this.command('POST', '/window/new', { type: 'tab' });
    await this.switchTo(handle);
    return handle;
  }

  switchTo(handle) {
    return this.command('POST', '/window', { handle });
  }

  currentTab() {
    return this.command('GET', '/window');
  }

  async quit() {
    try {
      if (this.id) await this.command('DELETE', '');
    } finally {
      this.driver.kill();
    }
  }
}

let server;
let firefox;

before(async () => {
  server = await startServer();
  firefox = await FirefoxSession.start();
});

after(async () => {
  await firefox?.quit();
  await server?.close();
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const FIXTURE = () => server.url + 'tests/e2e/fixtures/leases.html';

/** Load the fixture in the current tab and wait for the ESM entry. */
async function loadFixture() {
  await firefox.goto(FIXTURE());
  assert.equal(await firefox.run(() => window.fixtureReady), true);
}

/** `leases[method](...args)` in the current tab: `{ ok }` or `{ error: { code, ... } }`. */
const call = (method, ...args) => firefox.run((m, a) => window.leaseCall(m, ...a), method, args);

/** Poll `fn` in the current tab until it returns something other than null (or time out). */
async function until(fn, timeoutMs = 10_000, ...args) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await firefox.run(fn, ...args);
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${fn}`);
    await sleep(100);
  }
}

/** Use a fresh key space per test: the tabs of the session share one IndexedDB for the whole file. */
let testNumber = 0;

test(`Firefox: two tabs race tryLock on the same (type, id) ${RACE_ROUNDS} times: exactly one winner each round`, async () => {
  const type = `race-${++testNumber}`;
  const tabs = [await firefox.currentTab(), await firefox.newTab()];
  for (const tab of tabs) {
    await firefox.switchTo(tab);
    await loadFixture();
    await firefox.run(
      async (rounds, type) => {
        const { joinRace } = await import('/tests/e2e/fixtures/leases_race.js');
        window.runRace = joinRace(window.weblocks.leases, { racers: 2, rounds, type, channel: type });
        window.raceResult = null;
      },
      RACE_ROUNDS,
      type,
    );
  }
  const started = Date.now();
  for (const tab of tabs) {
    await firefox.switchTo(tab);
    await firefox.run(() => void window.runRace().then((r) => (window.raceResult = r)));
  }
  const results = [];
  for (const tab of tabs) {
    await firefox.switchTo(tab);
    results.push(await until(() => window.raceResult, 120_000));
  }
  const wins = [0, 0];
  for (let round = 0; round < RACE_ROUNDS; round++) {
    const won = results.map((r) => r[round].includes('/'));
    won.forEach((w, i) => (wins[i] += w));
    assert.equal(won.filter(Boolean).length, 1, `round ${round}: ${results.map((r) => r[round])}`);
    for (const r of results) assert.ok(r[round].includes('/') || r[round] === 'AlreadyLocked', r[round]);
  }
  console.log(`# firefox race: ${RACE_ROUNDS} rounds in ${Date.now() - started} ms, wins per tab ${wins.join('/')}`);
  assert.ok(wins.every((w) => w > 0), `wins per tab: ${wins}`);
  await firefox.switchTo(tabs[1]);
  await firefox.command('DELETE', '/window');
  await firefox.switchTo(tabs[0]);
});

test('Firefox: a lease survives a reload; it expires, is taken over, and the stale lockId cannot release it', async () => {
  const type = `reload-${++testNumber}`;
  await loadFixture();
  const lockId = (await call('tryLock', type, '1', { ttlMs: 60_000 })).ok;
  assert.match(lockId, new RegExp(`^${type}/1/[0-9a-f]{32}$`));
  const { expiresAt } = (await call('checkLock', lockId)).ok;
  await firefox.command('POST', '/refresh', {});
  assert.equal(await firefox.run(() => window.fixtureReady), true);
  assert.equal((await call('checkLock', lockId)).ok?.expiresAt, expiresAt, 'after the reload');
  assert.equal((await call('tryLock', type, '1')).error?.code, 'AlreadyLocked');

  const stale = (await call('tryLock', type, '2', { ttlMs: 500 })).ok;
  await sleep(700);
  assert.equal((await call('checkLock', stale)).error?.code, 'Expired');
  const other = await firefox.newTab();
  await loadFixture();
  const fresh = (await call('tryLock', type, '2', { ttlMs: 60_000 })).ok;
  assert.ok(fresh, 'the expired lease can be taken over from another tab');
  assert.equal((await call('releaseLock', stale)).error?.code, 'TakenOver');
  assert.ok((await call('checkLock', fresh)).ok, 'the new holder kept its lease');
  const listed = (await call('list')).ok.filter((l) => l.type === type);
  assert.deepEqual(listed.map((l) => l.id), ['1', '2']);
  await firefox.command('DELETE', '/window');
  const [first] = await firefox.command('GET', '/window/handles');
  await firefox.switchTo(first);
  assert.notEqual(first, other);
});

test('Firefox: the demo story (edit form in two tabs, keep-alive, close without saving, save after expiry)', async () => {
  const article = `ff-${++testNumber}`;
  const query = `article=${article}&ttl=3000&every=500&retry=300`;
  const stateOf = () => document.querySelector('#status').dataset.state;
  const waitState = (state, timeoutMs) =>
    until((want) => (document.querySelector('#status').dataset.state === want ? want : null), timeoutMs, state);

  const first = await firefox.currentTab();
  await firefox.goto(`${server.url}www/edit-form.html?${query}`);
  await waitState('editing');
  const second = await firefox.newTab();
  await firefox.goto(`${server.url}www/edit-form.html?${query}`);
  await waitState('locked');
  assert.match(await firefox.run(() => document.querySelector('#status').textContent), /being edited elsewhere/);

  await sleep(4500); // past the ttl: the first (now a hidden, throttled tab) keeps its lease alive
  assert.equal(await firefox.run(stateOf), 'locked');
  await firefox.switchTo(first);
  assert.equal(await firefox.run(stateOf), 'editing');

  const closedAt = Date.now();
  await firefox.command('DELETE', '/window'); // close the first without saving
  await firefox.switchTo(second);
  await waitState('editing', 10_000);
  const waited = Date.now() - closedAt;
  console.log(`# firefox demo: the second tab could edit ${waited} ms after the first was closed (ttl 3000 ms)`);
  assert.ok(waited >= 1500, `not before the lease expired (${waited} ms)`);

  // The second freezes (keep-alive paused), its lease expires, and its save fails without writing.
  await firefox.run(() => {
    document.querySelector('#pause').click();
    document.querySelector('#title').value = 'stale edit';
  });
  await sleep(3500);
  await firefox.run(() => document.querySelector('#save').click());
  await waitState('save-failed');
  assert.match(await firefox.run(() => document.querySelector('#status').textContent), /^Not saved: your edit lease expired at /);
  const stored = await firefox.run((a) => localStorage.getItem(`weblocks-demo:article:${a}`), article);
  assert.equal(stored, null, 'nothing was overwritten');
});
