// The classic script decodes its embedded wasm in steps, one task each (scripts/size/embed_wasm.mjs), in
// Chromium, Firefox and WebKit on the plain-http origin: the page's next script, and a task it queues, run
// before the wasm is decoded, so that a page's own start is not held up by the decoding (the load scenario's
// "usable" row in `npm run bench`); and the lock the page asked for meanwhile is granted once it is.
// Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { eachEngine } from '../fixtures/evidence_engines.mjs';

eachEngine((engine, env) => {
  test(`${engine.name}: the page's next script and a task it queues run before the embedded wasm is decoded; the lock it asked for is then granted`, async () => {
    const tab = await env.browser.newTab(`${env.origin.url}tests/e2e/fixtures/decode_steps.html`);
    try {
      assert.equal(await tab.evaluate(() => window.granted), 'decode-steps');
      assert.deepEqual(await tab.evaluate(() => window.order), ['next script', 'a task of the page', 'wasm decoded']);
      assert.deepEqual(await tab.evaluate(() => window.pageErrors), []);
    } finally {
      await tab.close();
    }
  });
});
