// The Chromium driver of the bench: Debian's headless chromium through playwright-core, with the test
// suite's closed-network flags (tests/e2e/browser.mjs) plus what the scenarios need: a plain-http host
// name, `gc()` and exact `performance.memory` figures. A tab is { evaluate(fn, arg), goto(url), armCrash(),
// close(), crashed, errors }, the interface bench/lib/firefox.mjs offers too.
import { launchChromium } from '../../tests/e2e/browser.mjs';
import { plainHttpHost } from './variants.mjs';
import { descendants } from './processes.mjs';

export const name = 'chromium';

/** The renderer processes under this process (one per site, or more). */
export const rendererProcesses = () => descendants().filter((p) => /--type=renderer/.test(p.command));

/** With `backForwardCache`, the back/forward cache is on (playwright turns it off by default). */
export async function launch({ backForwardCache = false } = {}) {
  const browser = await launchChromium({
    backForwardCache,
    args: [
      `--host-resolver-rules=MAP ${plainHttpHost} 127.0.0.1`,
      '--js-flags=--expose-gc',
      '--enable-precise-memory-info',
    ],
  });
  const context = await browser.newContext();
  return {
    name,
    version: browser.version(),
    canCrash: true,
    measuresMemory: true,
    async newTab(url) {
      const page = await context.newPage();
      const tab = wrapPage(page);
      await page.goto(url);
      return tab;
    },
    close: () => browser.close(),
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
    /** Start a navigation without waiting for it. */
    goto(url) {
      navigation = page.goto(url).catch(() => {});
    },
    /** Get ready to crash the renderer: returns a function that crashes it (CDP Page.crash) at once. */
    async armCrash() {
      const session = await page.context().newCDPSession(page);
      return () => {
        session.send('Page.crash').catch(() => {});
      };
    },
    /** A CDP session on this tab (Chromium only), e.g. for a CPU profile. */
    cdp: () => page.context().newCDPSession(page),
    async close() {
      // Closing a page while it navigates can hang playwright: let the navigation end first.
      await Promise.race([navigation, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      await page.close();
    },
  };
  page.on('crash', () => (tab.crashed = true));
  return tab;
}
