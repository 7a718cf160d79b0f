// The classic script's embedded wasm is inflated and compiled by the engine itself (DecompressionStream,
// WebAssembly.compileStreaming: js/embedded_wasm.js), off the main thread, in Chromium, Firefox and WebKit
// on the plain-http origin: the page's next script, and a task it queues, run before the wasm is
// instantiated, so that a page's own start is not held up by it (the load scenario's "usable" row in
// `npm run bench`); and the lock the page asked for meanwhile is granted once it is. (Without
// DecompressionStream, js/inflate.js inflates: tests/e2e/package_script_tag.test.mjs.)
// Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { eachEngine } from './fixtures/evidence_engines.mjs';

eachEngine((engine, env) => {
  test(`${engine.name}: the embedded wasm is inflated and compiled by the engine; the page's next script and a task it queues run before it is instantiated; the lock it asked for is then granted`, async () => {
    const tab = await env.browser.newTab(`${env.origin.url}tests/e2e/fixtures/decode_steps.html`);
    try {
      assert.equal(await tab.evaluate(() => window.granted), 'decode-steps');
      assert.deepEqual(await tab.evaluate(() => window.order), ['next script', 'a task of the page', 'wasm compiled']);
      assert.deepEqual(await tab.evaluate(() => window.inflatedAs), ['deflate']);
      assert.equal(await tab.evaluate(() => window.compiledStreaming), 1);
      assert.deepEqual(await tab.evaluate(() => window.pageErrors), []);
    } finally {
      await tab.close();
    }
  });
});
