// js/transport_choice.js in Node.js: the engine told by its own error text whatever the global holds, the
// table by which a context settles on its origin's recorded transport (the wasm's `settleTransport`, as the
// shim calls it), and what a context without IndexedDB does. The record itself (IndexedDB) is exercised in the browsers by transport_agreement.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import init, { settleTransport } from '../../../pkg/weblocks.js';
import {
  ALONE,
  BROADCAST,
  LOG,
  LOG_WITHOUT_CARRIER,
  REFUSED_DISAGREES,
  REFUSED_UNREACHABLE,
  agreeOnTransport,
  engineFamily,
  oneOrderEngine,
  preferredTransport,
} from '../../../js/transport_choice.js';

test('the engine is told by the text of the error it throws, not by globals a script can change', () => {
  assert.equal(engineFamily(), 'v8');
  const saved = Object.getOwnPropertyDescriptor(Error.prototype, 'stack');
  Object.defineProperty(Error.prototype, 'stack', { get: () => '', configurable: true });
  Intl.v8BreakIterator = function v8BreakIterator() {};
  try {
    assert.equal(engineFamily(), 'v8', 'an Error.prototype.stack accessor and Intl.v8BreakIterator change nothing');
  } finally {
    delete Intl.v8BreakIterator;
    if (saved) Object.defineProperty(Error.prototype, 'stack', saved);
    else delete Error.prototype.stack;
  }
});

test('V8 outside a browser (Node.js, Deno) is not an engine trusted with one order; a page-like global is', () => {
  assert.equal(oneOrderEngine(), false, 'Node.js');
  assert.equal(oneOrderEngine({ Deno: {} }), false, 'Deno');
  assert.equal(oneOrderEngine({ document: {} }), true, 'a browser global with V8: Blink');
});

test('the preference: broadcast only with a channel in an engine trusted with one order', () => {
  const withChannel = { BroadcastChannel: function BroadcastChannel() {} };
  assert.equal(preferredTransport(withChannel, true), BROADCAST);
  assert.equal(preferredTransport(withChannel, false), LOG);
  assert.equal(preferredTransport({}, true), LOG_WITHOUT_CARRIER);
  assert.equal(preferredTransport({}, false), LOG_WITHOUT_CARRIER);
});

test('a record only moves a context toward the log, never toward the broadcast transport; what it cannot use, it refuses', async () => {
  await init({ module_or_path: await readFile(new URL('../../../pkg/weblocks_bg.wasm', import.meta.url)) });
  const expected = {
    [BROADCAST]: { [BROADCAST]: BROADCAST, [LOG]: LOG, [LOG_WITHOUT_CARRIER]: LOG_WITHOUT_CARRIER },
    [LOG]: { [BROADCAST]: REFUSED_DISAGREES, [LOG]: LOG, [LOG_WITHOUT_CARRIER]: LOG_WITHOUT_CARRIER },
    [LOG_WITHOUT_CARRIER]: { [BROADCAST]: REFUSED_DISAGREES, [LOG]: REFUSED_DISAGREES, [LOG_WITHOUT_CARRIER]: LOG_WITHOUT_CARRIER },
  };
  for (const preferred of Object.keys(expected)) {
    for (const recorded of Object.keys(expected[preferred])) {
      assert.equal(settleTransport(preferred, recorded), expected[preferred][recorded], `${preferred} finding ${recorded}`);
    }
    assert.equal(settleTransport(preferred, 'something else'), REFUSED_DISAGREES, `${preferred} finding an unknown record`);
  }
});

test('without IndexedDB: a window or a worker refuses; outside a browser the context locks alone', async () => {
  assert.equal(await agreeOnTransport({ document: {} }, BROADCAST), REFUSED_UNREACHABLE, 'a window');
  assert.equal(await agreeOnTransport({ WorkerGlobalScope: function WorkerGlobalScope() {} }, LOG), REFUSED_UNREACHABLE, 'a worker');
  assert.equal(await agreeOnTransport(globalThis, LOG), ALONE, 'Node.js');
  assert.equal(await agreeOnTransport({}, BROADCAST), BROADCAST, 'a bare script context whose channel gives one order');
});

test('an IndexedDB whose open keeps failing: the context refuses after its retries', async () => {
  let opens = 0;
  const indexedDB = {
    open() {
      opens += 1;
      throw new DOMException('storage blocked (test)', 'SecurityError');
    },
  };
  assert.equal(await agreeOnTransport({ indexedDB, document: {} }, BROADCAST), REFUSED_UNREACHABLE);
  assert.equal(opens, 4, 'four attempts');
});
