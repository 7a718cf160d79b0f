// Nothing left behind, in Firefox and WebKit: windows that end with their browser killed (SIGKILL of the
// browser's own process: no `pagehide`, nothing of the page runs after) leave their liveness databases
// behind, and the next window of the origin, in the browser started again on the same profile, collects
// them as it looks around (src/protocol/evidence.rs). So the count of `weblocks-*` databases that window
// sees does not grow with the number K of browsers killed before it. Chromium's own case (windows crashed
// with CDP) is evidence_collection.test.mjs.
//
// No WebDriver here: WebKitWebDriver's MiniBrowser (`--automation`) keeps website data in memory only, and a
// driver's session would not outlive the kill anyway. Each browser is started on the command line with the
// page's URL and a profile of its own kept across the kills (Firefox: `-profile DIR`; WebKitGTK's
// MiniBrowser without `--automation` keeps its data under `$XDG_DATA_HOME`), and the pages report to the test
// server (fixtures/collection_page.js). Every process killed is one this test started, by pid. On a
// plain-http origin (no native API). Needs the build (`npm run build`), Firefox ESR, WebKitGTK and Xvfb.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startReportServer } from '../fixtures/report_server.mjs';
import { descendants } from '../../../bench/lib/processes.mjs';
import { firefoxPath } from '../../../bench/lib/firefox.mjs';
import { miniBrowserPath } from '../../../bench/lib/webkit.mjs';
import { plainHttpHost } from '../../../bench/lib/variants.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts Xvfb on a display it picks; resolves with `{ display, stop }`. */
function startXvfb() {
  return new Promise((resolve, reject) => {
    const child = spawn('Xvfb', ['-displayfd', '3', '-screen', '0', '1280x1024x24', '-nolisten', 'tcp'], { stdio: ['ignore', 'ignore', 'ignore', 'pipe'] });
    child.stdio[3].once('data', (chunk) => resolve({ display: `:${String(chunk).trim()}`, stop: () => child.kill() }));
    child.once('exit', (code) => reject(new Error(`Xvfb exited (${code})`)));
  });
}

/** Firefox ESR on profile `dir`: a plain-http origin resolved to the loopback, no first-run pages, no session restored after a kill. */
const firefox = {
  name: 'Firefox',
  prepare(dir) {
    const prefs = {
      'network.dns.localDomains': plainHttpHost,
      'dom.security.https_first': false,
      'dom.security.https_first_schemeless': false,
      'browser.sessionstore.resume_from_crash': false,
      'browser.startup.page': 0,
      'browser.startup.homepage_override.mstone': 'ignore',
      'startup.homepage_welcome_url': '',
      'browser.aboutwelcome.enabled': false,
      'browser.shell.checkDefaultBrowser': false,
      'datareporting.policy.dataSubmissionEnabled': false,
      'toolkit.telemetry.reportingpolicy.firstRun': false,
      'app.update.enabled': false,
      'network.captive-portal-service.enabled': false,
      'network.connectivity-service.enabled': false,
      'browser.safebrowsing.malware.enabled': false,
      'browser.safebrowsing.phishing.enabled': false,
      'extensions.update.enabled': false,
      'toolkit.startup.max_resumed_crashes': -1,
    };
    fs.writeFileSync(path.join(dir, 'user.js'), Object.entries(prefs).map(([k, v]) => `user_pref(${JSON.stringify(k)}, ${JSON.stringify(v)});\n`).join(''));
    return {};
  },
  start: (dir, url) => spawn(firefoxPath, ['-headless', '-no-remote', '-profile', dir, url], { stdio: 'ignore' }),
};

/** WebKitGTK's MiniBrowser, its website data under `dir` (XDG_DATA_HOME), on an Xvfb display of the test's. */
const webkit = {
  name: 'WebKit',
  prepare: () => ({}),
  start: (dir, url, display) =>
    spawn(miniBrowserPath, [url], {
      env: { ...process.env, DISPLAY: display, XDG_DATA_HOME: path.join(dir, 'data'), XDG_CACHE_HOME: path.join(dir, 'cache'), XDG_CONFIG_HOME: path.join(dir, 'config') },
      stdio: 'ignore',
    }),
};

/** SIGKILL of `child` (the browser's own process), then waits until every process it started is gone too. */
async function kill(child) {
  const family = [child.pid, ...descendants(child.pid).map((p) => p.pid)];
  const exited = new Promise((resolve) => child.once('exit', resolve));
  process.kill(child.pid, 'SIGKILL');
  await exited;
  for (let i = 0; i < 200 && family.some((pid) => fs.existsSync(`/proc/${pid}`) && !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))); i++) await sleep(50);
}

/**
 * On a fresh profile: K times, the browser started with a window that loads weblocks (every other one holding
 * a lock), killed once the window is ready; then the browser started again on that profile with a newcomer
 * window. Returns the weblocks databases the newcomer sees.
 */
async function afterKills(engine, env, k) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `weblocks-collection-${engine.name.toLowerCase()}-`));
  const page = (query) => `http://${plainHttpHost}:${env.server.port}/tests/e2e/fixtures/collection.html?${query}`;
  engine.prepare(dir);
  const run = `${engine.name}-${k}`;
  try {
    for (let n = 0; n < k; n++) {
      const label = `${run}-doomed${n}`;
      const child = engine.start(dir, page(`role=doomed&label=${label}&hold=${n % 2 === 0 ? 1 : 0}`), env.display);
      try {
        await env.server.until(label, 'ready', { ms: 60_000 });
        // COLLECTION_KILL_AFTER_MS (a diagnosis): let the window finish collecting what the last one left.
        await sleep(Number(process.env.COLLECTION_KILL_AFTER_MS ?? 0));
      } finally {
        await kill(child);
      }
    }
    const label = `${run}-newcomer`;
    const child = engine.start(dir, page(`role=newcomer&label=${label}`), env.display);
    try {
      const [{ databases, versions }] = await env.server.until(label, 'databases', { ms: 60_000 });
      console.log(`# ${run}: ${versions.join(', ')}`);
      return databases;
    } finally {
      await kill(child);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// What a killed browser leaves can be no entry's: a watch of a database that does not exist makes one at
// version 0 and aborts its upgrade, which a kill leaves (Gecko, WebKit) and WebKit keeps even unkilled. A
// window lists the origin's databases as it starts, before it reads the register, and collects the
// liveness databases no entry names (src/protocol/evidence.rs, "Nor what no entry names"). The newcomer
// prints every weblocks database it sees, with its version.
for (const engine of [firefox, webkit]) {
  test(`${engine.name}: windows whose browser is killed leave nothing the next window, after a restart on the same profile, does not collect: the count of weblocks' databases does not grow with them`, async () => {
    const env = { server: await startReportServer('/collection') };
    const xvfb = engine === webkit ? await startXvfb() : null;
    env.display = xvfb?.display;
    try {
      const one = await afterKills(engine, env, 1);
      const six = await afterKills(engine, env, 6);
      console.log(`# ${engine.name.toLowerCase()}: after 1 browser killed: ${one.length} databases (${one.join(', ')}); after 6: ${six.length}`);
      assert.equal(six.length, one.length, `after 6 kills: ${six.join(', ')}; after 1: ${one.join(', ')}`);
      // The transport's record, the register, and the newcomer's own: nothing of a killed window.
      const liveness = six.filter((name) => /^weblocks-alive:.+:\d+$/.test(name));
      assert.equal(liveness.length, 1, `the newcomer's database only: ${six.join(', ')}`);
    } finally {
      xvfb?.stop();
      await env.server.close();
    }
  });
}
