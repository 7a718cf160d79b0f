// Launch Debian's chromium through playwright-core for the browser tests, with the closed-network
// flags this machine needs. `withBrowser` closes the browser whatever happens in the body; the tests
// that keep one browser across several test cases use `launchChromium` and close it in `after()`
// (playwright also kills the browsers it launched if the Node process exits).
import { before, after } from 'node:test';
import { chromium } from 'playwright-core';
import { startServer } from './server.mjs';

export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export const chromiumArgs = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

/**
 * Launch headless chromium with the standard flags plus `args`. The caller must `close()` it. With
 * `backForwardCache`, the back/forward cache that playwright turns off by default is on, as in a user's Chromium.
 */
export function launchChromium({ args = [], backForwardCache = false } = {}) {
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [...chromiumArgs, ...args],
    ignoreDefaultArgs: backForwardCache ? ['--disable-back-forward-cache'] : [],
  });
}

/** Run `body(browser)` with a fresh browser that is closed afterwards, even when `body` throws. */
export async function withBrowser(options, body) {
  const browser = await launchChromium(options);
  try {
    return await body(browser);
  } finally {
    await browser.close();
  }
}

/**
 * Open a page that records uncaught errors and console errors (for failure messages).
 * `page.errors` is the list; `assertNoPageErrors(page)` throws if it is non-empty.
 */
export async function openPage(browser) {
  const page = await browser.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') page.errors.push(`console.error: ${m.text()}`);
  });
  return page;
}

/**
 * For a test file whose tests share one server of the repository and one Chromium: starts both before
 * the file's tests, closes both after them. The object returned holds them as `server` and `browser` from
 * the file's `before` hook on (undefined until then: read them inside tests, not at the file's top level).
 */
export function shareServerAndChromium() {
  const shared = { server: undefined, browser: undefined };
  before(async () => {
    shared.server = await startServer();
    shared.browser = await launchChromium();
  });
  after(async () => {
    await shared.browser?.close();
    await shared.server?.close();
  });
  return shared;
}
