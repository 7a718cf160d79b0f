// Opening bench pages and bounding the time anything in them may take.
import { urlFor } from './variants.mjs';

export class BenchTimeout extends Error {}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** `promise`, or a BenchTimeout after `ms`. */
export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new BenchTimeout(`${what}: no result within ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** What each variant's page must be, checked before anything is measured in it. */
function whatThePageIs() {
  const weblocksLoaded = typeof weblocks === 'object';
  return {
    secure: self.isSecureContext,
    hasLockManager: typeof bench.locks?.request === 'function',
    measuresNavigatorLocks: bench.locks === navigator.locks,
    navigatorLocksIsWeblocks: weblocksLoaded && navigator.locks === weblocks.locks,
    // The ESM ponyfill defines no global: its object is simply not the browser's LockManager.
    measuresNativeObject: typeof LockManager === 'function' && bench.locks instanceof LockManager && !weblocksLoaded,
  };
}

const expectedPage = {
  native: { hasLockManager: true, secure: true, measuresNavigatorLocks: true, navigatorLocksIsWeblocks: false, measuresNativeObject: true },
  polyfill: { hasLockManager: true, secure: false, measuresNavigatorLocks: true, navigatorLocksIsWeblocks: true, measuresNativeObject: false },
  baseline: { hasLockManager: true, secure: false, measuresNavigatorLocks: true, navigatorLocksIsWeblocks: true, measuresNativeObject: false },
  ponyfill: { hasLockManager: true, secure: true, measuresNavigatorLocks: false, navigatorLocksIsWeblocks: false, measuresNativeObject: false },
  control: { hasLockManager: true, secure: true, measuresNavigatorLocks: false, navigatorLocksIsWeblocks: false, measuresNativeObject: false },
  // bench/pages/relay.html (handoff_anatomy.mjs --relay): weblocks' engine over a shared-worker relay.
  relay: { hasLockManager: true, secure: true, measuresNavigatorLocks: false, navigatorLocksIsWeblocks: false, measuresNativeObject: false },
};

/**
 * Open `variant`'s page (with `query`, e.g. '?instrument') in a new tab and wait until its lock API
 * has granted a first lock. Returns the tab with `ready` (what bench.ready reported).
 */
export async function openReady(ctx, variant, { timeoutMs = 30_000, query = '' } = {}) {
  const tab = await withTimeout(ctx.browser.newTab(urlFor(variant, ctx.port, variant.page, query)), timeoutMs, `${variant.id}: open`);
  try {
    try {
      tab.ready = await withTimeout(tab.evaluate(() => bench.ready), timeoutMs, `${variant.id}: page ready`);
    } catch (e) {
      throw new Error(`${e.message}${tab.errors.length ? ` (page errors: ${tab.errors.join('; ')})` : ''}`);
    }
    const is = await tab.evaluate(whatThePageIs);
    for (const [key, value] of Object.entries(expectedPage[variant.id])) {
      if (is[key] !== value) throw new Error(`${variant.id} page is not what it should be: ${key} = ${is[key]} (${JSON.stringify(is)})`);
    }
    return tab;
  } catch (e) {
    await tab.close().catch(() => {});
    throw e;
  }
}

/**
 * Run `body(tabs)` with `count` fresh tabs of `variant` (opened with `options`, see openReady), all
 * closed afterwards, bounded by `timeoutMs`.
 */
export async function withTabs(ctx, variant, count, timeoutMs, body, options = {}) {
  const tabs = [];
  try {
    for (let i = 0; i < count; i++) tabs.push(await openReady(ctx, variant, options));
    return await withTimeout(body(tabs), timeoutMs, `${variant.id}`);
  } finally {
    await Promise.all(tabs.map((tab) => tab.close().catch(() => {})));
  }
}

/**
 * Run `body(tab)` in a tab of `variant`, bounded by `timeoutMs`: a fresh tab closed afterwards, or with
 * `ctx.reuseTabs` (the smoke run, where opening tabs would dominate) one tab per variant kept open
 * between single-context scenarios and dropped if anything goes wrong in it.
 */
export async function withTab(ctx, variant, timeoutMs, body) {
  if (!ctx.reuseTabs) return withTabs(ctx, variant, 1, timeoutMs, ([tab]) => body(tab));
  ctx.openTabs ??= new Map();
  let tab = ctx.openTabs.get(variant.id);
  if (tab === undefined) {
    tab = await openReady(ctx, variant);
    ctx.openTabs.set(variant.id, tab);
  }
  try {
    return await withTimeout(body(tab), timeoutMs, `${variant.id}`);
  } catch (e) {
    ctx.openTabs.delete(variant.id);
    await tab.close().catch(() => {});
    throw e;
  }
}

/** Close the tabs `withTab` kept open. */
export async function closeKeptTabs(ctx) {
  const tabs = [...(ctx.openTabs?.values() ?? [])];
  ctx.openTabs?.clear();
  await Promise.all(tabs.map((tab) => tab.close().catch(() => {})));
}
