// The Firefox driver of the bench: Debian's firefox-esr through puppeteer-core over WebDriver BiDi
// (playwright-core cannot drive a stock Firefox: docs/DEVELOPMENT.md). Same tab interface as
// bench/lib/chromium.mjs, less what Firefox cannot do from outside: no `gc()` or `performance.memory`
// (memory figures are absent). A crash is a SIGKILL of the tab's content process, found as the one that
// spends CPU while the tab busy-loops; over BiDi the other windows stay drivable after it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { plainHttpHost } from './variants.mjs';
import { descendants, tabProcess } from './processes.mjs';

export const name = 'firefox';

export const firefoxPath = process.env.FIREFOX_PATH ?? '/usr/bin/firefox-esr';

/** The content processes of web pages under this process (Firefox gives the windows of a site several). */
export const contentProcesses = () => descendants().filter((p) => /-contentproc.* tab\s*$/.test(p.command));

export async function launch() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'weblocks-bench-firefox-'));
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: firefoxPath,
    headless: true,
    userDataDir: profile,
    extraPrefsFirefox: {
      'network.dns.localDomains': plainHttpHost, // resolves to the loopback address: a plain-http origin
      'dom.security.https_first': false,
      'dom.security.https_first_schemeless': false,
      'network.captive-portal-service.enabled': false,
      'network.connectivity-service.enabled': false,
      'app.update.enabled': false,
      'browser.shell.checkDefaultBrowser': false,
      'datareporting.policy.dataSubmissionEnabled': false,
      'toolkit.telemetry.enabled': false,
      'extensions.update.enabled': false,
      'browser.safebrowsing.malware.enabled': false,
      'browser.safebrowsing.phishing.enabled': false,
      // performance.now() at full precision, not in 1 ms steps (Chromium gives 100 µs steps, with jitter).
      'privacy.reduceTimerPrecision': false,
      // Tabs opened by the harness stay "active": no background timer throttling.
      'dom.min_background_timeout_value': 0,
      'dom.timeout.enable_budget_timer_throttling': false,
    },
  });
  const version = await browser.version();
  return {
    name,
    version,
    canCrash: true,
    measuresMemory: false,
    async newTab(url) {
      // A window per tab: Firefox throttles the timers of background tabs of a window (the contention
      // scenario's start time would come seconds late), but every window's tab is in the foreground.
      const page = await browser.newPage({ type: 'window' });
      const tab = wrapPage(page);
      await page.goto(url);
      return tab;
    },
    async close() {
      await browser.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

function wrapPage(page) {
  const errors = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console.error: ${m.text()}`);
  });
  let navigation = Promise.resolve();
  const tab = {
    errors,
    crashed: false,
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    goto(url) {
      navigation = page.goto(url).catch(() => {});
    },
    /** The pid of this tab's content process: the tab busy-loops for about a second to single it out. */
    processId: () => tabProcess((fn, arg) => page.evaluate(fn, arg), contentProcesses),
    /** Get ready to crash the tab: returns a function that kills its content process (SIGKILL) at once. */
    async armCrash() {
      const pid = await tab.processId();
      return Object.assign(
        () => {
          tab.crashed = true;
          process.kill(pid, 'SIGKILL');
        },
        { pid },
      );
    },
    async close() {
      await Promise.race([navigation, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      await page.close();
    },
  };
  return tab;
}
