// The three things measured side by side: the browser's native navigator.locks, weblocks as a polyfill
// (classic script on a plain-http origin, where the browser has no native API), and weblocks as a
// ponyfill (the ESM package's `locks` object beside the native API, on a secure origin).

/** The host name the browsers resolve to 127.0.0.1, so pages there are plain http (not a secure context). */
export const plainHttpHost = 'weblocks.test';

export const variants = [
  { id: 'native', label: 'native', page: 'bench/pages/native.html', secure: true },
  { id: 'polyfill', label: 'weblocks polyfill', page: 'bench/pages/polyfill.html', secure: false },
  { id: 'ponyfill', label: 'weblocks ponyfill', page: 'bench/pages/ponyfill.html', secure: true },
];

/**
 * `node bench/run.mjs --baseline=FILE`: another build's classic script, measured as the polyfill is and
 * interleaved with it, so that two builds are compared in one run (on a loaded machine, two runs an hour
 * apart differ by more than most changes). Added to `variants` by `addBaseline`.
 */
export const baselineVariant = { id: 'baseline', label: 'baseline polyfill', page: 'bench/pages/baseline.html', secure: false };

export function addBaseline() {
  if (!variants.includes(baselineVariant)) variants.push(baselineVariant);
}

/**
 * Not measured: a lock manager confined to its tab (bench/pages/per_tab_locks.js), on which the smoke
 * test runs the cross-tab scenarios to check that their safety checks catch a lock that does not
 * coordinate across tabs.
 */
export const perTabControl = { id: 'control', label: 'per-tab control', page: 'bench/pages/control.html', secure: true };

/**
 * The URL of `path` (default: the variant's page, with `query`) for a variant: 127.0.0.1 for secure
 * variants, the plain-http host otherwise.
 */
export function urlFor(variant, port, path = variant.page, query = '') {
  const host = variant.secure ? '127.0.0.1' : plainHttpHost;
  return `http://${host}:${port}/${path}${query}`;
}
