// The WebKit driver of the tests and the bench: Debian's WebKitGTK (the engine of Safari and of every iOS
// browser), its MiniBrowser driven by WebKitWebDriver over W3C WebDriver, under an Xvfb display of its own.
// Same tab interface as bench/lib/firefox.mjs: `newTab(url)` gives `{ evaluate(fn, arg), goto(url),
// close(), errors }`.
//
// One WebDriver session is one browser with one origin state (storage, BroadcastChannel); its windows are the
// tabs. A session runs one command at a time, and a tab's `evaluate` may await for seconds (a lock grant that
// another tab's action brings), so `evaluate` does not block the session: it starts the function in the page,
// keeps its promise under an id and polls for the outcome with short commands, so the other tabs' commands
// interleave. Console output does not reach the driver: the fixtures record their errors in the page
// (`window.pageErrors`), and `errors` reads them when asked.
//
// A crash is a SIGKILL of the window's WebKitWebProcess (each window has one of its own), found as the one
// that spends CPU while the window busy-loops. WebKitWebDriver then deletes the session ("session deleted
// because of page crash or hang"), though the other windows live on: so nothing of that session answers
// after a crash, and the next `newTab` starts a new browser.
import { spawn } from 'node:child_process';
import { freePort } from './free_port.mjs';
import { descendants, tabProcess } from './processes.mjs';

export const name = 'webkit';

export const miniBrowserPath = process.env.MINIBROWSER_PATH ?? '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';
export const webDriverPath = process.env.WEBKIT_WEBDRIVER_PATH ?? '/usr/bin/WebKitWebDriver';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The web content processes under this process (one per MiniBrowser window). */
export const webProcesses = () => descendants().filter((p) => /WebKitWebProcess/.test(p.command));

/** Starts Xvfb on a display it picks itself; resolves with `{ display, stop }`. */
function startXvfb() {
  return new Promise((resolve, reject) => {
    const child = spawn('Xvfb', ['-displayfd', '3', '-screen', '0', '1280x1024x24', '-nolisten', 'tcp'], {
      stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.stdio[3].on('data', (chunk) => {
      const display = `:${String(chunk).trim()}`;
      resolve({ display, stop: () => child.kill() });
    });
    child.once('exit', (code) => reject(new Error(`Xvfb exited (${code}): ${stderr}`)));
  });
}

/** Starts WebKitWebDriver on a free port of `display`; resolves with `{ url, stop }` once it answers. */
async function startDriver(display) {
  const port = await freePort();
  const child = spawn(webDriverPath, [`--port=${port}`], { env: { ...process.env, DISPLAY: display }, stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      const status = await (await fetch(`${url}/status`)).json();
      if (status.value) return { url, stop: () => child.kill() };
    } catch {
      // not listening yet
    }
    await sleep(50);
  }
  child.kill();
  throw new Error('WebKitWebDriver did not start');
}

/** A browser whose `newTab` starts a new one in place of a session a crash ended. */
export async function launch() {
  let browser = await launchSession();
  // One replacement for every tab opened at once after a crash (the bench opens a scenario's tabs together).
  let replacing = null;
  const current = async () => {
    if (browser.crashed) {
      replacing ??= (async () => {
        await browser.close();
        browser = await launchSession();
      })().finally(() => (replacing = null));
    }
    await replacing;
    return browser;
  };
  return {
    name,
    version: browser.version,
    canCrash: true,
    measuresMemory: false,
    newTab: async (url) => (await current()).newTab(url),
    async close() {
      await replacing?.catch(() => {});
      await browser.close();
    },
  };
}

/** Xvfb, WebKitWebDriver and one session of MiniBrowser: `{ version, newTab, crashed, close }`. */
async function launchSession() {
  const xvfb = process.env.DISPLAY && process.env.WEBKIT_USE_DISPLAY ? { display: process.env.DISPLAY, stop() {} } : await startXvfb();
  let driver;
  try {
    driver = await startDriver(xvfb.display);
    const command = async (method, path, body) => {
      const response = await fetch(driver.url + path, {
        method,
        headers: { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const { value } = await response.json();
      if (value && value.error) throw new Error(`WebDriver ${method} ${path}: ${value.error}: ${value.message}`);
      return value;
    };
    const { sessionId, capabilities } = await command('POST', '/session', {
      capabilities: { alwaysMatch: { 'webkitgtk:browserOptions': { binary: miniBrowserPath, args: ['--automation'] } } },
    });
    const session = (path) => `/session/${sessionId}${path}`;
    // One command at a time, each switching to its tab's window first.
    let queue = Promise.resolve();
    // The session's first window stays blank: closing a session's last window would end the session, and
    // a new window is opened from it (the current window must exist).
    const anchor = await command('GET', session('/window'));
    let current = anchor;
    const inWindow = (handle, method, path, body) => {
      const run = queue.then(async () => {
        if (handle !== current) {
          await command('POST', session('/window'), { handle });
          current = handle;
        }
        return command(method, session(path), body);
      });
      queue = run.catch(() => {});
      return run;
    };
    let evaluations = 0;
    const newTab = async (url) => {
      const { handle } = await inWindow(anchor, 'POST', '/window/new', { type: 'window' });
      const script = (source) => inWindow(handle, 'POST', '/execute/sync', { script: source, args: [] });
      /** Navigates, and waits until the page has loaded (its module scripts have run). */
      const navigate = async (to) => {
        await inWindow(handle, 'POST', '/url', { url: to });
        for (let i = 0; i < 500; i++) {
          const state = await script('return location.href !== "about:blank" && document.readyState;').catch(() => null);
          if (state === 'complete') return;
          await sleep(10);
        }
        throw new Error(`${to} did not load`);
      };
      let navigation = Promise.resolve();
      const tab = {
        closed: false,
        crashed: false,
        errors: [],
        /** `fn(arg)` in the tab's page (a function's source, as playwright's `evaluate` takes it). */
        async evaluate(fn, arg) {
          const id = `e${++evaluations}`;
          await script(
            `const slot = (window.__webdriverEvaluations ??= {}); slot[${JSON.stringify(id)}] = { done: false };` +
              `Promise.resolve().then(() => (${fn})(${JSON.stringify(arg)})).then(` +
              `(value) => { slot[${JSON.stringify(id)}] = { done: true, value: JSON.stringify(value === undefined ? null : value) }; },` +
              `(error) => { slot[${JSON.stringify(id)}] = { done: true, error: String(error && error.stack || error) }; });`,
          );
          for (let wait = 1; ; wait = Math.min(wait * 2, 20)) {
            const outcome = await script(
              `const slot = window.__webdriverEvaluations, id = ${JSON.stringify(id)};` +
                `const o = slot && slot[id]; if (o && o.done) delete slot[id]; return o ? o : { done: true, error: 'the page went away' };`,
            );
            if (outcome.done) {
              if (outcome.error !== undefined) throw new Error(`in the WebKit tab: ${outcome.error}`);
              return JSON.parse(outcome.value);
            }
            await sleep(wait);
          }
        },
        /** Starts a navigation without waiting for it (as the Chromium and Firefox drivers' `goto`). */
        goto(to) {
          navigation = navigate(to).catch(() => {});
        },
        /** The pid of this window's WebKitWebProcess: the window busy-loops for about a second to single it out. */
        processId: () => tabProcess(tab.evaluate, webProcesses),
        /** Get ready to crash the window: returns a function that kills its WebKitWebProcess (SIGKILL) at once. */
        async armCrash() {
          const pid = await tab.processId();
          return Object.assign(
            () => {
              tab.crashed = true;
              instance.crashed = true;
              process.kill(pid, 'SIGKILL');
            },
            { pid },
          );
        },
        /** The errors the page recorded (`window.pageErrors`), added to `errors`. */
        async collectErrors() {
          const recorded = await script('return window.pageErrors || [];').catch(() => []);
          tab.errors.push(...recorded);
          return tab.errors;
        },
        async close() {
          if (tab.closed) return;
          tab.closed = true;
          await Promise.race([navigation, sleep(5000)]);
          await inWindow(handle, 'DELETE', '/window');
          current = null;
        },
      };
      await navigate(url);
      return tab;
    };
    const instance = {
      version: `WebKitGTK ${capabilities.browserVersion}`,
      crashed: false,
      newTab,
      async close() {
        await command('DELETE', session('')).catch(() => {});
        driver.stop();
        xvfb.stop();
      },
    };
    return instance;
  } catch (e) {
    driver?.stop();
    xvfb.stop();
    throw e;
  }
}
