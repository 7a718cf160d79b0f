// The classic script's embedded wasm is inflated and compiled by the engine itself (DecompressionStream,
// WebAssembly.compileStreaming: js/embedded_wasm.js), off the main thread, in Chromium, Firefox and WebKit
// on the plain-http origin, so that a page's own start is not held up by it (the load scenario's "usable"
// row in `npm run bench`); without DecompressionStream, js/inflate.js inflates in a task of its own, after the
// page's next script. Either way the lock the page asked for meanwhile is granted once the wasm is ready.
// Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { eachEngine } from '../fixtures/evidence_engines.mjs';

eachEngine((engine, env) => {
  const load = async (query) => {
    const tab = await env.browser.newTab(`${env.origin.url}tests/e2e/fixtures/decode_steps.html${query}`);
    try {
      return {
        granted: await tab.evaluate(() => window.granted),
        order: await tab.evaluate(() => window.order),
        inflatedAs: await tab.evaluate(() => window.inflatedAs),
        compiledStreaming: await tab.evaluate(() => window.compiledStreaming),
        pageErrors: await tab.evaluate(() => window.pageErrors),
      };
    } finally {
      await tab.close();
    }
  };

  test(`${engine.name}: the embedded wasm is inflated and compiled by the engine (one DecompressionStream, one compileStreaming); the page's next script and a task it queues run; the lock it asked for is granted`, async () => {
    const page = await load('');
    assert.equal(page.granted, 'decode-steps');
    assert.deepEqual(page.inflatedAs, ['deflate']);
    assert.equal(page.compiledStreaming, 1);
    // Off the main thread, the wasm may be compiled before the parser reaches the next script.
    assert.deepEqual([...page.order].sort(), ['a task of the page', 'next script', 'wasm compiled']);
    assert.ok(page.order.indexOf('next script') < page.order.indexOf('a task of the page'));
    assert.deepEqual(page.pageErrors, []);
  });

  test(`${engine.name}, without DecompressionStream: js/inflate.js inflates in a task of its own, after the page's next script; the lock it asked for is granted`, async () => {
    const page = await load('?js-inflate');
    assert.equal(page.granted, 'decode-steps');
    assert.deepEqual(page.inflatedAs, []);
    assert.equal(page.compiledStreaming, 0);
    assert.equal(page.order[0], 'next script');
    assert.deepEqual([...page.order].sort(), ['a task of the page', 'next script', 'wasm compiled']);
    assert.deepEqual(page.pageErrors, []);
  });
});
