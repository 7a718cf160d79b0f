// The Firefox driver of the bench: Debian's firefox-esr through puppeteer-core over WebDriver BiDi
// (playwright-core cannot drive a stock Firefox: docs/DEVELOPMENT.md). Same tab interface as
// bench/lib/chromium.mjs, less what Firefox cannot do from outside: no renderer crash (scenario 8's
// crash row reads "not drivable"), no `gc()` or `performance.memory` (memory figures are absent).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { plainHttpHost } from './variants.mjs';

export const name = 'firefox';

export const firefoxPath = process.env.FIREFOX_PATH ?? '/usr/bin/firefox-esr';

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
    canCrash: false,
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
  return {
    errors,
    crashed: false,
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    goto(url) {
      navigation = page.goto(url).catch(() => {});
    },
    armCrash() {
      throw new Error('Firefox: a tab cannot be crashed from outside');
    },
    async close() {
      await Promise.race([navigation, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      await page.close();
    },
  };
}
